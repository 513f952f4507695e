"""trace --latency and --to on real processes: every call a row at its return, each retval what the
program got, each latency_us between the time the call was busy and the program's own clock around
it (which holds sampler's stops too), in C, C++ (an exception through the frame), Rust and Go (a new
goroutine each call, its stack moved mid-call); recursion 10 deep; longjmp counted, never paired."""

from __future__ import annotations

import csv
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    Target,
    assert_code_matches_files,
    finish,
    redis_cli,
    sampler,
    start_redis,
    start_sampler,
    stop_once,
)


def timed_rows(target: Target, at: str, out: Path, *options: str, rows: int | None = None
               ) -> tuple[list[dict[str, str]], str]:
    """Trace ``at`` with ``options`` until the target says done (and its rows are written); the rows
    and sampler's stderr."""
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", at, *options, "--duration", "180s",
                         "--out", str(out))
    target.wait_for(lambda: any(line.startswith("done calls=") for line in target.lines), 120,
                    "the target did not finish its calls")
    _, stderr = stop_once(proc, lambda: rows is None or len(out.read_text().splitlines()) - 1 >= rows)
    assert proc.returncode == 0, stderr
    with out.open() as f:
        return list(csv.DictReader(f)), stderr


def assert_left_clean(target: Target) -> None:
    """Alive, not traced, no thread stopped, its code as in its files (the target waits, idle, once done)."""
    assert target.proc.poll() is None, target.lines[-5:]
    assert target.status()["TracerPid"].strip() == "0"
    assert not [tid for tid, state in target.thread_states().items() if state in "Tt"]
    assert_code_matches_files(target.pid)


def program_calls(target: Target) -> dict[int, tuple[int, float, str]]:
    """The program's own account: call i -> (k, microseconds around the call, result)."""
    calls = {}
    for line in target.lines:
        if line.startswith("call "):
            _, i, k, ns, result = line.split()
            calls[int(i)] = (int(k), int(ns) / 1000, result)
    return calls


RATE = 0.001
"""How far the target's TSC, read by the in-process probes, may run from CLOCK_MONOTONIC in the first
moments of a run (its rate is calibrated as the run goes: 0.02 % seen)."""


def within(low: float, value: float, high: float) -> bool:
    """low <= value <= high, to the TSC's calibration (RATE) and its ns."""
    return low * (1 - RATE) - 0.01 <= value <= high * (1 + RATE) + 0.01


def assert_timed(rows: list[dict[str, str]], calls: dict[int, tuple[int, float, str]], busy_us: float = 100) -> None:
    """Each row is its call's: the result the program got, and a latency no shorter than the call was
    busy and no longer than the program's own clock around it (sampler's stops included there)."""
    assert sorted(int(row["i"]) for row in rows) == sorted(calls)
    for row in rows:
        k, own_us, result = calls[int(row["i"])]
        assert row["got"] == result, row
        assert within(k * busy_us, float(row["latency_us"]), own_us), (row, k, own_us)


@pytest.mark.parametrize("program, at", [("latency", "work"), ("latency-cpp", "work"), ("latency-rust", "work")])
def test_each_call_has_its_latency_and_result(start_target: Callable[..., Target], tmp_path: Path,
                                              program: str, at: str) -> None:
    # GIVEN a program whose calls are busy k x 100 us and return 1000 i + k, clocked by the program
    # (C++: every third call throws through work's frame)
    args = ("work", "16") if program == "latency" else ("16",)  # (C++: call 15 returns after 14 threw)
    target = start_target(program, *args)
    # WHEN each call is traced to its return, its argument read at the entry
    rows, stderr = timed_rows(target, at, tmp_path / "t.csv", "--latency", "--expr", "i=arg0",
                              "--expr", "got=retval", rows=10)
    # THEN every call that returned has one row with its own result and time
    calls = program_calls(target)
    thrown = sum(line.startswith("threw ") for line in target.lines)
    assert len(calls) + thrown == 16
    assert_timed(rows, calls)
    if thrown:  # the calls an exception left: counted, never paired with another call's return
        assert thrown == 5
        assert f"{thrown} call(s) had no return seen" in stderr, stderr
    assert_left_clean(target)


