"""Names as the compiler emitted them, and several probes in one run (ptrace): a function
left only as its clone (ring_gap.isra.0, rb::Ring::gap(long) const [clone .constprop.0]
[clone .isra.0]) with its parameters read as gdb reads them, inlined copies each with a
breakpoint, and several --at in one trace or attach, each row saying which."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.target import procfs
from tests.integration.targets import (
    BIN,
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    code_differs,
    descendants,
    finish,
    one_line_error,
    sampler,
    start_sampler,
    wait_until_patched,
)

pytestmark = pytest.mark.usefixtures("built_targets")

RING_SIZE = 8 + 8 + 32 + 8 * 8
"""sizeof(struct ring) in targets/clones/clones.c (and rb::Ring in clones.cpp)."""


def symbol(program: Path, name: str) -> int:
    """A symbol's file address, from nm."""
    listed = subprocess.run(["nm", str(program)], capture_output=True, text=True, check=True).stdout
    [address] = [int(line.split()[0], 16) for line in listed.splitlines() if line.split()[-1] == name]
    return address


def load_bias(pid: int, program: Path) -> int:
    return min(int(line.split("-")[0], 16) for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
               if line.endswith(str(program)))


def rows_of(result: subprocess.CompletedProcess[str], out: Path) -> list[dict[str, str]]:
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert rows and all(r["error"] == "" for r in rows), rows[:3]
    return rows


def test_a_function_left_only_as_its_clone_is_traced_with_its_parameters(start_target: Callable[..., Target],
                                                                          tmp_path: Path) -> None:
    # GIVEN the C program whose ring_gap(b, scale) gcc -O2 left only as ring_gap.isra.0: b
    # itself is gone (the clone gets b->w and b->r), its value known only to the caller
    target = start_target("clones")
    out = tmp_path / "gap.csv"
    # WHEN ring_gap is traced, its parameters read as gdb reads them (b=b@entry, through the
    # caller's call site)
    result = sampler("trace", "--pid", str(target.pid), "--at", "ring_gap", "--expr", "scale", "--expr", "b",
                     "--expr", "w=b->w", "--expr", "name=str(b->name)", "--max-events", "40", "--out", str(out),
                     "--quiet")
    # THEN b is &rings[0] or &rings[1], as the loop alternates, its name that ring's, and scale 0-3
    rows = rows_of(result, out)
    rings = load_bias(target.pid, BIN / "clones") + symbol(BIN / "clones", "rings")
    assert {row["b"] for row in rows} == {hex(rings), hex(rings + RING_SIZE)}, rows[:3]
    for row in rows:
        assert row["name"] == ("ring 0" if row["b"] == hex(rings) else "ring 1"), row
        assert row["scale"] in {"0", "1", "2", "3"} and int(row["w"]) > 0, row
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_a_stripped_program_breaks_at_the_clone_its_symbol_table_has(start_target: Callable[..., Target],
                                                                      tmp_path: Path) -> None:
    # GIVEN the same program without DWARF: its symbol table has ring_gap.isra.0, not ring_gap
    program = tmp_path / "clones-nodebug"
    subprocess.run(["strip", "--strip-debug", "-o", str(program), str(BIN / "clones")], check=True)
    target = start_target(str(program), binary=False)
    out = tmp_path / "stripped.csv"
    # WHEN ring_gap is traced by its name
    result = sampler("trace", "--pid", str(target.pid), "--at", "ring_gap", "--max-events", "20",
                     "--out", str(out))
    # THEN the clone is the breakpoint, and sampler says so
    assert len(rows_of(result, out)) == 20
    assert "--at ring_gap: the compiler left no code under that name, only ring_gap.isra.0" in result.stderr
    target.assert_untouched()


