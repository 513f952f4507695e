"""Every call counted once: an every-hit trace against the program's own count, for a
plain function and glibc's wrappers with 1 and 8 threads calling at the same moment
(targets/callers), and for Go servers with and without DWARF whose stacks must grow."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    finish,
    have_delve,
    start_sampler,
    wait_until_patched,
)


def traced_rows(target: Target, at: str, expression: str | None, go: Callable[[], None],
                done: Callable[[str], int | None], out: Path) -> tuple[int, int, str]:
    """Trace ``at`` (with ``--expr expression``, or none: counting calls) while ``go()`` makes
    the target call it; (calls the target counted, rows, sampler's stderr). ``done`` reads the
    count from a line of the target's."""
    exprs = ("--expr", expression) if expression is not None else ()
    proc = start_sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", at, *exprs,
                         "--duration", "180s", "--out", str(out), "--quiet")
    go()
    target.wait_for(lambda: any(done(line) is not None for line in target.lines), 120,
                    "the target did not finish its calls")
    made = next(n for n in map(done, target.lines) if n is not None)
    deadline = time.monotonic() + 10  # every call was served before it returned; rows follow at once
    while len(out.read_text().splitlines()) - 1 < made and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)  # and none after
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    return made, len(assert_csv_whole(out)), stderr


COUNTS = [("hot", "hot", "i", threads) for threads in (1, 8)] + \
    [(name, f"libc:{name}", "arg0", threads) for name in ("write", "malloc") for threads in (1, 8)] + \
    [(name, f"libc:{name}", "arg0", 8) for name in ("read", "send", "recv", "close", "openat", "free")]


@pytest.mark.parametrize("function, at, expression, threads", COUNTS)
def test_trace_counts_every_call(start_target: Callable[..., Target], tmp_path: Path,
                                 function: str, at: str, expression: str, threads: int) -> None:
    # GIVEN threads that will call one function at the same moment, counting their calls
    calls = 150
    target = start_target("callers", str(threads), str(calls), function)
    out = tmp_path / "count.csv"
    # WHEN every call is traced (the target starts calling once the breakpoint is in)
    made, rows, stderr = traced_rows(target, at, expression, lambda: None, _done, out)
    # THEN exactly one row per call, and nothing said about missed calls
    assert made == threads * calls
    assert rows == made, (rows, made, stderr)
    assert "missed" not in stderr
    assert_code_matches_files(target.pid)


def test_trace_without_an_expression_counts_calls(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN two threads that will call hot() 150 times each, counting their calls
    target = start_target("callers", "2", "150", "hot")
    out = tmp_path / "count.csv"
    # WHEN it is traced with no --expr
    made, rows, stderr = traced_rows(target, "hot", None, lambda: None, _done, out)
    # THEN a row per call, with the fixed columns only
    assert made == 300 and rows == made, (rows, made, stderr)
    with open(out) as f:
        assert f.readline().strip() == "seq,time,elapsed_s,pid,thread,pause_us,wait_us,late_us,error"
    assert_code_matches_files(target.pid)


def _done(line: str) -> int | None:
    return int(line.split("=")[1]) if line.startswith("done calls=") else None


_BURST = re.compile(r"^burst connections=(\d+) requests=(\d+)$")


@pytest.mark.parametrize("build", ["httpd-go", "httpd-go-stripped"])
@pytest.mark.parametrize("at, counted", [("net/http.(*conn).serve", 1), ("main.serve", 2)])
def test_a_go_server_counts_one_row_per_connection_and_request(
        start_target: Callable[..., Target], tmp_path: Path, build: str, at: str, counted: int) -> None:
    if not have_delve():
        pytest.skip("the Go targets are missing (make setup builds them)")
    # GIVEN a Go HTTP server (with and without DWARF) that, when told, serves 200 requests
    # each on a new connection, eight at once, each request from deep in its stack, so that
    # its goroutines' stacks must grow in the traced functions' prologues
    target = start_target(build, "-rate", "0", "-burst", "200")

    def burst() -> None:
        wait_until_patched(target.pid)
        target.proc.send_signal(signal.SIGUSR1)

    def done(line: str) -> int | None:
        match = _BURST.match(line)
        return int(match.group(counted)) if match else None

    # WHEN every call of the connection's and the request's function is traced
    made, rows, stderr = traced_rows(target, at, "x=$rip", burst, done, tmp_path / "go.csv")
    # THEN one row per connection, one per request, as the server counted them itself
    assert made == 200
    assert rows == made, (rows, made, stderr)
    assert_code_matches_files(target.pid)


