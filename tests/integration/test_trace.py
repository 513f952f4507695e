"""sampler trace: a row for every hit, with each backend, against the real targets."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    Target,
    assert_csv_whole,
    assert_signal_ends_cleanly,
    assert_text_matches_file,
    have_delve,
    sampler,
    start_sampler,
    wait_for_rows,
)

CAPACITY = 20000
CASES = [
    ("ptrace", "ringbuf-c", "ring_read", "b->w - b->r"),
    ("ptrace", "ringbuf-go", "main.(*Ring).Read", "b.w - b.r"),
    pytest.param("delve", "ringbuf-go", "main.(*Ring).Read", "b.w - b.r",
                 marks=pytest.mark.skipif(not have_delve(), reason="dlv is missing")),
    pytest.param("delve-rpc", "ringbuf-go", "main.(*Ring).Read", "b.w - b.r",
                 marks=pytest.mark.skipif(not have_delve(), reason="dlv is missing")),
]


@pytest.mark.parametrize("backend, build, at, delta", CASES)
def test_every_hit_gives_a_row(start_target: Callable[..., Target], tmp_path: Path,
                               backend: str, build: str, at: str, delta: str) -> None:
    # GIVEN a running target
    target = start_target(build)
    out = tmp_path / "trace.csv"
    # WHEN tracing every call of the reader's read function for 200 events, by breakpoints
    # (in-process probes, auto's choice, have their own tests: at their speed the reader can
    # make all 200 calls on an empty ring before the writer's thread is let go after the put)
    probe = ("--probe", "int3") if backend == "ptrace" else ()
    result = sampler("trace", "--backend", backend, *probe, "--pid", str(target.pid), "--at", at,
                     "--expr", f"delta={delta}", "--expr", "r=" + delta.split(" - ")[1],
                     "--max-events", "200", "--out", str(out), "--quiet", timeout=120)
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    # THEN 200 rows, one per hit: sane values, the read index never goes back
    assert len(rows) == 200
    assert all(r["error"] == "" and 0 <= int(r["delta"]) <= CAPACITY for r in rows)
    reads = [int(r["r"]) for r in rows]
    assert reads == sorted(reads), "hits come in order"
    assert len(set(reads)) > 1
    # AND the target runs on, with no breakpoint left
    target.assert_untouched()
    if backend == "ptrace" and build == "ringbuf-c":
        assert_text_matches_file(target)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_tracing_cleanly(start_target: Callable[..., Target], tmp_path: Path,
                                       signum: int) -> None:
    target = start_target("ringbuf-c")
    out = tmp_path / "sig.csv"
    proc = start_sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "ring_read",
                         "--expr", "b->r", "--out", str(out), "--quiet")
    wait_for_rows(out, proc, 100)
    time.sleep(0.2)
    assert_signal_ends_cleanly(proc, signum, out, target)


def test_rip_reads_the_breakpoints_address_in_trace_and_attach(start_target: Callable[..., Target],
                                                               tmp_path: Path) -> None:
    # GIVEN the C ring buffer, and where its program file says ring_read is
    from elftools.elf.elffile import ELFFile

    from tests.integration.targets import BIN

    target = start_target("ringbuf-c")
    with open(BIN / "ringbuf-c", "rb") as f:
        [symbol] = ELFFile(f).get_section_by_name(".symtab").get_symbol_by_name("ring_read")
        start, size = symbol["st_value"], symbol["st_size"]
    bias = min(int(line.split("-")[0], 16) for line in Path(f"/proc/{target.pid}/maps").read_text().splitlines()
               if line.endswith(str(BIN / "ringbuf-c")))
    pcs = {}
    # WHEN $rip is read at the breakpoint, on every hit and on a schedule
    for command, limit in (("trace", "--max-events"), ("attach", "--count")):
        out = tmp_path / f"{command}.csv"
        result = sampler(command, "--backend", "ptrace", "--pid", str(target.pid), "--at", "ring_read",
                         "--expr", "pc=$rip", limit, "3", *(("--rate", "20") if command == "attach" else ()),
                         "--out", str(out), "--quiet", timeout=60)
        assert result.returncode == 0, result.stderr
        pcs[command] = {int(row["pc"], 0) for row in assert_csv_whole(out)}
    # THEN both read one address, the breakpoint's: inside ring_read (not one byte past the int3)
    assert pcs["trace"] == pcs["attach"] and len(pcs["trace"]) == 1, pcs
    pc = next(iter(pcs["trace"])) - bias
    assert start <= pc < start + size, (hex(pc), hex(start), size)
    target.assert_untouched()


def test_trace_needs_a_location() -> None:
    result = sampler("trace", "--pid", "1", "--expr", "x")
    assert result.returncode == 2 and "Missing option '--at'" in result.stderr


def test_a_trace_whose_breakpoint_is_never_hit_says_so(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a function the program never calls (as libc's malloc in a program built with jemalloc)
    target = start_target("ringbuf-c")
    out = tmp_path / "never.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "never", "--expr", "b->w", "--duration", "1s",
                     "--quiet", "--out", str(out))
    # THEN the run ends as asked, with no row, and one line says that no call was seen
    assert result.returncode == 0, result.stderr
    assert out.read_text().count("\n") == 1  # the header only
    assert "no call of never was seen: the breakpoint was in, never hit" in result.stderr, result.stderr
    assert_text_matches_file(target)
    target.assert_untouched()