def test_cpp_methods_left_only_as_clones_read_this_and_constant_arguments(start_target: Callable[..., Target],
                                                                         tmp_path: Path) -> None:
    # GIVEN g++ -O2 -fwhole-program's rb::Ring::gap(long) const, left only as
    # "[clone .constprop.0] [clone .isra.0]" (scale is always 2), and rb::Ring::push(int)
    # as "[clone .constprop.0]" (step is always 3)
    target = start_target("clones-cpp")
    rings = load_bias(target.pid, BIN / "clones-cpp") + symbol(BIN / "clones-cpp", "_ZL5rings")
    out = tmp_path / "gap.csv"
    # WHEN each is traced by its qualified name, as gdb breaks at it
    result = sampler("trace", "--pid", str(target.pid), "--at", "rb::Ring::gap", "--expr", "scale", "--expr", "this",
                     "--expr", "w=this->w", "--max-events", "20", "--out", str(out))
    rows = rows_of(result, out)
    # THEN `this` is one of the two rings, and the argument the clone folded in reads 2
    assert "only rb::Ring::gap(long) const [clone .constprop.0.isra.0]" in result.stderr
    assert {row["this"] for row in rows} == {hex(rings), hex(rings + RING_SIZE)}, rows[:3]
    assert all(row["scale"] == "2" and int(row["w"]) > 0 for row in rows), rows[:3]
    out = tmp_path / "push.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "rb::Ring::push", "--expr", "step", "--expr", "this",
                     "--max-events", "10", "--out", str(out), "--quiet")
    assert all(row["step"] == "3" for row in rows_of(result, out))
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_each_inlined_copy_gets_a_breakpoint_and_counts_its_calls(start_target: Callable[..., Target],
                                                                 tmp_path: Path) -> None:
    # GIVEN ring_used, static inline: no code of its own, inlined into main at two places,
    # each run once per turn of the loop
    target = start_target("clones")
    out = tmp_path / "inlined.csv"
    # WHEN it is traced by its name for a second
    result = sampler("trace", "--pid", str(target.pid), "--at", "ring_used", "--duration", "1s", "--out", str(out),
                     "--quiet")
    # THEN both copies are breakpoints, the probe column says which, and they count alike
    assert result.returncode == 0, result.stderr
    counts = Counter(row["probe"] for row in assert_csv_whole(out))
    assert len(counts) == 2 and all(label.startswith("ring_used [inlined in main, line ") for label in counts), counts
    first, second = counts.values()
    assert min(first, second) > 100 and abs(first - second) <= 2, counts
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_debians_libc_clones_and_inlined_copies_are_all_breakpoints(start_target: Callable[..., Target],
                                                                    tmp_path: Path) -> None:
    # GIVEN glibc as Debian builds it, with its debug file (libc6-dbg): printf's
    # outstring_func(string, length) is two clones outstring_func.part.0 (one per file that
    # defines it) and two dozen copies inlined into __vfprintf_internal
    target = start_target("clones")  # it prints "requests/s=N" once a second
    out = tmp_path / "printf.csv"
    # WHEN it is traced by its name in libc for a while
    result = sampler("trace", "--pid", str(target.pid), "--at", "libc.so.6:outstring_func",
                     "--expr", "text=str(string, length)", "--duration", "2.5s", "--out", str(out))
    # THEN sampler says what it broke at, and the strings printf wrote are among the hits
    assert result.returncode == 0, result.stderr
    assert "only outstring_func.part.0, outstring_func.part.0, " in result.stderr
    assert re.search(r"\d+ inlined copies: breaking there", result.stderr), result.stderr
    rows = assert_csv_whole(out)
    assert "requests/s=" in {row["text"] for row in rows}, rows[:5]
    assert all(row["probe"].startswith("libc.so.6:outstring_func [") for row in rows)
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_several_probes_in_one_trace_count_every_call_of_each(start_target: Callable[..., Target],
                                                               tmp_path: Path) -> None:
    # GIVEN ring_gap and check_slow, each called twice per turn of the loop
    target = start_target("clones")
    out = tmp_path / "two.csv"
    # WHEN both are traced in one run, an expression each and one (before the first --at) for both
    result = sampler("trace", "--pid", str(target.pid), "--expr", "turn=loops", "--at", "ring_gap", "--expr", "scale",
                     "--at", "check_slow", "--expr", "w=b->w", "--duration", "1s", "--out", str(out), "--quiet")
    # THEN each row says its probe and has its own columns; the counts agree call for call
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert list(rows[0])[:9] == ["seq", "time", "elapsed_s", "pid", "thread", "probe", "turn", "scale", "w"]
    counts = Counter(row["probe"] for row in rows)
    assert set(counts) == {"ring_gap", "check_slow"} and min(counts.values()) > 100, counts
    # (the calls of the run's last moments are rows of one ring and not yet of the other when the run
    # ends: under CI's load 103 of 9,500 were; the counts agree up to the last call both saw)
    both = min(max(float(row["elapsed_s"]) for row in rows if row["probe"] == probe) for probe in counts)
    seen = Counter(row["probe"] for row in rows if float(row["elapsed_s"]) <= both)
    assert abs(seen["ring_gap"] - seen["check_slow"]) <= 4, (seen, counts)
    for row in rows:
        assert row["error"] == "" and int(row["turn"]) >= 0, row
        assert (row["scale"] != "" and row["w"] == "") if row["probe"] == "ring_gap" else \
            (row["scale"] == "" and int(row["w"]) > 0), row
    # AND sampler report gives each probe its own statistics, of its own columns
    report = sampler("report", str(out))
    assert report.returncode == 0, report.stderr
    parts = report.stdout.split("\n\n")
    [gap] = [part for part in parts if part.startswith(f"PID {target.pid} at ring_gap: {counts['ring_gap']} rows")]
    [slow] = [part for part in parts if part.startswith(f"PID {target.pid} at check_slow: {counts['check_slow']} rows")]
    scale = next(line.split() for line in gap.splitlines() if line.split()[0] == "scale")
    assert scale[1] == str(counts["ring_gap"]) and scale[3] == "0" and scale[7] == "3", gap  # rows, min, max
    assert " w " not in gap and " scale " not in slow and " turn " in gap and " turn " in slow, report.stdout
    as_json = json.loads(sampler("report", str(out), "--json").stdout)["pids"]
    assert isinstance(as_json[f"{target.pid} at ring_gap"]["columns"]["scale"]["first"], int), as_json
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_attach_samples_every_probe_at_each_tick(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN the same program
    target = start_target("clones")
    out = tmp_path / "ticks.csv"
    # WHEN two probes are sampled at 20 Hz for three ticks
    result = sampler("attach", "--pid", str(target.pid), "--at", "ring_gap", "--expr", "scale",
                     "--at", "advance", "--expr", "step", "--expr", "w=b->w", "--count", "6", "--rate", "20",
                     "--out", str(out), "--quiet")
    # THEN each tick has a row of each, in the order given, with its own values
    rows = rows_of(result, out)
    assert [row["probe"] for row in rows] == ["ring_gap", "advance"] * 3, rows
    for row in rows:
        if row["probe"] == "advance":
            assert row["step"] in {"1", "3"} and int(row["w"]) > 0 and row["scale"] == "", row
        else:
            assert row["scale"] in {"0", "1", "2", "3"} and row["step"] == row["w"] == "", row
    # AND --stop-when on the probe column ends the run at that row, before the tick's next probe
    out = tmp_path / "stop.csv"
    rows = rows_of(sampler("attach", "--pid", str(target.pid), "--at", "ring_gap", "--expr", "scale",
                           "--at", "advance", "--expr", "step", "--count", "6", "--rate", "20",
                           "--stop-when", 'probe == "ring_gap"', "--out", str(out), "--quiet"), out)
    assert [row["probe"] for row in rows] == ["ring_gap"], rows
    target.assert_untouched()


def test_the_guardian_takes_out_every_probe_when_the_worker_is_killed(start_target: Callable[..., Target],
                                                                      tmp_path: Path) -> None:
    # GIVEN a trace with two probes armed all the time, at functions called rarely (a thread
    # that runs into an int3 in the microseconds before the guardian acts dies of its SIGTRAP:
    # docs/safety.md)
    target = start_target("clones")
    out = tmp_path / "killed.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "tick", "--at", "ring_full",
                         "--out", str(out), "--quiet")
    wait_until_patched(target.pid)
    # WHEN the tracing worker is killed outright
    workers = [pid for pid in descendants(proc.pid) if procfs.comm(pid) == "sampler-worker"]
    assert workers, "no sampler-worker found"
    os.kill(workers[0], signal.SIGKILL)
    finish(proc)
    # THEN every breakpoint's byte is back and the program runs on untraced
    deadline = time.monotonic() + 5
    while procfs.tracer_pid(target.pid) != 0 or code_differs(target.pid):
        assert time.monotonic() < deadline, "the target was left traced or patched"
        time.sleep(0.01)
    target.assert_untouched()


