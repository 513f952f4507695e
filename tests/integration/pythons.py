"""The CPython interpreters here that the tests of `sampler stack` and `py:` run: Debian's python3.11
(make setup installs it) and pyenv's 3.8-3.13 where the machine has them."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = ROOT / "targets" / "python"
CI = os.environ.get("CI") == "true"
DEBIAN = "/usr/bin/python3.11"


def pyenv(minor: int) -> str | None:
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/3.{minor}.*/bin/python3.{minor}")))
    return found[-1] if found else None


PYENV = {f"3.{minor}": pyenv(minor) for minor in range(8, 14)}
ALL = [pytest.param(DEBIAN, id="debian-3.11")] + [pytest.param(path, id=f"pyenv-{version}")
                                                   for version, path in PYENV.items() if path is not None]
MATRIX = os.environ.get("SAMPLER_PYTHON_MATRIX") == "1"
"""make test-python: every interpreter for the tests that take a few (make test: SOME)."""
SOME = ALL if MATRIX else [pytest.param(DEBIAN, id="debian-3.11")]
"""make test: Debian's 3.11 (PGO, LTO: start_frame folded into the eval loop's entry); make test-python
(CI: make test-more) every interpreter, pyenv's 3.8 (frame objects) and 3.13 (RESUME's places, reached from
the eval loop's entry too) among them. some() picks the interpreters a case needs in make test."""


def some(*wanted: tuple[str, str]) -> list[object]:
    """("python", "case") parameters: the (interpreter id, case) pairs given; under make test-python,
    every case on every interpreter."""
    cases = list(dict.fromkeys(case for _, case in wanted))
    return [pytest.param(each.values[0], case, id=f"{case}-{each.id}")
            for each in ALL for case in cases if MATRIX or (each.id, case) in wanted]


def need(python: str) -> None:
    if os.path.exists(python):
        return
    if python == DEBIAN and CI:
        pytest.fail("python3.11 is missing: make setup installs it")
    pytest.skip(f"{python} is not on this machine")
