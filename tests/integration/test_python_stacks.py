"""`sampler stack` and `sampler profile` of CPython programs: every thread's Python frames, beside
py-spy dump on the same stopped process, for Debian's python3.11 and pyenv's 3.8-3.13."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.target import procfs
from tests.integration.pythons import ALL, MATRIX, PYENV, SCRIPTS, SOME, need
from tests.integration.targets import Target, sampler

BLOCKED = SCRIPTS / "blocked.py"
PY_SPY = str(Path(sys.executable).parent / "py-spy")
KNOWN = {"locker": ("wait_for_lock", 14), "sleeper": ("sleep_long", 18), "reader": ("read_socket", 22)}


def _stop(pid: int) -> None:
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 10
    while any(procfs.thread_state(pid, tid) != "T" for tid in procfs.tasks(pid)):
        assert time.monotonic() < deadline, "the process did not stop"
        time.sleep(0.01)


def _ours(pid: int, *more: str) -> dict[str, object]:
    result = sampler("stack", "--pid", str(pid), "--format", "json", *more)
    assert result.returncode == 0, result.stderr
    record: dict[str, object] = json.loads(result.stdout)
    return record


def _python_threads(record: dict[str, object]) -> dict[int, dict[str, object]]:
    threads = record["threads"]
    assert isinstance(threads, list)
    return {t["python_thread"]["ident"]: t for t in threads if "python" in t}


def _untouched(pid: int) -> None:
    status = Path(f"/proc/{pid}/status").read_text()
    assert re.search(r"^TracerPid:\s+0$", status, re.M), status
    assert all(procfs.thread_state(pid, tid) != "t" for tid in procfs.tasks(pid))


@pytest.mark.parametrize("python", SOME)
def test_python_frames_of_every_thread_are_py_spys(python: str, start_target: Callable[..., Target]) -> None:
    need(python)
    target = start_target(python, str(BLOCKED), binary=False)
    _stop(target.pid)
    try:
        ours = _ours(target.pid)
        dumped = subprocess.run([PY_SPY, "dump", "--pid", str(target.pid), "--json", "--nonblocking"],
                                capture_output=True, text=True, timeout=60)
    finally:
        os.kill(target.pid, signal.SIGCONT)
    assert dumped.returncode == 0, dumped.stderr
    theirs = {t["thread_id"]: t for t in json.loads(dumped.stdout)}
    threads = _python_threads(ours)
    assert ours["python"] == re.search(r"python(3\.\d+)", python).group(1)  # type: ignore[union-attr]
    assert sorted(threads) == sorted(theirs) and len(threads) == 5
    for ident, thread in threads.items():
        expected = [(f["name"], f["filename"], f["line"]) for f in theirs[ident]["frames"]]
        got = [(f["function"], f["file"], f["line"]) for f in thread["python"]]
        assert got == expected, (ident, thread["python_thread"])
        assert thread["python_thread"]["name"] == theirs[ident]["thread_name"]
        assert thread["python_thread"]["holds_gil"] == theirs[ident]["owns_gil"]
        if theirs[ident].get("os_thread_id"):
            assert thread["tid"] == theirs[ident]["os_thread_id"]
    by_name = {t["python_thread"]["name"]: t["python"] for t in threads.values()}
    for name, (function, line) in KNOWN.items():
        top = by_name[name][0]
        assert (top["name"], top["file"], top["line"]) == (function, str(BLOCKED), line)
    assert [f["name"] for f in by_name["spinner"][:6]] == ["spin", "nested", "nested", "nested", "nested", "<lambda>"]
    _untouched(target.pid)


@pytest.mark.parametrize("python", SOME)
def test_native_merges_each_eval_loop_with_its_python_frames(python: str,
                                                             start_target: Callable[..., Target]) -> None:
    """--native: every _PyEval_EvalFrameDefault is replaced by its Python frames, and no Python frame is
    left over past the thread's start (the entry frames split them as the native stack does)."""
    need(python)
    target = start_target(python, str(BLOCKED), binary=False)
    result = sampler("stack", "--pid", str(target.pid), "--native")
    assert result.returncode == 0, result.stderr
    blocks = result.stdout.split("\n\n")[1:]
    assert len(blocks) == 5
    for block in blocks:
        frames = [line for line in block.splitlines() if line.startswith("#")]
        assert not any("_PyEval_EvalFrameDefault" in line for line in frames), block
        python_lines = [i for i, line in enumerate(frames) if "[python]" in line]
        assert python_lines, block
        assert "[python]" not in frames[-1], block  # (the thread's own start is native: clone3, _start)
    spinner = next(b for b in blocks if '"spinner"' in b)
    assert spinner.count(" nested at ") == 4
    _untouched(target.pid)


@pytest.mark.parametrize("python", [p for p in ALL if p.id == "debian-3.11" or (MATRIX and p.id == "pyenv-3.10")])
def test_the_running_threads_are_held_while_read_and_nonblocking_stops_none(
        python: str, start_target: Callable[..., Target]) -> None:
    need(python)
    target = start_target(python, str(BLOCKED), binary=False)
    held = _python_threads(_ours(target.pid))
    spinner = next(t for t in held.values() if t["python_thread"]["name"] == "spinner")
    assert spinner["read"].startswith("stopped for"), spinner["read"]
    assert spinner["python"][0]["name"] == "spin" and spinner["python_thread"]["holds_gil"]
    free = _python_threads(_ours(target.pid, "--nonblocking"))
    spinner = next(t for t in free.values() if t["python_thread"]["name"] == "spinner")
    assert "--nonblocking stops no thread" in spinner["read"] and spinner["frames"] is None
    assert [f["name"] for f in spinner["python"][:2]] in (["spin", "nested"], ["nested", "nested"])
    for t in free.values():
        name = t["python_thread"]["name"]
        if name in KNOWN:
            assert (t["python"][0]["name"], t["python"][0]["line"]) == KNOWN[name]
            assert t["read"].startswith("not stopped")
    _untouched(target.pid)


