"""USDT probes on the bundled target (targets/usdt): every argument form read as the program passed it,
every hit counted, the semaphore counted in while sampler reads the probe and out after it, after a
SIGKILL of the worker (the guardian), after `sampler repair`, and in a forked child; bad input in one line."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sampler.debuginfo import usdt
from sampler.debuginfo.elffile import ElfFile
from tests.integration.targets import (
    BIN,
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    descendants,
    finish,
    one_line_error,
    sampler,
    start_sampler,
    symbol_address,
    wait_for_rows,
    wait_until_patched,
)

SEMAPHORE = "sampler_guarded_semaphore"


def semaphore(pid: int) -> int:
    """The guarded probe's semaphore, read by the test itself."""
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(symbol_address(pid, SEMAPHORE))
        return int.from_bytes(mem.read(2), "little")


def set_semaphore(pid: int, value: int) -> None:
    """Another reader's count (as bpftrace's uprobe keeps through the kernel), written by the test."""
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(symbol_address(pid, SEMAPHORE))
        mem.write(value.to_bytes(2, "little"))


def wait_semaphore(pid: int, value: int, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while semaphore(pid) != value:
        assert time.monotonic() < deadline, f"the semaphore stayed {semaphore(pid)}, not {value}"
        time.sleep(0.02)


def notes(path: Path) -> list[usdt.Probe]:
    with ElfFile(str(path)) as file:
        return usdt.probes(file)


def signed_char(i: int) -> int:
    low = i % 256
    return low - 256 if low > 127 else low


def test_the_notes_hold_every_argument_form_the_tests_read() -> None:
    # GIVEN the target built -O2 and -O0: its notes, read by sampler's reader
    specs = {arg.spec for build in ("usdt", "usdt-O0") for probe in notes(BIN / build) for arg in probe.arguments}
    # THEN a register, a sub-register, a constant, memory off a base, memory through an index and
    # a symbol relative to rip are among them (what the next test checks by value)
    forms = {"register": "@%r", "32-bit register": "@%e", "byte register": "@%al", "constant": "@$",
             "base + displacement": "(%rbp)", "index": ",8)", "rip-relative": "(%rip)"}
    for form, piece in forms.items():
        assert any(piece in spec for spec in specs), (form, sorted(specs))


@pytest.mark.parametrize("build", ["usdt", "usdt-O0"])
@pytest.mark.parametrize("probe", ["int3", "auto"])
def test_every_argument_is_what_the_program_passed_and_every_hit_a_row(
        start_target: Callable[..., Target], tmp_path: Path, build: str, probe: str) -> None:
    # GIVEN the target stepping every 500 us, each step firing tick (6 arguments) and item (2)
    target = start_target(build, "500")
    out = tmp_path / "usdt.csv"
    # WHEN both probes are traced, every argument named
    result = sampler("trace", "--pid", str(target.pid), "--probe", probe,
                     "--at", "usdt:sampler:tick", "--expr", "i=arg0", "--expr", "neg=arg1", "--expr", "k=arg2",
                     "--expr", "c=arg3", "--expr", "low=arg4", "--expr", "s=str(arg5)",
                     "--at", "usdt:sampler:item", "--expr", "j=arg0", "--expr", "t=arg1",
                     "--max-events", "600", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    ticks = [r for r in rows if r["probe"] == "usdt:sampler:tick"]
    items = [r for r in rows if r["probe"] == "usdt:sampler:item"]
    # THEN every row is right, argument by argument
    assert len(ticks) > 200 and len(items) > 200, (len(ticks), len(items))
    assert all(r["error"] == "" for r in rows), [r["error"] for r in rows if r["error"]][:3]
    for r in ticks:
        i = int(r["i"])
        assert (int(r["neg"]), int(r["k"]), int(r["c"]), int(r["low"]), r["s"]) == \
            (-i, 7, i + 1, signed_char(i), f"step-{i}"), r
    for r in items:
        assert int(r["t"]) == int(r["j"]) % 8 * 1000 + 1, r
    # AND every hit is a row: the steps come one after another, none left out
    steps = [int(r["i"]) for r in ticks]
    assert steps == list(range(steps[0], steps[0] + len(steps)))
    # AND nothing is left in the target (a probe without a semaphore writes only its probe)
    assert target.proc.poll() is None
    assert_code_matches_files(target.pid)


def test_a_semaphore_is_counted_in_while_sampler_reads_and_out_after(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN the target, its guarded probe off (semaphore 0: the program skips it)
    target = start_target("usdt", stdin=True)
    assert semaphore(target.pid) == 0
    out = tmp_path / "guarded.csv"
    # WHEN sampler traces the guarded probe
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "usdt:sampler:guarded", "--expr", "i=arg0",
                         "--out", str(out), "--quiet")
    wait_semaphore(target.pid, 1)
    # THEN it is counted in, journaled with its place (right after: a moment later)
    address = f'"{hex(symbol_address(target.pid, SEMAPHORE))}"'
    deadline = time.monotonic() + 10
    while not any(address in entry.read_text() for entry in Path("/run/sampler").glob(f"{target.pid}-*.json")):
        if time.monotonic() > deadline:
            proc.kill()
            finish(proc)
            raise AssertionError("the semaphore was not journaled")
        time.sleep(0.02)
    # AND every step the program runs now fires it, and each is a row
    target.send("1000")
    target.wait_for(lambda: any(line.startswith("done 1000") for line in target.lines), 30, "no done")
    fired = int(next(line for line in target.lines if line.startswith("done 1000")).split("guarded=")[1].split()[0])
    wait_for_rows(out, proc, 1000)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    rows = assert_csv_whole(out)
    assert fired == 1000 and len(rows) == 1000
    assert [int(r["i"]) for r in rows] == list(range(1000))
    # AND after the run it is 0 again, and the probe is off: the next steps do not fire it
    assert semaphore(target.pid) == 0
    target.send("10")
    target.wait_for(lambda: any(line.startswith("done 10 ") for line in target.lines), 30, "no done")
    assert "guarded=1000 " in next(line for line in target.lines if line.startswith("done 10 "))
    assert_code_matches_files(target.pid)


def wait_until_probed(pid: int, library: str, names: tuple[str, ...], timeout: float = 30) -> None:
    """Wait until sampler's probe (an int3 or a jump) is at each site of ``names`` in the library."""
    maps = [line.split() for line in Path(f"/proc/{pid}/maps").read_text().splitlines()]
    path = next(m[-1] for m in maps if len(m) == 6 and Path(m[-1]).name.startswith(library))
    base = next(int(m[0].split("-")[0], 16) for m in maps if len(m) == 6 and m[-1] == path and int(m[2], 16) == 0)
    with ElfFile(path) as file:
        sites = [(base + p.address, file.byte_at(p.address)) for p in usdt.probes(file) if p.name in names]
    assert len(sites) == len(names)
    deadline = time.monotonic() + timeout
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        while True:
            now = []
            for address, _ in sites:
                mem.seek(address)
                now.append(mem.read(1)[0])
            if all(byte != original for byte, (_, original) in zip(now, sites)):
                return
            assert time.monotonic() < deadline, f"sampler's probes are not all in within {timeout}s"
            time.sleep(0.02)


def _worker(proc: subprocess.Popen[str]) -> int:
    deadline = time.monotonic() + 10
    while True:
        found = [p for p in descendants(proc.pid) if Path(f"/proc/{p}/comm").read_text().strip() == "sampler-worker"]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "no worker"
        time.sleep(0.02)


@pytest.mark.parametrize("guardian", [True, False])
def test_a_killed_workers_count_is_taken_back_by_the_guardian_or_by_repair(
        start_target: Callable[..., Target], tmp_path: Path, guardian: bool) -> None:
    # GIVEN another reader's count on the guarded probe (1), and sampler reading it too (2), with or
    # without its guardian; the target idle (an int3 a dead worker left is run before any guardian can
    # act when it is hit within a millisecond or so: docs/safety.md; here the count is looked at)
    target = start_target("usdt", stdin=True)
    set_semaphore(target.pid, 1)
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "usdt:sampler:guarded", "--expr", "i=arg0",
                         "--out", str(tmp_path / "g.csv"), "--quiet", *([] if guardian else ["--no-guardian"]))
    wait_semaphore(target.pid, 2)
    wait_until_patched(target.pid)
    # WHEN its worker is killed
    os.kill(_worker(proc), signal.SIGKILL)
    finish(proc)
    if guardian:
        # THEN the guardian counts sampler's out (and puts its int3 back), once: the other reader's stays
        wait_semaphore(target.pid, 1)
        time.sleep(1.0)  # (its tidying, after: the journal's entry dropped, nothing counted out again)
        assert semaphore(target.pid) == 1
    else:
        # THEN it stays counted in, until sampler repair counts it out (once: a second repair does nothing)
        time.sleep(0.5)
        assert semaphore(target.pid) == 2
        said = [sampler("repair", "--pid", str(target.pid)) for _ in range(2)]
        assert all(result.returncode == 0 for result in said), [r.stderr for r in said]
        assert "1 USDT semaphore(s) counted out" in said[0].stderr, said[0].stderr
        assert semaphore(target.pid) == 1
    assert_code_matches_files(target.pid)
    set_semaphore(target.pid, 0)  # (the other reader leaves)
    # AND the program runs on, its guarded probe off again
    target.send("10")
    target.wait_for(lambda: any(line.startswith("done 10 ") for line in target.lines), 30, "no done")
    assert "guarded=0 " in next(line for line in target.lines if line.startswith("done 10 "))


@pytest.mark.parametrize("follow", [False, True])
def test_a_forked_child_gets_the_count_only_while_sampler_reads_it(
        start_target: Callable[..., Target], tmp_path: Path, follow: bool) -> None:
    # GIVEN sampler reading the guarded probe (following forks or not)
    target = start_target("usdt", stdin=True)
    out = tmp_path / "fork.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "usdt:sampler:guarded", "--expr", "i=arg0",
                         "--out", str(out), "--quiet", *(["--follow-forks"] if follow else []))
    wait_semaphore(target.pid, 1)
    wait_until_patched(target.pid)  # (counted in before its threads are seized: a fork before is not seen)
    # WHEN the target forks a child that runs 200 steps
    target.send("fork 200")
    target.wait_for(lambda: any(line.startswith("forked ") for line in target.lines), 30, "no fork")
    child_line = next(line for line in target.lines if line.startswith("child "))
    child = int(child_line.split()[1])
    if follow:
        wait_for_rows(out, proc, 200)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    rows = assert_csv_whole(out)
    if follow:
        # THEN the child, taken in, fired the probe at every step, each a row of its own pid, and its
        # count was sampler's one (taken in again for it, not twice)
        assert "guarded=200 semaphore=1" in child_line
        assert [int(r["i"]) for r in rows if int(r["pid"]) == child] == list(range(200))
    else:
        # THEN the child, let go, got no count from sampler: the probe stayed off in it
        assert "guarded=0 semaphore=0" in child_line
        assert rows == []
    # AND the parent's count is back to 0
    assert semaphore(target.pid) == 0