def test_a_double_result_is_read_from_xmm0(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("latency", "half", "8")
    rows, _ = timed_rows(target, "half", tmp_path / "t.csv", "--latency", "--expr", "i=arg0", "--expr",
                         "got=retval", rows=8)
    assert [float(row["got"]) for row in rows] == [i / 2 for i in range(8)]
    assert_timed([{**row, "got": str(float(row["got"]))} for row in rows],
                 {i: (k, us, str(float(result))) for i, (k, us, result) in program_calls(target).items()})


@pytest.mark.parametrize("probe", ["auto", "int3"])
def test_a_struct_result_is_read_from_rax_and_rdx_or_through_the_address_in_rax(
        probe: str, start_target: Callable[..., Target], tmp_path: Path) -> None:
    """struct pair (16 bytes) comes back in rax and rdx; struct big (32 bytes) in the caller's memory,
    its address in rax: read at the return (an in-process return probe records registers only, so
    the big one is int3s: the caller's slot holds a later call's values by the time a record is read)."""
    pair = start_target("latency", "pair", "12")
    rows, _ = timed_rows(pair, "pair_of", tmp_path / "p.csv", "--latency", "--probe", probe, "--expr", "i=i",
                         "--expr", "a=retval.a", "--expr", "b=retval.b", rows=12)
    assert [(int(r["i"]), int(r["a"]), int(r["b"])) for r in rows] == [(i, i, -i) for i in range(12)]
    big = start_target("latency", "big", "12")
    rows, stderr = timed_rows(big, "big_of", tmp_path / "b.csv", "--latency", "--probe", probe, "--expr", "i=i",
                              "--expr", "c=retval.c", "--expr", "d=retval.d", rows=12)
    assert [(int(r["i"]), int(r["c"]), float(r["d"])) for r in rows] == [(i, 3 * i, i / 4) for i in range(12)]
    if probe == "auto":
        assert "retval is read through memory at the return" in stderr, stderr


def test_recursion_pairs_each_return_with_its_own_entry(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN nest(10): each level busy 100 us, then the level under it; it returns the levels below + 1
    target = start_target("latency", "nest", "4")
    rows, _ = timed_rows(target, "nest", tmp_path / "t.csv", "--latency", "--expr", "level=arg0",
                         "--expr", "got=retval", rows=40)
    # THEN 10 rows per outer call, innermost first, each with its own level's result and time
    assert len(rows) == 40
    calls = program_calls(target)
    for n in range(4):
        group = rows[n * 10:(n + 1) * 10]
        assert [int(row["level"]) for row in group] == list(range(1, 11))
        assert [int(row["got"]) for row in group] == list(range(1, 11))
        latencies = [float(row["latency_us"]) for row in group]
        for level, latency in enumerate(latencies, 1):
            assert within(level * 100, latency, calls[n][1]), group
        assert latencies == sorted(latencies)  # each level holds the ones under it


def test_a_frame_left_by_longjmp_is_counted_not_paired(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN hop(): every third call leaves by longjmp (13 calls: 2, 5, 8 and 11 jump; 12 returns after)
    target = start_target("latency", "jump", "13")
    rows, stderr = timed_rows(target, "hop", tmp_path / "t.csv", "--latency", "--expr", "i=arg0",
                              "--expr", "got=retval", rows=9)
    # THEN the nine calls that returned have their rows, and the four that jumped are said
    assert sorted(int(row["i"]) for row in rows) == [i for i in range(13) if i % 3 != 2]
    assert_timed(rows, program_calls(target))
    assert "4 call(s) had no return seen" in stderr, stderr


def test_a_go_call_moved_to_a_new_stack_is_paired(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN work() on a new goroutine each call: a blocking system call in it (Go hands its P to another
    # thread meanwhile, and the goroutine goes on there), and its stack grown 64 KiB deep, so Go copies
    # its frame to a new stack mid-call
    target = start_target("latency-go", "10")
    rows, _ = timed_rows(target, "main.work", tmp_path / "t.csv", "--latency", "--expr", "i=arg0",
                         "--expr", "got=retval", "--expr", "sp_in=$rsp", "--expr", "sp_out=$rsp+retval*0",
                         "--expr", "fs_in=$fs_base", "--expr", "fs_out=$fs_base+retval*0", rows=10)
    # THEN each call is paired by its goroutine, though its frame is elsewhere at the return, and its
    # thread another
    assert_timed(rows, program_calls(target))
    assert len({row["thread"] for row in rows}) == 10  # a goroutine each
    moved = [abs(int(row["sp_out"]) - int(row["sp_in"])) > 65536 for row in rows]
    assert all(moved), rows
    other_thread = [row["fs_in"] != row["fs_out"] for row in rows]
    assert sum(other_thread) >= 9, rows
    assert_left_clean(target)


def test_a_stripped_go_programs_calls_are_timed_through_gos_own_frame_table(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN latency-go stripped as Debian strips its Go programs (no symbol table, no DWARF: no .debug_frame,
    # the only unwind table Go writes; its own function table, .gopclntab, stays)
    stripped = tmp_path / "latency-go"
    subprocess.run(["strip", "-o", str(stripped), str(ROOT / "targets" / "bin" / "latency-go")], check=True)
    target = start_target(str(stripped), "10", binary=False)
    # WHEN its calls of main.work are timed (the function found in Go's table by name)
    rows, stderr = timed_rows(target, "main.work", tmp_path / "t.csv", "--latency", "--expr", "i=arg0",
                              "--expr", "got=retval", rows=10)
    # THEN each call has its row, its latency within the program's own clock around it (a frame's address from
    # Go's pcsp table: before, every entry "had no call frame information" and the run said "never hit")
    assert_timed(rows, program_calls(target))
    assert "never hit" not in stderr and "no call frame information" not in stderr, stderr
    assert_left_clean(target)


def test_latency_between_two_places(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN work() calling the vDSO's clock at its start and end: --at work --to a line after its loop
    target = start_target("latency", "work", "10")
    rows, _ = timed_rows(target, "work", tmp_path / "t.csv", "--to", "libc:usleep", "--expr", "i=arg0", rows=10)
    # THEN from each call's entry to the usleep after it: the call and the program's printf
    calls = program_calls(target)
    assert sorted(int(row["i"]) for row in rows) == sorted(calls)
    for row in rows:
        k, _, _ = calls[int(row["i"])]
        assert within(k * 100, float(row["latency_us"]), 1e9)


def test_latency_refusals(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("latency", "work", "3")
    cases = [
        (("--at", "work", "--expr", "r=retval"), "retval is the value a function returned"),
        (("--at", "work", "--to", "half", "--probe", "inprocess"), "in-process --to is not built yet"),
        (("--at", "work", "--latency", "--to", "half"), "exclude each other"),
        (("--at", "work", "--latency", "--expr", "x=retval+arg1"), "is no global"),
    ]
    for options, said in cases:
        proc = start_sampler("trace", "--pid", str(target.pid), *options, "--duration", "1s")
        _, stderr = finish(proc)
        assert proc.returncode == 2, stderr
        assert said in stderr and len(stderr.strip().splitlines()) <= 3, stderr
        assert "Traceback" not in stderr
    assert_left_clean(target)


def test_debians_redis_process_command_latency_beside_its_own_commandstats(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN Debian's redis-server (stripped) under redis-benchmark
    target, port = start_redis(start_target, "--loglevel", "warning")
    out = tmp_path / "redis.csv"
    # WHEN each processCommand is timed to its return, its result read
    rows_before = made = 0  # (read by the finally's wait, whatever failed before)
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "processCommand", "--latency", "--expr",
                         "ok=retval", "--duration", "120s", "--out", str(out))
    try:
        deadline = time.monotonic() + 30
        while not out.exists() or len(out.read_text().splitlines()) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "no command was timed"
            redis_cli(port, "PING")
        time.sleep(0.3)
        rows_before = len(out.read_text().splitlines())
        before = _stats(port)
        subprocess.run(["redis-benchmark", "-p", str(port), "-n", "300", "-c", "1", "-t", "set,get", "-q"],
                       capture_output=True, timeout=120, check=True)
        after = _stats(port)
        made = sum(calls for calls, _ in after.values()) - sum(calls for calls, _ in before.values())
    finally:
        _, stderr = stop_once(proc, lambda: len(out.read_text().splitlines()) - rows_before >= made + 1)
    assert proc.returncode == 0, stderr
    # THEN a row for each command redis counted (the first INFO's, the benchmark's; the second INFO's too)
    with out.open() as f:
        rows = list(csv.DictReader(f))[rows_before - 1:]
    assert len(rows) == made + 1, (len(rows), made, stderr)
    assert {row["ok"] for row in rows} == {"0"}  # C_OK
    # AND no call is shorter than redis's own mean for its commands (latency_us never is; docs/cost.md)
    latencies = sorted(float(row["latency_us"]) for row in rows)
    own = {name: (after[name][1] * after[name][0] - before.get(name, (0, 0.0))[1] * before.get(name, (0, 0.0))[0])
           / max(1, after[name][0] - before.get(name, (0, 0.0))[0]) for name in ("set", "get")}
    assert latencies[len(latencies) // 2] >= max(own.values()) > 0, (own, latencies[:5])
    # AND sampler report gives its percentiles
    report = sampler("report", str(out))
    assert report.returncode == 0 and re.search(r"latency_us\s+\S+\s+\S+\s+[\d.]+", report.stdout), report.stdout
    assert redis_cli(port, "PING").strip() == "PONG"
    assert_left_clean(target)


def _stats(port: int) -> dict[str, tuple[int, float]]:
    """INFO commandstats: each command's calls and usec_per_call, by redis's own clock."""
    return {m.group(1): (int(m.group(2)), float(m.group(3))) for m in
            re.finditer(r"cmdstat_([\w|]+):calls=(\d+),usec=\d+,usec_per_call=([\d.]+)",
                        redis_cli(port, "INFO", "commandstats"))}


def test_in_process_latency_is_the_targets_own_clock(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN work(): its ret ends the function, with padding after it
    target = start_target("latency", "work", "20")
    # WHEN its calls are timed by in-process probes (the first hits learn what i=arg0 reads, by int3s)
    rows, stderr = timed_rows(target, "work", tmp_path / "t.csv", "--latency", "--probe", "inprocess",
                              "--expr", "i=arg0", "--expr", "got=retval", rows=20)
    # THEN every call has its row, and from the jumps on each is clocked in the target: within a few
    # microseconds of the program's own clock around the call (an int3's stops put 200-300 us there)
    assert "in-process, clocked in the target" in stderr, stderr
    calls = program_calls(target)
    assert_timed(rows, calls)
    timed = [row for row in rows if not row["error"] and row["pause_us"] == "0"]
    assert len(timed) >= 15, rows
    gaps = sorted(calls[int(row["i"])][1] - float(row["latency_us"]) for row in timed)
    assert gaps[len(gaps) // 2] < 20, gaps
    assert_left_clean(target)


def test_a_saved_pc_inside_a_return_window_keeps_its_int3(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a thread waiting with addresses inside the padding after tick()'s ret on its stack (where a
    # signal handler's saved pc would be: its sigreturn would resume inside a jump put there)
    target = start_target("latency", "saved", "300")
    # WHEN tick's calls are timed
    rows, stderr = timed_rows(target, "tick", tmp_path / "t.csv", "--latency", "--expr", "i=arg0",
                              "--expr", "got=retval", rows=250)
    # THEN its return keeps its int3 (the entry goes in-process), every call still has its row and result,
    # and the target is as it was
    assert "0 of its 1 return(s) in-process" in stderr and "1 return(s) keep their int3s" in stderr, stderr
    calls = {int(line.split()[1]): line.split()[4] for line in target.lines if line.startswith("call ")}
    assert all(row["got"] == calls[int(row["i"])] for row in rows), rows[:3]
    # every call is a row, or counted by the summary among those that got none (under way while the probes
    # went in: 13 of 300 once, on a loaded machine)
    told = sum(int(m.group(1)) for m in re.finditer(r"(\d+) (?:call\(s\)|return\(s\))[^\n]*?[:;] no row", stderr))
    assert len(rows) >= 250 and len(rows) + told >= len(calls) == 300, (len(rows), told, stderr)
    assert_left_clean(target)


def test_count_by_counts_the_timed_calls_by_an_entry_value(start_target: Callable[..., Target]) -> None:
    """--count-by on --latency's rows (issue 37): work(i, k) with k = 1 + i % 5, 15 calls: each k three times."""
    target = start_target("latency", "work", "15")
    result = sampler("trace", "--pid", str(target.pid), "--at", "work", "--latency", "--expr", "k=arg1",
                     "--count-by", "k", "--max-events", "15", "--quiet")
    assert result.returncode == 0, result.stderr
    target.wait_for(lambda: any(line.startswith("done calls=") for line in target.lines), 60, "the calls did not end")
    counts = {int(line.split()[0]): int(line.split()[1]) for line in result.stdout.splitlines()
              if line.split() and line.split()[0].isdigit()}
    assert counts == {k: 3 for k in range(1, 6)}, result.stdout