@pytest.mark.parametrize("args, expected", [
    (["--at", "ring_gap", "--at", "no_such_function", "--expr", "calls"], "no_such_function"),
    (["--backend", "delve", "--at", "ring_gap", "--at", "advance", "--expr", "calls"],
     "several --at need the ptrace backend"),
    (["--at", "ring_gap", "--at", "advance", "--expr", "probe=calls"], "column name 'probe'"),
    (["--at", "advance", "--expr", "calls", "--count-by", "probe"], "this run has one breakpoint"),
])
def test_bad_probes_are_one_line_and_touch_nothing(start_target: Callable[..., Target], args: list[str],
                                                   expected: str) -> None:
    target = start_target("clones")
    line = one_line_error(sampler("attach", "--pid", str(target.pid), "--count", "2", "--quiet", *args))
    assert expected in line, line
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_gdb_reads_the_clones_parameters_as_sampler_does(start_target: Callable[..., Target],
                                                         tmp_path: Path) -> None:
    # GIVEN gdb (make setup installs it), the reference for what a clone's parameters are
    assert shutil.which("gdb"), "gdb is missing: make setup installs it"
    target = start_target("clones")
    gdb = subprocess.run(["gdb", "-q", "-batch", "-p", str(target.pid), "-ex", "break ring_gap", "-ex", "continue",
                          "-ex", "printf \"b=%p\\n\", b", "-ex", "delete", "-ex", "detach"],
                         capture_output=True, text=True, timeout=60)
    said = [line for line in gdb.stdout.splitlines() if line.startswith("b=")]
    out = tmp_path / "b.csv"
    rows = rows_of(sampler("trace", "--pid", str(target.pid), "--at", "ring_gap", "--expr", "b", "--max-events", "10",
                           "--out", str(out), "--quiet"), out)
    # THEN gdb's b is one of the values sampler reads there
    assert said and said[0].removeprefix("b=") in {row["b"] for row in rows}, (gdb.stdout[-500:], rows[:2])
    target.assert_untouched()
