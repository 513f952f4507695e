"""The ptrace backend against the real C and Go ring buffers."""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.backends.delve import parse
from sampler.backends.delve.transport import DelveTerminal
from sampler.backends.ptrace.backend import PtraceBackend
from sampler.config import SessionConfig
from sampler.debuginfo import program
from sampler.language import expr
from sampler.target.process import TargetProcess
from tests.integration.targets import (
    BIN,
    Seizer,
    Target,
    assert_csv_whole,
    assert_signal_ends_cleanly,
    assert_text_matches_file,
    finish,
    have_delve,
    one_line_error,
    read_csv,
    sampler,
    start_sampler,
    unused_pid,
    wait_for_rows,
)

CAPACITY = 20000
C_BUILDS = ["ringbuf-c", "ringbuf-c-O0"]


def attach(pid: int, *args: str) -> subprocess.CompletedProcess[str]:
    return sampler("attach", "--backend", "ptrace", "--pid", str(pid), "--quiet", *args)


@pytest.mark.parametrize("build", C_BUILDS)
def test_c_at_ring_read(start_target: Callable[..., Target], tmp_path: Path, build: str) -> None:
    # GIVEN the C ring buffer (optimized or not)
    target = start_target(build)
    out = tmp_path / "c.csv"
    # WHEN sampling w-r through the pointer parameter at ring_read
    result = attach(target.pid, "--at", "ring_read", "--expr", "delta=b->w - b->r",
                    "--expr", "cap=ring->capacity", "--rate", "20", "--count", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    # THEN every value is within the ring's bounds, only one thread was ever stopped
    assert len(rows) == 20
    for row in rows:
        assert row["error"] == ""
        assert 0 <= int(row["delta"]) <= CAPACITY
        assert int(row["cap"]) == CAPACITY
        assert 0 < float(row["pause_us"]) < 1_000_000
    threads = {row["thread"] for row in rows}
    assert len(threads) == 1 and int(threads.pop()) != target.pid, "only the reader thread calls ring_read"
    target.assert_untouched()


@pytest.mark.parametrize("build", C_BUILDS)
def test_c_bug_is_caught(start_target: Callable[..., Target], tmp_path: Path, build: str) -> None:
    # (how soon the ring fills depends on how the two threads share the cores: up to 60 s,
    # ended at the first row over capacity; since sampler's pause no longer slows the reader
    # much, 60 samples at 50 Hz sometimes saw the -O0 ring empty)
    target = start_target(build, "--bug")
    out = tmp_path / "bug.csv"
    result = attach(target.pid, "--at", "ring_read", "--expr", "delta=b->w - b->r",
                    "--rate", "100", "--duration", "60s", "--stop-when", f"delta > {CAPACITY}", "--out", str(out))
    assert result.returncode == 0, result.stderr
    deltas = [int(r["delta"]) for r in read_csv(out)]
    assert deltas[-1] == CAPACITY + 1 and max(deltas[:-1], default=0) <= CAPACITY, deltas
    target.assert_untouched()


@pytest.mark.parametrize("build", ["ringbuf-c", "ringbuf-go"])
def test_zero_stop_reads(start_target: Callable[..., Target], tmp_path: Path, build: str) -> None:
    # GIVEN a running target whose two threads move w and r millions of times a second,
    # and only globals asked for
    target = start_target(build)
    name = "ring" if build.startswith("ringbuf-c") else "main.ring"
    out = tmp_path / "z.csv"
    # WHEN sampling as fast as it goes without --at (before consistent.py, field by field:
    # 1 to 3 rows in 3,600 out of the ring's range, a negative difference read as unsigned)
    result = attach(target.pid, "--expr", f"delta={name}.w - {name}.r", "--rate", "1000",
                    "--count", "2500", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    # THEN nothing was stopped, and every value is one the ring held: w and r read as of one
    # moment, or the row says it was torn, and the summary counts those rows
    assert len(rows) == 2500
    assert all(r["pause_us"] == "0" and r["thread"] == "" for r in rows)
    values = [int(r["delta"]) for r in rows if r["error"] == ""]
    torn = [r for r in rows if r["error"]]
    assert all(0 <= value <= CAPACITY for value in values), [v for v in values if not 0 <= v <= CAPACITY]
    assert all("torn" in r["error"] and r["delta"] == "" for r in torn), torn[:3]
    assert len(values) >= 0.5 * len(rows), f"{len(torn)} of {len(rows)} rows torn"
    if torn:
        assert f"{len(torn)} row(s) were torn" in result.stderr, result.stderr
    else:
        assert "torn" not in result.stderr
    assert target.status()["TracerPid"].strip() == "0"
    target.assert_untouched()


def test_go_through_ptrace(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-go")
    out = tmp_path / "go.csv"
    result = attach(target.pid, "--at", "main.(*Ring).Read", "--expr", "delta=b.w - b.r",
                    "--expr", "g=main.ring.w - main.ring.r", "--expr", "b.buf[0] % 1",
                    "--expr", "main.ring.bug", "--rate", "20", "--count", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    for row in assert_csv_whole(out):
        assert row["error"] == ""
        assert 0 <= int(row["delta"]) <= CAPACITY
        assert 0 <= int(row["g"]) <= CAPACITY
        assert row["b.buf[0] % 1"] == "0"
        assert row["main.ring.bug"] == "false"
    target.assert_untouched()


@pytest.mark.skipif(not have_delve(), reason="dlv is missing")
def test_ptrace_and_delve_agree_on_a_halted_target(start_target: Callable[..., Target]) -> None:
    # GIVEN the Go target held halted by dlv
    target = start_target("ringbuf-go")
    texts = ["main.ring.w", "main.ring.r", "main.ring.w-main.ring.r", "main.ring.r-main.ring.w-1",
             "main.ring.bug", "main.ring.buf[3]", "main.ring.w % 7 * 3 - 100", "main.ring.r > main.ring.w",
             "main.ring.w >> 3 & 255"]
    term = DelveTerminal(shutil.which("dlv") or "dlv", target.pid)
    term.start()
    try:
        # WHEN Delve prints each expression and sampler's ptrace backend reads them (zero-stop)
        by_delve = [parse.parse_value(term.run(f"print {text}"), text)[0] for text in texts]
        config = SessionConfig(pid=target.pid, expressions=tuple(expr.parse_option(t) for t in texts))
        # (program.inspect would refuse: dlv traces it; zero-stop reads do not trace)
        backend = PtraceBackend.create(config, TargetProcess(target.pid, "", is_go=True, has_debug_info=True))
        backend.attach()
        try:
            reading = backend.sample(threading.Event())
        finally:
            backend.detach()
    finally:
        term.send("continue")
        time.sleep(0.05)
        term.interrupt()
        term.wait(5)
        term.quit_leaving_target()
        term.close()
    # THEN they agree on every value
    assert reading.error == ""
    assert list(reading.values) == by_delve
    assert by_delve[3] == 2**64 - 1 - by_delve[2], "unsigned arithmetic wraps in both"
    target.assert_untouched()


def test_only_the_hitting_thread_stops(start_target: Callable[..., Target]) -> None:
    # GIVEN the C target with a breakpoint held at ring_read for 1.5 s
    target = start_target("ringbuf-c")
    config = SessionConfig(pid=target.pid, location="ring_read",
                           expressions=(expr.parse_option("b->w"),))
    backend = PtraceBackend.create(config, program.inspect(target.pid))
    backend.attach()
    try:
        tracer = backend.tracer
        assert tracer is not None and backend.address is not None
        tracer.arm(backend.address)
        hit = tracer.wait_for_hit(time.monotonic() + 5, threading.Event())
        tracer.disarm(backend.address)
        assert hit is not None
        lines_before = len(target.throughput())
        time.sleep(1.5)
        # THEN only that thread is in tracing stop, and the others go on (the reporter prints)
        states = {}
        for task in Path(f"/proc/{target.pid}/task").iterdir():
            states[int(task.name)] = task.joinpath("stat").read_text().rsplit(")", 1)[1].split()[0]
        tracer.resume(hit)
        assert states.pop(hit.tid) == "t"
        assert all(state in "RS" for state in states.values()), states
        assert len(target.throughput()) > lines_before
        for _ in range(20):
            backend.sample(threading.Event())
        assert set(tracer.stats.stops) == {hit.tid}, f"stops per thread: {tracer.stats.stops}"
    finally:
        backend.detach()
    target.assert_untouched()


@pytest.mark.parametrize("build", ["ringbuf-c", "ringbuf-go"])
def test_200_fast_cycles_then_detach(start_target: Callable[..., Target], tmp_path: Path, build: str) -> None:
    target = start_target(build)
    at = "ring_read" if build == "ringbuf-c" else "main.(*Ring).Read"
    delta = "b->w - b->r" if build == "ringbuf-c" else "b.w - b.r"
    out = tmp_path / "fast.csv"
    result = attach(target.pid, "--at", at, "--expr", f"delta={delta}", "--rate", "400",
                    "--count", "200", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert len(rows) == 200 and all(r["error"] == "" for r in rows)
    target.assert_untouched()
    target.more_throughput(2)
    assert not any("SIGTRAP" in line or "trap" in line.lower() for line in target.lines)


def test_a_breakpoint_never_hit(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    out = tmp_path / "never.csv"
    result = attach(target.pid, "--at", "never", "--expr", "b->w", "--interval", "100ms",
                    "--hit-timeout", "200ms", "--count", "3", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = read_csv(out)
    assert [r["error"] for r in rows] == ["breakpoint not hit within 0.2s"] * 3
    target.assert_untouched()
    assert target.proc.poll() is None


def test_file_line_and_address(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # ringbuf.c:45 is ring_read's "*v = b->buf[...]": run on every read of a non-empty ring
    target = start_target("ringbuf-c-O0")
    result = attach(target.pid, "--at", "ringbuf.c:45", "--expr", "d=w - r", "--count", "5",
                    "--rate", "20", "--out", "-")
    assert result.returncode == 0, result.stderr
    rows = [line.split(",") for line in result.stdout.splitlines()[1:]]
    assert len(rows) == 5 and all(1 <= int(row[5]) <= CAPACITY for row in rows), rows  # a non-empty ring
    symbol = subprocess.run(["nm", str(BIN / "ringbuf-c-O0")], capture_output=True, text=True).stdout
    offset = int(next(line.split()[0] for line in symbol.splitlines() if line.endswith(" ring_read")), 16)
    maps = Path(f"/proc/{target.pid}/maps").read_text().splitlines()
    base = int(maps[0].split("-")[0], 16)  # a PIE: the first mapping is the program at offset 0
    result = attach(target.pid, "--at", f"*{base + offset:#x}", "--expr", "ring->capacity", "--count", "2",
                    "--out", "-")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].split(",")[5] == str(CAPACITY)
    target.assert_untouched()


def test_bad_inputs(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    line = one_line_error(attach(target.pid, "--at", "ring_read", "--expr", "b->nope"))
    assert "ring has no field 'nope'" in line and "its fields are: r, w, capacity, bug, buf" in line
    line = one_line_error(attach(target.pid, "--at", "ring_read", "--expr", "nope + 1"))
    assert "no variable 'nope' among the parameters and locals of ring_read nor among the globals" in line
    line = one_line_error(attach(target.pid, "--expr", "b->w"))
    assert "without --at only globals can be read" in line
    line = one_line_error(attach(target.pid, "--at", "ring_reed", "--expr", "b->w"))
    assert "no function or line 'ring_reed'" in line and "looked in their symbol tables" in line
    line = one_line_error(attach(unused_pid(), "--expr", "ring"))
    assert "no process with PID" in line
    seizer = Seizer(target.pid)
    try:
        line = one_line_error(attach(target.pid, "--at", "ring_read", "--expr", "b->w"))
        assert f"already traced by PID {seizer.proc.pid}" in line
    finally:
        seizer.release()
    target.assert_untouched()


def test_a_stripped_binary(start_target: Callable[..., Target], tmp_path: Path) -> None:
    stripped = tmp_path / "ringbuf-stripped"
    subprocess.run(["strip", "-o", str(stripped), str(BIN / "ringbuf-c")], check=True)
    target = Target([str(stripped)])
    try:
        line = one_line_error(attach(target.pid, "--at", "ring_read", "--expr", "b->w"))
        assert "ringbuf-stripped is stripped; no debug info was found for ringbuf-stripped" in line
        assert "install its debug package" in line
        target.assert_untouched()
    finally:
        target.stop()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
@pytest.mark.parametrize("at", ["ring_read", "never"])
def test_a_signal_mid_run_detaches_cleanly(start_target: Callable[..., Target], tmp_path: Path,
                                           signum: int, at: str) -> None:
    # "never" keeps the breakpoint armed for most of each tick when the signal comes
    target = start_target("ringbuf-c")
    out = tmp_path / "sig.csv"
    proc = start_sampler("attach", "--backend", "ptrace", "--pid", str(target.pid), "--at", at,
                         "--expr", "b->w", "--rate", "50", "--hit-timeout", "1s", "--out", str(out))
    wait_for_rows(out, proc, 2 if at == "ring_read" else 0)
    time.sleep(0.3)
    assert_signal_ends_cleanly(proc, signum, out, target)


def test_the_target_exiting_mid_run(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    out = tmp_path / "exit.csv"
    proc = start_sampler("attach", "--backend", "ptrace", "--pid", str(target.pid), "--at", "ring_read",
                         "--expr", "b->w", "--rate", "20", "--out", str(out))
    wait_for_rows(out, proc, 3)
    target.proc.kill()
    _, stderr = finish(proc)
    assert proc.returncode == 1, stderr
    last = stderr.strip().splitlines()[-1]
    assert "Traceback" not in stderr
    assert last.startswith("sampler: target process") and "exited" in last and "samples kept in" in last
    assert len(assert_csv_whole(out)) >= 3


def test_a_function_in_a_shared_library(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN the C target, whose reader and writer call libc's sched_yield when they wait
    target = start_target("ringbuf-c")
    out = tmp_path / "lib.csv"
    # WHEN breaking there (no DWARF in libc: the program's globals only)
    result = attach(target.pid, "--at", "sched_yield", "--expr", "d=ring->w - ring->r", "--rate", "20",
                    "--count", "5", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert len(rows) == 5
    assert all(r["error"] == "" and 0 <= int(r["d"]) <= CAPACITY for r in rows)
    assert all(int(r["thread"]) != target.pid for r in rows), "the main thread never yields"
    target.assert_untouched()


def test_shift_counts_out_of_range_are_row_errors_or_values(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    out = tmp_path / "shift.csv"
    result = attach(target.pid, "--at", "ring_read", "--expr", "neg=1 << -1", "--expr", "var=b->w << (b->bug - 3)",
                    "--expr", "huge=b->w << 1000000000000", "--expr", "ok=b->capacity >> 4",
                    "--count", "3", "--rate", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    for row in assert_csv_whole(out):
        assert row["neg"] == "" and row["var"] == "" and row["huge"] == "0" and row["ok"] == str(CAPACITY >> 4)
        assert "neg: negative shift count -1" in row["error"] and "var: negative shift count -3" in row["error"]
    target.assert_untouched()


def test_step_over_tolerates_a_thread_that_vanished(start_target: Callable[..., Target]) -> None:
    # GIVEN an int3 armed at a function never called, and a hit for a thread ptrace cannot reach (ESRCH)
    from sampler.debuginfo.debugfiles import DebugFinder
    from sampler.debuginfo.modules import Modules
    from sampler.process.memory import Memory
    from sampler.process.tasks import Hit
    from sampler.process.tracer import Tracer

    target = start_target("ringbuf-c")
    modules = Modules(target.pid, DebugFinder(target.pid, (), print, print))
    found = modules.main.function_symbol("never")
    assert found is not None
    address = found + modules.main.bias
    modules.close()
    memory = Memory(target.pid, writable=True)
    tracer = Tracer(target.pid, memory)
    try:
        tracer.arm(address)
        from ptrace.binding.linux_struct import user_regs_struct  # type: ignore[import-untyped]

        registers = user_regs_struct()
        registers.rip = address + 1
        # WHEN stepping it over the original instruction
        tracer.step_over(Hit(tid=target.pid, address=address, registers=registers, seen=0.0))
        # THEN nothing is raised and the breakpoint is armed again (every-hit mode keeps it)
        assert address in tracer.armed and memory.read(address, 1) == b"\xcc"
    finally:
        tracer.disarm(address)
        memory.close()
    assert_text_matches_file(target)
    target.assert_untouched()
