"""Python functions as probes (--at py:module.function): every call of the function one row, the
frame's arguments read as py: names, other functions' calls not counted; for Debian's python3.11 and
pyenv's 3.8-3.13."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pythons import DEBIAN, SCRIPTS, SOME, need, some
from tests.integration.targets import (
    ROOT,
    Target,
    assert_code_matches_files,
    code_differs,
    read_csv,
    sampler,
    start_sampler,
    stop_once,
    wait_until_patched,
)
from tests.integration.test_inprocess import kill_worker

PROBED = SCRIPTS / "probed.py"


def _trace_probed(python: str, start_target: Callable[..., Target], tmp_path: Path, *extra: str,
                  script: Path = PROBED) -> tuple[list[dict[str, str]], str, Target]:
    """probed.py's 400 calls of handle() traced: the rows, sampler's stderr, the target."""
    need(python)
    target = start_target(python, str(script), binary=False, stdin=True)
    out = tmp_path / "calls.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "py:__main__.handle", "--expr", "n=py:n",
                         *extra, "--duration", "120s", "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    target.send("go")
    target.wait_for(lambda: "done calls=400" in target.lines, 120, "the program did not finish its calls")
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > 400, timeout=60)
    assert proc.returncode == 0, stderr
    assert_code_matches_files(target.pid)
    return read_csv(out), stderr, target


def _stops(stderr: str) -> int:
    """How many times sampler's int3s stopped a thread (the summary's every-hit line)."""
    stops = re.search(r"every hit: (\d+) ran on without a single-step, (\d+) single-stepped", stderr)
    assert stops is not None, stderr[-2000:]
    return int(stops.group(1)) + int(stops.group(2))


@pytest.mark.parametrize("python", SOME)
def test_every_call_of_a_python_function_from_two_threads_is_a_row_with_its_arguments(
        python: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    rows, stderr, target = _trace_probed(python, start_target, tmp_path, "--expr", "tag=py:tag")
    assert len(rows) == 400, (len(rows), stderr[-2000:])
    assert all(row["error"] == "" for row in rows), [row["error"] for row in rows if row["error"]][:3]
    assert Counter(row["tag"] for row in rows) == {"alpha": 200, "beta": 200}
    for tag in ("alpha", "beta"):
        assert sorted(int(row["n"]) for row in rows if row["tag"] == tag) == list(range(200))
        assert len({row["thread"] for row in rows if row["tag"] == tag}) == 1
    # the test of each call ran in the target: only handle's 400 calls stopped, of 1,200 and more Python calls
    # (handle, other twice a loop, and the threads' own)
    assert "a test in the target lets only its function's calls through to an int3" in stderr, stderr
    tested = re.search(r"(\d+) Python call\(s\) tested in the target", stderr)
    assert tested is not None and int(tested.group(1)) >= 1200, stderr[-2000:]
    assert _stops(stderr) == 400
    assert not [line for line in Path(f"/proc/{target.pid}/maps").read_text().splitlines() if "sampler-" in line]


def test_a_process_under_seccomp_gets_int3s_and_every_call_counted(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    """The in-process test's system call could be refused, or kill the process: int3s at the places, and
    sampler's own test at each stop (as --probe int3 puts them), every Python call of the process stopping."""
    rows, stderr, target = _trace_probed(DEBIAN, start_target, tmp_path, script=SCRIPTS / "seccomped.py")
    assert target.status()["Seccomp"].strip() == "2"
    assert "an int3 (the process has a seccomp filter" in stderr, stderr[-2000:]
    assert sorted(int(row["n"]) for row in rows) == sorted(list(range(200)) * 2)
    assert _stops(stderr) >= 1200


def test_a_python_function_that_is_not_there_is_one_line(start_target: Callable[..., Target]) -> None:
    need(DEBIAN)
    target = start_target(DEBIAN, str(PROBED), binary=False, stdin=True)
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


WRITTEN = SCRIPTS / "written.py"


def _line(marker: str) -> int:
    lines = WRITTEN.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.endswith(f"# marker: {marker}"))


@pytest.mark.parametrize(("python", "marker"), some(
    ("debian-3.11", "plain"), ("debian-3.11", "inner body")))
