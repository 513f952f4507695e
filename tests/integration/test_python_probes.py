"""Python functions as probes (--at py:module.function): every call of the function one row, the
frame's arguments read as py: names, other functions' calls not counted; for Debian's python3.11 and
pyenv's 3.8-3.13."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pythons import ALL, SCRIPTS, need
from tests.integration.targets import (
    Target,
    assert_code_matches_files,
    read_csv,
    sampler,
    start_sampler,
    stop_once,
    wait_until_patched,
)

PROBED = SCRIPTS / "probed.py"


@pytest.mark.parametrize("python", ALL)
def test_every_call_of_a_python_function_from_two_threads_is_a_row_with_its_arguments(
        python: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    need(python)
    target = start_target(python, str(PROBED), binary=False, stdin=True)
    out = tmp_path / "calls.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "py:__main__.handle", "--expr", "n=py:n",
                         "--expr", "tag=py:tag", "--duration", "120s", "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    target.send("go")
    target.wait_for(lambda: "done calls=400" in target.lines, 120, "the program did not finish its calls")
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > 400, timeout=60)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert len(rows) == 400, (len(rows), stderr[-2000:])
    assert all(row["error"] == "" for row in rows), [row["error"] for row in rows if row["error"]][:3]
    assert Counter(row["tag"] for row in rows) == {"alpha": 200, "beta": 200}
    for tag in ("alpha", "beta"):
        assert sorted(int(row["n"]) for row in rows if row["tag"] == tag) == list(range(200))
        assert len({row["thread"] for row in rows if row["tag"] == tag}) == 1
    assert "an int3 (a Python function's probe: every Python call of the process stops" in stderr
    assert_code_matches_files(target.pid)


def test_a_python_function_that_is_not_there_is_one_line(start_target: Callable[..., Target]) -> None:
    target = start_target("/usr/bin/python3.11", str(PROBED), binary=False, stdin=True)
    for location, said in (("py:__main__.nope", "no attribute 'nope'"), ("py:nope.handle", "no module 'nope'"),
                           ("py:threading", "a module, not a Python function")):
        result = sampler("trace", "--pid", str(target.pid), "--at", location, "--duration", "1s")
        assert result.returncode == 2, result.stderr
        assert said in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr, result.stderr
    result = sampler("trace", "--pid", str(target.pid), "--at", "py:__main__.handle", "--to", "py:__main__.other",
                     "--duration", "1s")
    assert result.returncode == 2 and "without --to" in result.stderr, result.stderr
    assert_code_matches_files(target.pid)
    target.send("go")
