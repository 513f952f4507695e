"""In-process probes (issue 36): `trace --probe inprocess|auto`, a jump into code sampler puts in the
target, that counts and records each call with no thread stopped; the count compared with the
program's own, the code and the maps as they were after, a killed sampler's jump taken out by the
guardian or by `sampler repair`."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    Target,
    assert_code_matches_files,
    code_differs,
    descendants,
    finish,
    read_csv,
    redis_cli,
    sampler,
    start_redis,
    start_sampler,
    symbol_address,
)
from tests.long import LONG

SUMMARY = re.compile(r"in-process at --at (?P<at>\S+) \(0x[0-9a-f]+\): (?P<calls>\d+) call\(s\), counted in the "
                     r"target; (?P<rows>\d+) row\(s\)(?:; (?P<dropped>\d+) not recorded[^;\n]*)?"
                     r"(?:; (?P<only>\d+) only counted[^;\n]*)?(?:; (?P<late>\d+) recorded after the run's end)?")


@pytest.fixture(autouse=True)
def own_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "journal"
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(folder))
    yield folder


def no_pages_of_sampler(pid: int) -> bool:
    return "memfd:sampler" not in Path(f"/proc/{pid}/maps").read_text()


def done_calls(target: Target) -> int:
    target.wait_for(lambda: any(line.startswith("done calls=") for line in target.lines), 60, "the calls never ended")
    return int(next(line for line in target.lines if line.startswith("done calls=")).split("=")[1])


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_every_call_is_counted_in_the_target_exactly_and_each_row_names_its_thread(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path, threads: int) -> None:
    # GIVEN THREADS threads that call warm() 100,000 times each once its first bytes change
    target = start_target("callers", str(threads), "100000", "warm")
    tids = {int(t) for t in os.listdir(f"/proc/{target.pid}/task")}
    out = tmp_path / "calls.csv"
    # WHEN sampler traces warm with an in-process probe
    result = sampler("trace", "--pid", str(target.pid), "--at", "warm", "--probe", "inprocess",
                     "--duration", "3s", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN the count is the program's own, and every call is a row or said not recorded
    summary = SUMMARY.search(result.stderr)
    assert summary is not None, result.stderr
    calls, rows = int(summary["calls"]), int(summary["rows"])
    assert calls == done_calls(target) == threads * 100_000
    assert rows + int(summary["dropped"] or 0) + int(summary["late"] or 0) == calls
    written = read_csv(out)
    assert len(written) == rows > 0
    assert {int(row["thread"]) for row in written} <= tids - {target.pid}
    assert all(row["pause_us"] == "0" for row in written[:100])
    for thread in {row["thread"] for row in written}:  # (each thread's calls in the order it made them)
        times = [float(row["elapsed_s"]) for row in written if row["thread"] == thread]
        assert times == sorted(times) and 0 < times[0] < 3
    # AND the code is the file's again, sampler's pages gone, nothing traced, no journal entry
    assert_code_matches_files(target.pid)
    assert no_pages_of_sampler(target.pid)
    assert target.status()["TracerPid"].strip() == "0"
    assert not list(own_journal.glob("*.json"))


def test_the_rows_recorded_before_the_end_are_written_though_the_output_was_slow(
        start_target: Callable[..., Target], own_journal: Path) -> None:
    # GIVEN a thread that calls warm() 60,000 times at once (the ring holds 65,536) once its probe is in
    target = start_target("callers", "1", "60000", "warm")
    # WHEN sampler traces it for 2 s to a pipe nobody reads until 5 s have passed (its rows wait in sampler)
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "warm", "--probe", "inprocess",
                         "--duration", "2s", "--quiet")
    time.sleep(5)
    stdout, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    # THEN every call is a row, written after the run's end: none is said "after the run's end" and lost
    summary = SUMMARY.search(stderr)
    assert summary is not None, stderr
    assert int(summary["calls"]) == int(summary["rows"]) == done_calls(target) == 60_000, stderr
    assert summary["late"] is None and summary["dropped"] is None, stderr
    assert len(stdout.splitlines()) == 60_001  # (the header)
    assert_code_matches_files(target.pid)


def test_every_libc_function_takes_a_probe_in_batches_and_the_target_comes_out_whole(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN stall, whose thread calls clock_gettime (libc's) millions of times a second
    target = start_target("stall")
    out = tmp_path / "libc.csv"
    # WHEN sampler traces every function of its libc (3,600: their names through libc6-dbg), for 2 s
    result = sampler("trace", "--pid", str(target.pid), "--at", "libc:*", "--max-probes", "8000",
                     "--duration", "2s", "--out", str(out), timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    # THEN thousands of probes went in in-process (62 at most before), in batches, the threads let go between
    put = re.search(r"probes: (\d+) in-process probes put in, (\d+) batches", result.stderr)
    assert put is not None, result.stderr[-3000:]
    assert int(put[1]) > 3000 and int(put[2]) > 1
    # AND what is said of many functions is one line (the prologue, IFUNCs, the sites that saw no call)
    said = [line for line in result.stderr.splitlines() if line.startswith("sampler: ")]  # (not the rows' lines)
    assert len(said) < 60, "\n".join(said)[-3000:]
    assert re.search(r"--at libc:\*: \d+ function\(s\) break at their entry, not after their prologue",
                     result.stderr)
    idle = re.search(r"in-process at --at libc:\*: (\d+) other site\(s\) saw no call", result.stderr)
    assert idle is not None and int(idle[1]) > 2000
    # AND clock_gettime's calls were counted, and written as rows
    clock = re.search(r"in-process at --at libc:\* \[\S*clock_gettime\] \(0x[0-9a-f]+\): (\d+) call\(s\)",
                      result.stderr)
    assert clock is not None and int(clock[1]) > 1000, result.stderr[-3000:]
    assert sum("clock_gettime" in row["probe"] for row in read_csv(out)) > 1000
    # AND the target runs on: its code the file's, no page or journal entry of sampler's left, not traced
    assert_code_matches_files(target.pid)
    assert no_pages_of_sampler(target.pid)
    assert target.status()["TracerPid"].strip() == "0"
    assert not list(own_journal.glob("*.json"))


PAIRED = ("--at", "paired", "--expr", "a=p->a", "--expr", "b=p->b", "--expr", "i=i", "--expr", "s=p->a+p->b-i")


def paired_rows(out: Path) -> dict[tuple[str, int], dict[str, str]]:
    """The rows by (thread, i), each checked against what paired() was given: a == i, b == 3i (the
    pair on the caller's stack), and at every i % 1000 == 999 (the pointer 16) the reads' errors."""
    rows = {}
    for row in read_csv(out):
        i = int(row["i"])
        assert (row["thread"], i) not in rows, row  # (one row a call)
        rows[(row["thread"], i)] = row
        if i % 1000 == 999:
            assert row["a"] == row["b"] == row["s"] == "", row
            assert row["error"] == ("a: cannot read 8 bytes at 0x10; b: cannot read 8 bytes at 0x18; "
                                    "s: cannot read 8 bytes at 0x10"), row
        else:
            assert (int(row["a"]), int(row["b"]), int(row["s"]), row["error"]) == (i, 3 * i, 3 * i, ""), row
    return rows


def test_an_expr_is_read_in_the_target_every_call_exact_and_a_bad_pointer_fails_only_its_row(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN 2 threads calling paired(&{i, 3i}, i) 20,000 times each, 10,000 a second each (every
    # 1000th with the pointer 16)
    target = start_target("callers", "2", "20000", "paired", "10000")
    out = tmp_path / "paired.csv"
    # WHEN sampler traces it with four expressions through the pointer and the argument
    result = sampler("trace", "--pid", str(target.pid), *PAIRED, "--duration", "5s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    # THEN the site's first hits were an int3's, then the reads ran in the target (the line says so)
    assert re.search(r"probes: --at paired \(0x[0-9a-f]+\): in-process from now on .* 1 read\(s\) in the "
                     r"target at each call", result.stderr), result.stderr
    summary = SUMMARY.search(result.stderr)
    assert summary is not None, result.stderr
    rows = paired_rows(out)
    calls = done_calls(target)
    # and every call is a row, each exact (the calls before the jump were int3 rows: the target counted
    # the rest), the 40 bad pointers 40 rows with their errors, and the target is as it was
    assert calls == 40_000 == len(rows) == int(summary["calls"]) + sum(row["pause_us"] != "0" for row in rows.values())
    assert not summary["dropped"] and not summary["late"], result.stderr
    for thread in {thread for thread, _ in rows}:
        assert sorted(i for t, i in rows if t == thread) == list(range(20_000))
    assert sum(row["error"] != "" for row in rows.values()) == 40
    assert_code_matches_files(target.pid)
    assert no_pages_of_sampler(target.pid)
    assert target.status()["TracerPid"].strip() == "0"
    assert not list(own_journal.glob("*.json"))
    # AND the int3 path on another run of it gives the same rows for the same calls
    other = start_target("callers", "2", "300", "paired")
    int3 = tmp_path / "int3.csv"
    result = sampler("trace", "--pid", str(other.pid), *PAIRED, "--probe", "int3", "--duration", "60s",
                     "--max-events", "600", "--out", str(int3))
    assert result.returncode == 0, result.stderr
    by_int3 = paired_rows(int3)
    assert len(by_int3) == 600
    columns = ("a", "b", "i", "s", "error")
    assert {tuple(row[c] for c in columns) for row in by_int3.values()} == \
        {tuple(row[c] for c in columns) for (_, i), row in rows.items() if i < 300}


def test_an_expr_at_5_million_calls_a_second_is_counted_by_hist_in_bulk(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN one thread calling paired() 5 million times a second, 15 million times
    target = start_target("callers", "1", "15000000", "paired", "5000000")
    # WHEN sampler makes a histogram of its argument (a register: no read, no system call)
    result = sampler("trace", "--pid", str(target.pid), "--at", "paired", "--expr", "n=i", "--hist", "n",
                     "--duration", "7s")
    assert result.returncode == 0, result.stderr
    calls = done_calls(target)
    summary = SUMMARY.search(result.stderr)
    assert summary is not None, result.stderr
    buckets = [int(n) for n in re.findall(r"^[\[(].*?\s(\d+) \|", result.stdout, re.M)]
    counted = sum(buckets)
    dropped = int(summary["dropped"] or 0)
    # THEN the histogram counts every row, the rows and those the ring had no room for are the calls
    # (the first hits were an int3's), and few had no room: 0-2.7 % in the runs of docs/cost.md on this
    # 2-core VM, as sampler's worker is descheduled or not (a figure for a bench: the bound catches a collapse)
    assert counted == int(re.search(r"(\d+) samples", result.stderr)[1])  # type: ignore[index]
    assert calls == 15_000_000
    assert int(summary["calls"]) + 2 == calls
    assert counted + dropped == calls, (counted, dropped, result.stderr)
    assert dropped <= calls * 0.10, result.stderr
    if not dropped:  # (each bucket [2^k, 2^(k+1)) holds 2^k of the values 0..N-1)
        assert buckets[:20] == [1, 1, *(1 << k for k in range(1, 19))], result.stdout
    assert_code_matches_files(target.pid)


def test_max_overhead_rests_a_reading_probe_which_then_only_counts_and_every_call_is_accounted_for(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN one thread calling paired() 200,000 times a second, 600,000 times: a reading probe at
    # every call would take about a quarter of its time (1.2 us a call, docs/cost.md)
    target = start_target("callers", "1", "600000", "paired", "200000")
    out = tmp_path / "budget.csv"
    # WHEN sampler reads two values at each call under a budget of 1 %, until the program ends
    result = sampler("trace", "--pid", str(target.pid), "--at", "paired", "--expr", "a=p->a", "--expr", "i=i",
                     "--max-overhead", "1%", "--duration", "7s", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    calls = done_calls(target)
    summary = SUMMARY.search(result.stderr)
    assert summary is not None, result.stderr
    rows = read_csv(out)
    only, dropped, late = (int(summary[name] or 0) for name in ("only", "dropped", "late"))
    # THEN every call is a row (the first two an int3's), a call the resting probe only counted, or a
    # record not written: none is lost, and most were only counted
    assert calls == 600_000 == int(summary["calls"]) + 2
    assert int(summary["rows"]) + only + dropped + late == int(summary["calls"]), result.stderr
    assert len(rows) == int(summary["rows"]) + 2
    assert 0 < len(rows) < calls * 0.2 < calls * 0.5 < only, result.stderr
    # and each row is its call's (a == i; every 1000th call's pointer is bad: its row has the error)
    for row in rows:
        i = int(row["i"])
        assert (row["a"], bool(row["error"])) == (("", True) if i % 1000 == 999 else (str(i), False)), row
    # and by sampler's account (the probe's time clocked in the target) the budget held
    reached = re.search(r"--max-overhead 1\.00%: the probes took about ([\d.]+)% of the target's time", result.stderr)
    assert reached is not None, result.stderr
    assert float(reached[1]) < 2.0, result.stderr
    assert re.search(r"[\d.]+ us a recorded call in the probe", result.stderr), result.stderr


def test_a_go_programs_fields_are_read_in_process_by_goroutine(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN ringbuf-go, its ring of 20,000 slots read and written by two goroutines
    target = start_target("ringbuf-go")
    out = tmp_path / "go.csv"
    # WHEN sampler reads w - r at every Read for 3 s through the ptrace backend
    result = sampler("trace", "--pid", str(target.pid), "--backend", "ptrace", "--at", "main.(*Ring).Read",
                     "--expr", "delta=b.w-b.r", "--duration", "3s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "in-process from now on" in result.stderr, result.stderr
    rows = read_csv(out)
    # THEN rows came in thousands, each a gap the ring can hold, each thread a goroutine's id
    assert len(rows) > 1000
    assert all(0 <= int(row["delta"]) <= 20_000 and row["error"] == "" for row in rows)
    assert len({row["thread"] for row in rows}) <= 2 and all(int(row["thread"]) < 1000 for row in rows)
    assert_code_matches_files(target.pid)
    assert target.status()["TracerPid"].strip() == "0"


def test_a_go_program_survives_reading_probes_put_in_and_taken_out_again_and_again(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN burst-go: 8 goroutines, each on its own thread, calling touch(&pair) in bursts, Go's
    # preemption parking them wherever it may (the jump once went in while one was parked with a
    # return into its bytes: it died at the site + 4 when it ran again, at the 4th of 6 runs)
    target = start_target("burst-go", "8", "2500")
    for run in range(8 if LONG else 3):  # (make test-long: 8 runs)
        # WHEN a reading probe goes in at touch (past its prologue) and out, 8 times (make test: 3)
        result = sampler("trace", "--pid", str(target.pid), "--at", "main.touch", "--probe", "inprocess",
                         "--expr", "n=a.n", "--expr", "sum=a.sum", "--hist", "n", "--duration", "1s")
        # THEN each run read in the target, and the program goes on bursting
        if result.returncode != 0:  # (in full: pytest cuts a long assertion message short)
            crash = next((i for i, line in enumerate(target.lines) if re.match(
                r"(fatal error|unexpected|SIG[A-Z]+|panic|runtime:|goroutine \d+ \[running)", line)), len(target.lines))
            print(f"run {run}: {result.stderr}\nthe target's crash, from its first line:\n"
                  + "\n".join(target.lines[max(0, crash - 5):crash + 60]))
        assert result.returncode == 0, (run, result.stderr, target.lines[-30:])
        assert "in-process from now on" in result.stderr, result.stderr
        assert target.proc.poll() is None, target.lines[-20:]
    seen = len(target.lines)
    target.wait_for(lambda: any(line.startswith("burst ") for line in target.lines[seen:]), 30, "no burst after")
    assert_code_matches_files(target.pid)


def test_auto_puts_an_int3_where_no_jump_can_go_and_says_which_each_site_got(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN warm(), whose last 5 bytes hold its ret (no jump fits there), called 300 times by one thread
    target = start_target("callers", "1", "300", "warm")
    warm = symbol_address(target.pid, "warm")
    out = tmp_path / "auto.csv"
    # WHEN sampler traces its last instruction but one with --probe auto
    result = sampler("trace", "--pid", str(target.pid), "--at", f"*{warm + 0xb:#x}", "--probe", "auto",
                     "--duration", "3s", "--out", str(out))
    # THEN that site gets an int3 (and the line says why), which counts every call as a row
    assert result.returncode == 0, result.stderr
    assert re.search(r"probes: --at \S+ \(0x[0-9a-f]+\): an int3 \(.*(ret|branch)", result.stderr), result.stderr
    assert len(read_csv(out)) == done_calls(target) == 300
    assert_code_matches_files(target.pid)


def start_tracing(target: Target, tmp_path: Path, *extra: str) -> subprocess.Popen[bytes]:
    """sampler tracing ring_read in-process; returned once the jump is in."""
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--pid", str(target.pid), "--at", "ring_read",
                             "--probe", "inprocess", "--out", str(tmp_path / "t.csv"), "--quiet", *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while not (code_differs(target.pid) and not no_pages_of_sampler(target.pid)):
        assert proc.poll() is None and time.monotonic() < deadline, "sampler never put its probe in"
        time.sleep(0.02)
    time.sleep(0.3)
    return proc


def kill_worker(proc: subprocess.Popen[bytes], target: Target, guardian_too: bool) -> None:
    """SIGKILL sampler's tracing worker (and its guardian), as the OOM killer does."""
    worker = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
    guardians = [pid for pid in descendants(worker) if Path(f"/proc/{pid}/comm").read_text().strip() == "sampler-guard"]
    assert len(guardians) == 1
    if guardian_too:
        os.kill(guardians[0], signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(10) == 128 + signal.SIGKILL
    assert proc.stderr is not None
    proc.stderr.close()
    target.wait_for(lambda: target.status()["TracerPid"].strip() == "0", 10, "the dead tracer did not let go")


def test_a_killed_worker_leaves_a_jump_that_keeps_the_target_running_and_the_guardian_takes_it_out(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN ringbuf-c's reader calling ring_read through sampler's in-process probe
    target = start_target("ringbuf-c")
    proc = start_tracing(target, tmp_path)
    # WHEN the tracing worker is SIGKILLed
    kill_worker(proc, target, guardian_too=False)
    # THEN the target runs on, and the guardian takes the jump out (every thread held for it)
    target.wait_for(lambda: not code_differs(target.pid), 10, "the guardian did not take the jump out")
    target.wait_for(lambda: not list(own_journal.glob("*.json")), 10, "the journal entry stayed")
    assert target.assert_working()
    assert_code_matches_files(target.pid)


def test_repair_takes_out_the_jump_a_killed_worker_and_guardian_left(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN an in-process probe left in ringbuf-c by a sampler whose worker and guardian were both killed
    target = start_target("ringbuf-c")
    proc = start_tracing(target, tmp_path)
    kill_worker(proc, target, guardian_too=True)
    # THEN the target runs on through the trampoline (an int3 left there would have killed it)
    assert target.assert_working()
    assert code_differs(target.pid)
    # WHEN sampler repair is run
    result = subprocess.run([sys.executable, "-m", "sampler", "repair", "--pid", str(target.pid)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    # THEN the jump is out (5 bytes at once, every thread held), the target untouched and working
    assert result.returncode == 0, result.stderr
    assert f"PID {target.pid}: 5 byte(s) restored" in result.stderr, result.stderr
    assert_code_matches_files(target.pid)
    assert not list(own_journal.glob("*.json"))
    assert target.assert_working()


@pytest.mark.parametrize("program", ["burst", "burst-go"])
def test_a_hot_function_of_8_threads_probed_and_unprobed_runs_on_unharmed(
        start_target: Callable[..., Target], tmp_path: Path, program: str) -> None:
    # GIVEN 8 threads calling a 3 ns function in bursts of a million calls (Go: its preemption signals
    # come while a thread is inside the trampoline)
    target = start_target(program, "8", "200000")
    function = "main.touch" if program == "burst-go" else "touch"
    # WHEN sampler traces it in-process for 2 s
    result = sampler("trace", "--pid", str(target.pid), "--at", function, "--probe", "inprocess",
                     "--duration", "2s", "--out", str(tmp_path / "t.csv"), "--quiet")
    assert result.returncode == 0, result.stderr
    summary = SUMMARY.search(result.stderr)
    assert summary is not None and int(summary["calls"]) > 1_000_000, result.stderr
    # THEN its bursts ran traced, and run on after it untraced: nothing of sampler's left behind
    seen = len(target.lines)
    target.wait_for(lambda: sum(line.endswith("traced=0") for line in target.lines[seen:]) >= 3, 30,
                    "no untraced bursts after the run")
    assert any(line.endswith("traced=1") for line in target.lines[:seen])
    assert target.proc.poll() is None and not any("fatal" in line or "SIGSEGV" in line for line in target.lines)
    assert_code_matches_files(target.pid)
    # (Go: the pages stay, said: a goroutine preempted inside a trampoline returns there when it runs again)
    assert no_pages_of_sampler(target.pid) == (program == "burst")
    assert ("pages stay mapped" in result.stderr) == (program == "burst-go"), result.stderr
    assert target.status()["TracerPid"].strip() == "0"


def test_debians_redis_commands_are_counted_in_process_as_redis_counts_them_and_a_bgsave_succeeds(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN Debian's redis-server (stripped: processCommand from its exported symbols)
    target, port = start_redis(start_target, "--loglevel", "warning", "--dir", str(tmp_path))
    if not shutil.which("redis-benchmark"):
        pytest.fail("redis-benchmark is missing: make setup installs redis-server with it")
    before = _commands(port)
    # WHEN sampler counts processCommand in-process while redis-benchmark runs and a BGSAVE forks a child
    # that inherits the jump
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--pid", str(target.pid),
                             "--at", "processCommand", "--probe", "inprocess", "--out", str(tmp_path / "r.csv"),
                             "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    target.wait_for(lambda: code_differs(target.pid) or proc.poll() is not None, 30, "sampler never put its probe in")
    benchmark = ["redis-benchmark", "-p", str(port), "-n", "20000", "-c", "4", "-t", "set,get,incr", "-q"]
    subprocess.run(benchmark, capture_output=True, timeout=120, check=True)
    assert redis_cli(port, "BGSAVE").strip() == "Background saving started"
    target.wait_for(lambda: "rdb_bgsave_in_progress:0" in redis_cli(port, "INFO", "persistence"), 30,
                    "the BGSAVE never ended")
    subprocess.run(benchmark, capture_output=True, timeout=120, check=True)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 0, stderr
    # THEN the calls counted in the target are the commands redis ran (by INFO commandstats: the INFO
    # that took ``before`` ran untraced), each a row; the BGSAVE succeeded, its child's calls not counted
    made = _commands(port) - before - 1
    summary = SUMMARY.search(stderr)
    assert summary is not None, stderr
    assert int(summary["calls"]) == made > 120_000
    assert int(summary["rows"]) + int(summary["dropped"] or 0) + int(summary["late"] or 0) == made, stderr
    # (how many the ring kept depends on how fast sampler read it beside redis-benchmark on 2 cores: 67-96
    # thousand of 124 thousand here on 2026-12-06, before and after that day's change; every one is accounted for)
    assert int(summary["rows"]) > 20_000
    assert "rdb_last_bgsave_status:ok" in redis_cli(port, "INFO", "persistence")
    assert (tmp_path / "dump.rdb").stat().st_size > 0
    assert redis_cli(port, "PING").strip() == "PONG"
    assert_code_matches_files(target.pid)
    assert no_pages_of_sampler(target.pid)


def _commands(port: int) -> int:
    """The commands redis ran so far, by its own count (INFO commandstats, the INFO itself not yet in)."""
    return sum(int(n) for n in re.findall(r"calls=(\d+)", redis_cli(port, "INFO", "commandstats")))


def test_a_go_program_traced_in_process_goes_on_through_its_runtimes_signals(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN ringbuf-go, whose reader calls Read 20 million times a second (the ring full within
    # 10 ms) and whose runtime preempts its busy goroutines with SIGURG: a traced thread stops at
    # every signal until sampler passes it on
    target = start_target("ringbuf-go")
    seen = len(target.lines)
    # WHEN sampler counts Read in-process for 4 s
    result = sampler("trace", "--pid", str(target.pid), "--at", "main.(*Ring).Read", "--duration", "4s",
                     "--out", str(tmp_path / "t.csv"), "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN the program printed its throughput each second meanwhile (left stopped at its signals while
    # sampler wrote rows, it printed 2 lines in 8 s, at 1-4 % of its reads/s)
    during = [line for line in target.lines[seen:] if line.startswith("reads/s=")]
    assert len(during) >= 3, target.lines[seen:]
    assert all(int(line.split()[0].split("=")[1]) > 0 for line in during)
    summary = SUMMARY.search(result.stderr)
    assert summary is not None and int(summary["calls"]) > 1_000_000, result.stderr


def test_a_refusal_the_process_shows_comes_before_a_thread_is_seized(start_target: Callable[..., Target]) -> None:
    # GIVEN a target, watched every half millisecond for a tracer
    target = start_target("callers", "1", "300", "warm")
    tracers: set[str] = set()
    done = False

    def watch() -> None:
        while not done:
            tracers.add(target.status()["TracerPid"].strip())
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        # WHEN --probe inprocess is asked of an expression only an int3 reads (ustack: the thread's stack copied)
        result = sampler("trace", "--pid", str(target.pid), "--at", "warm", "--probe", "inprocess",
                         "--expr", "s=ustack", "--duration", "3s")
    finally:
        done = True
        watcher.join()
    # THEN it is refused in one line, and no thread of the target was ever seized for it
    assert result.returncode == 2, result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert "--probe inprocess: no in-process probe at --at warm" in line and "ustack" in line, result.stderr
    assert tracers == {"0"}, tracers
    assert_code_matches_files(target.pid)