def test_a_python_function_is_found_by_a_line_and_each_call_counted(
        python: str, marker: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    # plain(): each call comes right after a Made().__init__ the interpreter started from C at the same
    # frame address (a start at the eval loop's entry is not plain's); inner() is no global: it is found
    # as a constant of outer()'s code, and each of its closures runs it
    need(python)
    target = start_target(python, str(WRITTEN), binary=False, stdin=True)
    out = tmp_path / "calls.csv"
    name = "n" if marker == "plain" else "k"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", f"py:written.py:{_line(marker)}",
                         "--expr", f"{name}=py:{name}", "--duration", "120s", "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    target.send("go")
    target.wait_for(lambda: "done" in target.lines, 120, "the program did not finish its calls")
    want = list(range(3)) if marker == "plain" else sorted([*range(6), *range(10, 16)])
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > len(want), timeout=60)
    assert proc.returncode == 0, stderr
    assert sorted(int(row[name]) for row in read_csv(out)) == want, stderr[-1500:]
    assert_code_matches_files(target.pid)


@pytest.mark.parametrize("marker", ["method body", "tag"])
def test_the_innermost_function_holding_a_line_is_probed(
        marker: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    need(DEBIAN)
    calls = {"method body": 4, "twice": 5, "inner body": 12, "outer": 6, "tag": 7}
    names = {"method body": "Box.method", "twice": "Box.twice", "inner body": "outer.<locals>.inner",
             "outer": "outer", "tag": "Tagged.tag"}
    target = start_target(DEBIAN, str(WRITTEN), binary=False, stdin=True)
    out = tmp_path / "calls.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", f"py:written.py:{_line(marker)}",
                         "--duration", "120s", "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    target.send("go")
    target.wait_for(lambda: "done" in target.lines, 120, "the program did not finish its calls")
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > calls[marker],
                          timeout=60)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert len(rows) == calls[marker], stderr[-1500:]
    assert all(f"[py:{names[marker]}] at " in row["probe"] for row in rows), rows[0]["probe"]
    if marker.endswith("body"):
        assert f"{names[marker]} (written.py:" in stderr, stderr[-1500:]  # (said: its function's start)


def test_a_line_outside_any_function_is_one_line(start_target: Callable[..., Target]) -> None:
    need(DEBIAN)
    target = start_target(DEBIAN, str(WRITTEN), binary=False, stdin=True)
    for location, said in ((f"py:written.py:{_line('module')}", "no function of written.py holds line"),
                           ("py:nothere.py:3", "no module in sys.modules was loaded from a file ending with "
                                                "nothere.py")):
        result = sampler("trace", "--pid", str(target.pid), "--at", location, "--duration", "1s")
        assert result.returncode == 2, result.stderr
        assert said in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr, result.stderr
    assert_code_matches_files(target.pid)


def test_a_killed_worker_leaves_a_python_program_running_and_the_guardian_takes_the_filters_out(
        start_target: Callable[..., Target], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN spinner.py's thread making Python calls without pause, each tested in the target by a probe of a
    # function it never calls (with int3s at the eval loop instead, every one of them stops: the worker
    # killed then, the next call dies of its SIGTRAP, the window docs/safety.md describes)
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(tmp_path / "journal"))
    need(DEBIAN)
    target = start_target(DEBIAN, str(SCRIPTS / "spinner.py"), binary=False)
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--pid", str(target.pid), "--at",
                             "py:__main__.never", "--out", str(tmp_path / "t.csv"), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    target.wait_for(lambda: ("sampler-stops" in Path(f"/proc/{target.pid}/maps").read_text() and
                    code_differs(target.pid)) or proc.poll() is not None, 60, "sampler never put its probes in")
    seen = len(target.lines)
    target.wait_for(lambda: len(target.lines) > seen + 2, 10, "the program counts no more units")
    # WHEN the tracing worker is SIGKILLed
    kill_worker(proc, target, guardian_too=False)
    # THEN the program runs on, and the guardian takes the jumps out and puts the stops' nops back
    target.wait_for(lambda: not code_differs(target.pid), 10, "the guardian did not take the jumps out")
    seen = len(target.lines)
    target.wait_for(lambda: len(target.lines) > seen + 2, 10, "the program counts no more units")
    assert target.proc.poll() is None and target.status()["TracerPid"].strip() == "0"
    assert_code_matches_files(target.pid)
