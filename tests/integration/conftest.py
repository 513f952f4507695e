from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator

import pytest

from tests.integration.targets import BIN, ROOT, Target, have_delve, named_link


@pytest.fixture(scope="session")
def built_targets() -> None:
    """Build the bundled targets once per test session."""
    subprocess.run(["make", "-s", "targets"], cwd=ROOT, check=True)


@pytest.fixture
def start_target(built_targets: None) -> Iterator[Callable[..., Target]]:
    started: list[Target] = []

    def start(name: str, *args: str, env: dict[str, str] | None = None, binary: bool = True,
              as_name: str | None = None, stdin: bool = False) -> Target:
        """Start targets/bin/NAME ARGS (or, with binary=False, the command NAME ARGS); ``as_name``:
        through a link of that name, so that its process name (comm) is its own: a test that finds
        it by name (--pgrep) matches nothing else that runs on the machine (unique_name())."""
        program = str(BIN / name) if binary else name
        if as_name is not None:
            program = str(named_link(program, as_name))
        target = Target([program, *args], env=env, stdin=stdin)
        started.append(target)
        return target

    yield start
    for target in started:
        target.stop()


@pytest.fixture
def go_target(start_target: Callable[..., Target]) -> Target:
    if not have_delve():
        pytest.skip("dlv or the Go target is missing (make setup installs them)")
    return start_target("ringbuf-go")