def test_a_profile_of_a_python_program_counts_python_functions(start_target: Callable[..., Target],
                                                               tmp_path: Path) -> None:
    python = PYENV.get("3.12") or "/usr/bin/python3.11"
    need(python)
    target = start_target(python, str(BLOCKED), binary=False)
    out = tmp_path / "cpu.folded"
    result = sampler("profile", "--pid", str(target.pid), "--duration", "2s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    counts = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in out.read_text().splitlines()}
    total = sum(counts.values())
    assert total >= 50, counts
    spinning = sum(n for stack, n in counts.items() if re.search(rf"nested \({re.escape(str(BLOCKED))}:\d+\);spin "
                                                              rf"\({re.escape(str(BLOCKED))}:2[78]\)$", stack))
    assert spinning >= 0.9 * total, counts
    assert all(re.match(r"(Thread\.)?_bootstrap \(", stack) for stack in counts), counts
    _untouched(target.pid)


def test_a_python_older_than_3_8_is_said_and_its_native_stack_shown(start_target: Callable[..., Target]) -> None:
    import glob
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.7.*/bin/python3.7")))
    if not found:
        pytest.skip("no python3.7 here")
    target = start_target(found[-1], str(BLOCKED), binary=False)
    record = _ours(target.pid)
    assert record["python"] is None
    assert any("3.7 is older than sampler reads (3.8 to 3.13)" in note for note in record["notes"]), record["notes"]
    threads = record["threads"]
    assert isinstance(threads, list) and all(t["frames"] for t in threads)


@pytest.mark.parametrize("python", SOME)
def test_ustack_at_a_native_probe_names_the_python_callers(python: str, start_target: Callable[..., Target],
                                                           tmp_path: Path) -> None:
    """ustack at libc's getppid in a CPython: each Python caller named, two calls of often() for each
    of seldom()."""
    need(python)
    target = start_target(python, str(SCRIPTS / "calls.py"), binary=False)
    out = tmp_path / "rows.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "libc:getppid", "--expr", "ustack",
                     "--duration", "3s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = [line.split(",")[5] for line in out.read_text().splitlines()[1:]]
    python_frames = [";".join(f for f in row.split(";") if ".py:" in f) for row in rows]  # (native ones between)
    callers = [re.search(r"rounds \([^)]*\);(often|seldom) \([^)]*\)$", frames) for frames in python_frames]
    assert all(callers), [row.split(";")[-6:] for row, found in zip(rows, callers) if not found][:3]
    often = sum(found.group(1) == "often" for found in callers if found)
    seldom = len(rows) - often
    assert seldom >= 20 and abs(often - 2 * seldom) <= 3, (often, seldom)
    assert all(row.split(";")[-1] == "getppid" for row in rows), rows[:2]
    _untouched(target.pid)


def test_a_python_web_service_under_load_has_its_handlers_in_its_flame_graph(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    """targets/python/service.py (http.server, a thread a request) under a bounded request loop: the
    profile's stacks are its handler's Python functions, under serve_forever's request threads."""
    import http.client
    import threading
    need("/usr/bin/python3.11")
    target = start_target("/usr/bin/python3.11", str(SCRIPTS / "service.py"), binary=False)
    port = int(re.search(r"port=(\d+)", target.lines[0]).group(1))  # type: ignore[union-attr]
    done = threading.Event()
    answered = [0]

    def load() -> None:
        while not done.is_set():
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            connection.request("GET", "/work")
            assert connection.getresponse().status == 200
            answered[0] += 1
            connection.close()

    loaders = [threading.Thread(target=load, daemon=True) for _ in range(2)]
    for loader in loaders:
        loader.start()
    try:
        folded, svg = tmp_path / "service.folded", tmp_path / "service.svg"
        result = sampler("profile", "--pid", str(target.pid), "--duration", "3s", "--out", str(folded))
        assert result.returncode == 0, result.stderr
    finally:
        done.set()
        for loader in loaders:
            loader.join(15)
    assert answered[0] > 20
    counts = {line.rsplit(" ", 1)[0]: int(line.rsplit(" ", 1)[1]) for line in folded.read_text().splitlines()}
    total = sum(counts.values())
    handling = sum(n for stack, n in counts.items() if "Handler.do_GET (" in stack)
    assert total >= 30 and handling >= 0.5 * total, sorted(counts.items(), key=lambda item: -item[1])[:5]
    for function in ("render_rows (", "checksum ("):
        assert any(function in stack and "Handler.do_GET (" in stack for stack in counts), function
    drawn = sampler("report", str(folded), "--plot", str(svg))  # (the flame graph of those very samples)
    assert drawn.returncode == 0, drawn.stderr
    text = svg.read_text()
    assert "Handler.do_GET" in text and "render_rows" in text
