"""--latency of a Python function (--at py:module.function --latency): one row per call, its time
against the sleeps the call holds and against the program's own clock; a call left by an exception,
a generator and a coroutine (each timed from its first start to its end); for Debian's python3.11
and pyenv's 3.8-3.13. And a Python probe in sampler attach."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pythons import DEBIAN, MATRIX, SCRIPTS, SOME, need, some
from tests.integration.targets import (
    Target,
    assert_code_matches_files,
    read_csv,
    sampler,
    start_sampler,
    stop_once,
    wait_until_patched,
)

TIMED = SCRIPTS / "timed.py"
SLACK_US = 30_000
"""How much later than the program's own clock a row may say the call ended: the end's stop waits
while sampler is busy with the other Python calls' stops (a few hundred microseconds each), more on a
loaded 2-core CI machine."""


def _timed(python: str, kind: str, function: str, start_target: Callable[..., Target], tmp_path: Path
           ) -> tuple[list[dict[str, str]], dict[int, float], str]:
    """Trace ``function``'s calls while timed.py runs ``kind``: the rows, the program's own times (ms
    by its argument) and sampler's stderr."""
    need(python)
    target = start_target(python, str(TIMED), kind, binary=False, stdin=True)
    out = tmp_path / f"{kind}.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", f"py:__main__.{function}", "--latency",
                         "--expr", "ms=py:ms", "--duration", "180s", "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    target.send("go")
    target.wait_for(lambda: "done" in target.lines, 150, f"the program did not finish its {kind} calls")
    own = {int(line.split()[1]): float(line.split()[2]) for line in target.lines if line.startswith(kind + " ")}
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > len(own), timeout=60)
    assert proc.returncode == 0, stderr
    assert_code_matches_files(target.pid)
    return read_csv(out), own, stderr


def _check(rows: list[dict[str, str]], own: dict[int, float], least_us: Callable[[int], float], stderr: str
           ) -> None:
    """One row per call, each with its argument, its latency_us at least the sleeps it holds and at most
    the program's own time plus the slack."""
    assert sorted(int(row["ms"]) for row in rows) == sorted(own), (rows[:3], stderr[-1500:])
    for row in rows:
        ms, latency = int(row["ms"]), float(row["latency_us"])
        assert least_us(ms) <= latency <= own[ms] * 1000 + SLACK_US, (ms, latency, own[ms], row["error"])
    assert "call(s) had no return seen" not in stderr and "still open" not in stderr, stderr[-1500:]