def test_libstdcxx_throw_is_counted_exactly(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a C++ program that throws on command (libstdc++'s own probes, in a library)
    target = start_target("throws", stdin=True)
    out = tmp_path / "throws.csv"
    proc = start_sampler("trace", "--pid", str(target.pid), "--at", "usdt:libstdc++:libstdcxx:throw",
                         "--at", "usdt:libstdcxx:catch", "--out", str(out), "--quiet")
    wait_until_probed(target.pid, "libstdc++", ("throw", "catch"))  # (each goes in on its own: wait for both)
    # WHEN it throws 500 times
    target.send("500")
    target.wait_for(lambda: any(line.startswith("threw 500") for line in target.lines), 30, "no throws")
    wait_for_rows(out, proc, 999)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    rows = assert_csv_whole(out)
    # THEN every throw and every catch is a row: 500 each, as the program counted them
    assert "caught=500" in next(line for line in target.lines if line.startswith("threw 500"))
    assert sum(r["probe"] == "usdt:libstdc++:libstdcxx:throw" for r in rows) == 500
    assert sum(r["probe"] == "usdt:libstdcxx:catch" for r in rows) == 500


def test_bad_usdt_input_is_one_line_and_touches_nothing(start_target: Callable[..., Target],
                                                        tmp_path: Path) -> None:
    target = start_target("usdt", "1000")
    cases = {
        ("--at", "usdt:sampler:nope"): "no USDT probe sampler:nope",
        ("--at", "usdt:sampler:tick", "--expr", "arg9"): "has 6 arguments (arg0-arg5)",
        ("--at", "usdt:nolib:sampler:tick"): "no library 'nolib'",
        ("--at", "usdt:sampler:*", "--max-probes", "2"): "3 USDT sites, over --max-probes 2",
        ("--at", "usdt:sampler:tick", "--backend", "delve"): "a USDT probe is read by the ptrace backend",
    }
    for args, said in cases.items():
        result = sampler("trace", "--pid", str(target.pid), *args, "--duration", "1s", "--quiet")
        assert said in one_line_error(result), (args, result.stderr)
    assert semaphore(target.pid) == 0
    assert_code_matches_files(target.pid)


def test_a_malformed_note_is_that_probes_problem_only(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a copy of the target whose guarded probe's argument spec is made unreadable
    copy = tmp_path / "usdt-bad"
    data = (BIN / "usdt").read_bytes()
    spec = next(p.spec for p in notes(BIN / "usdt") if p.name == "guarded").encode()
    assert data.count(spec + b"\0") == 1
    copy.write_bytes(data.replace(spec + b"\0", b"9" * len(spec) + b"\0"))
    copy.chmod(0o755)
    shutil.copymode(BIN / "usdt", copy)
    target = start_target(str(copy), "1000", binary=False)
    # WHEN it is asked for: one line saying what is wrong with it
    message = one_line_error(sampler("trace", "--pid", str(target.pid), "--at", "usdt:sampler:guarded",
                                     "--duration", "1s", "--quiet"))
    assert "cannot be read" in message and "usdt:sampler:guarded" in message
    # AND the other probes are read as ever
    out = tmp_path / "tick.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "usdt:sampler:tick", "--expr", "i=arg0",
                     "--max-events", "20", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(assert_csv_whole(out)) == 20