@pytest.mark.parametrize("python", [p for p in SOME if MATRIX or p.id != "pyenv-3.8"])  # (3.8: ticks below)
def test_each_call_of_a_python_function_is_one_row_with_its_time(
        python: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    rows, own, stderr = _timed(python, "slow", "slow", start_target, tmp_path)
    _check(rows, own, lambda ms: ms * 1000, stderr)
    assert len(rows) == 20
    said = ["stop(s) for sampler inside the call" in row["error"] for row in rows]
    if any(f"python3.{minor}" in python for minor in (8, 9, 10)):
        # quick(), called inside each, stopped its thread at its eval loop's return (every frame's end there):
        # that stop is taken out, and said
        assert all(said), rows[0]["error"]
    else:
        # 3.11 and later: quick()'s start and its frame's clear are tested in the target, and let go there
        assert not any(said), rows[0]["error"]
        assert "frame clear(s) tested there (--latency's ends)" in stderr, stderr[-1500:]


@pytest.mark.parametrize(("python", "kind"), some(
    ("debian-3.11", "failing"), ("debian-3.11", "ticks"), ("debian-3.11", "waits")))
def test_a_call_left_by_an_exception_a_generator_and_a_coroutine_are_timed_whole(
        python: str, kind: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    # a generator and a coroutine: from their first start to their end, their suspensions inside
    # (ticks: its 3 sleeps and its consumer's 3; waits: its 2 awaited sleeps)
    function = {"failing": "failing", "ticks": "ticks", "waits": "waits"}[kind]
    least = {"failing": 1, "ticks": 6, "waits": 2}[kind]
    rows, own, stderr = _timed(python, kind, function, start_target, tmp_path)
    assert len(rows) == 5, (rows, stderr[-1500:])
    _check(rows, own, lambda ms: least * ms * 1000, stderr)


def test_python_latency_refuses_retval_and_two_probes(start_target: Callable[..., Target]) -> None:
    need(DEBIAN)
    target = start_target(DEBIAN, str(TIMED), "slow", binary=False, stdin=True)
    for args, said in ((("--at", "py:__main__.slow", "--expr", "r=retval"), "no retval yet"),
                       (("--at", "py:__main__.slow", "--at", "py:__main__.quick"), "one --at py:")):
        result = sampler("trace", "--pid", str(target.pid), *args, "--latency", "--duration", "1s")
        assert result.returncode == 2, result.stderr
        assert said in result.stderr.strip().splitlines()[-1] and "Traceback" not in result.stderr, result.stderr
    assert_code_matches_files(target.pid)


@pytest.mark.parametrize("python", SOME if MATRIX else [pytest.param(DEBIAN, id="debian-3.11")])
def test_attach_at_a_python_function_samples_its_calls_only(
        python: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    need(python)
    target = start_target(python, str(TIMED), "slow", "60", binary=False, stdin=True)  # (1.8 s of calls)
    out = tmp_path / "attach.csv"
    proc = start_sampler("attach", "--pid", str(target.pid), "--at", "py:__main__.slow", "--expr", "ms=py:ms",
                         "--expr", "nope=py:nope", "--interval", "50ms", "--count", "6", "--hit-timeout", "60s",
                         "--out", str(out))
    wait_until_patched(target.pid, timeout=60)  # (its first turn armed: the calls start once "go" comes)
    target.send("go")
    _, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert len(rows) == 6, stderr[-1500:]
    assert all(row["ms"] for row in rows), [(row["ms"], row["error"][-90:]) for row in rows]
    values = [int(row["ms"]) for row in rows]
    assert all(1 <= ms <= 60 for ms in values) and values == sorted(values), values
    assert all("no argument or local 'nope' in the frame" in row["error"] for row in rows), rows[0]["error"]
    # the other functions' calls (quick() inside each) tested in the target: only slow()'s stopped, one a turn
    assert "a test in the target lets only its function's calls through to an int3" in stderr, stderr[-1500:]
    stops = re.search(r"every hit: (\d+) ran on without a single-step, (\d+) single-stepped", stderr)
    assert stops is None or int(stops.group(1)) + int(stops.group(2)) <= 6, stderr[-1500:]
    assert_code_matches_files(target.pid)


def test_the_latency_of_http_servers_request_handling_beside_the_clients_clock(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # Python's own http.server (nobody here wrote it): handle_one_request, one call a request; 20
    # requests one after another, each one row, none longer than its client saw it take (sampler's
    # stops inside it are taken out; the client's clock has them)
    import time
    import urllib.request
    need(DEBIAN)
    target = start_target(DEBIAN, str(SCRIPTS / "service.py"), binary=False)
    target.wait_for(lambda: any("port=" in line for line in target.lines), 30, "the service did not start")
    port = int(next(line for line in target.lines if "port=" in line).split("port=")[1])
    out = tmp_path / "requests.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at",
                         "py:http.server.BaseHTTPRequestHandler.handle_one_request", "--latency", "--duration", "180s",
                         "--out", str(out))
    wait_until_patched(target.pid, timeout=60)
    seen = []
    for _ in range(20):
        began = time.perf_counter()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/work", timeout=60) as response:
            assert response.status == 200
            response.read()
        seen.append((time.perf_counter() - began) * 1e6)
    _, stderr = stop_once(proc, lambda: out.exists() and len(out.read_text().splitlines()) > 20, timeout=60)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert len(rows) == 20, stderr[-1500:]
    for row, client_us in zip(rows, seen):
        assert 0 < float(row["latency_us"]) <= client_us + SLACK_US, (row["latency_us"], client_us, row["error"])
    assert_code_matches_files(target.pid)


def test_a_coroutine_under_way_when_the_trace_begins_gives_no_partial_row(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # waits(600) awaits two sleeps of 600 ms, 5 times; the trace begins while the first is under way:
    # its later runs are resumes (left at a YIELD_VALUE), not a call seen to start: no row of a part of it
    need(DEBIAN)
    target = start_target(DEBIAN, str(TIMED), "long", binary=False, stdin=True)
    target.send("go")
    out = tmp_path / "long.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "py:__main__.waits", "--latency",
                         "--expr", "ms=py:ms", "--duration", "120s", "--out", str(out))
    target.wait_for(lambda: "done" in target.lines, 120, "the program did not finish its calls")
    _, stderr = stop_once(proc, lambda: out.exists(), timeout=60)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert 1 <= len(rows) <= 4, (rows, stderr[-1500:])  # (at least the first call ran before the probe)
    assert all(float(row["latency_us"]) >= 1_200_000 for row in rows), [row["latency_us"] for row in rows]
    assert_code_matches_files(target.pid)
