"""sampler beside bpftrace on the same process: a kernel uprobe's int3 at a function's entry takes
every hit there (the kernel serves it; the tracer never sees a trap), so sampler refuses that place
in one line and writes nothing; at the next instruction its probe reads the same calls bpftrace
counts, and the values agree."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    Target,
    assert_code_matches_files,
    one_line_error,
    read_csv,
    sampler,
    symbol_address,
)

CALLS = 3000


def bpftrace_on(program: Path) -> tuple[subprocess.Popen[str], list[str], threading.Thread]:
    """bpftrace counting paired()'s calls of ``program`` and summing its second argument; returned
    once its probe is attached."""
    if shutil.which("bpftrace") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("bpftrace is missing (make setup installs it)")
        pytest.skip("bpftrace is missing (make setup installs it)")
    proc = subprocess.Popen(["bpftrace", "-e", f"uprobe:{program}:paired {{ @n = count(); @s = sum(arg1); }}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert proc.stdout is not None

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while not any(line.startswith("Attaching") for line in lines):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"bpftrace did not attach: {lines[-5:]}")
        time.sleep(0.05)
    time.sleep(0.5)  # (its probe in place once it says so; a little more for the kernel's side)
    return proc, lines, reader


def test_beside_a_bpftrace_uprobe_sampler_refuses_its_place_and_reads_the_same_calls_next_to_it(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN bpftrace's uprobe on paired() of a program file of this test's own (no other process runs
    # it), then the program started: it calls paired(&{i, 3i}, i) 3000 times, 1000 a second, once
    # sampler's bytes change its code
    program = tmp_path / "callers-beside"
    shutil.copy(ROOT / "targets" / "bin" / "callers", program)
    bpftrace, said, reader = bpftrace_on(program)
    try:
        target = start_target(str(program), "1", str(CALLS), "paired", "1000", binary=False)
        paired = symbol_address(target.pid, "paired")
        with open(f"/proc/{target.pid}/mem", "rb") as mem:
            mem.seek(paired)
            assert mem.read(1) == b"\xcc"  # (the uprobe's)
        # WHEN sampler is asked for paired() itself
        refused = sampler("trace", "--pid", str(target.pid), "--at", "paired", "--expr", "i=i", "--duration", "2s",
                          "--quiet")
        # THEN it says in one line that another tool's int3 is there, and writes nothing
        line = one_line_error(refused)
        assert refused.returncode == 2 and "an int3 is at" in line and "not sampler's" in line, line
        assert not target.lines[1:], target.lines  # (no call yet: its code unchanged but for the uprobe)
        # WHEN it reads i at the next instruction (3 bytes on: a reading probe), until the calls end
        out = tmp_path / "beside.csv"
        result = sampler("trace", "--pid", str(target.pid), "--at", f"*{paired + 3:#x}", "--expr", "i=i",
                         "--duration", "8s", "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stderr
        target.wait_for(lambda: any(line.startswith("done calls=") for line in target.lines), 30, "calls never ended")
    finally:
        bpftrace.send_signal(signal.SIGINT)
        try:
            bpftrace.wait(90)  # (it detaches its uprobe and prints its maps)
        except subprocess.TimeoutExpired:  # (once in CI it never ended: killed, not left running)
            bpftrace.kill()
            bpftrace.wait(30)
            raise AssertionError("bpftrace did not end within 90 s of its SIGINT (killed)") from None
        reader.join(10)
        assert bpftrace.stdout is not None
        bpftrace.stdout.close()
    # THEN sampler's rows are every call, and bpftrace counted the same calls with the same sum of i
    rows = read_csv(out)
    values = sorted(int(row["i"]) for row in rows)
    assert values == list(range(CALLS)), (len(values), values[:5])
    assert f"@n: {CALLS}" in said, said[-5:]
    assert f"@s: {sum(range(CALLS))}" in said, said[-5:]
    # and with both gone the code is the file's again
    assert_code_matches_files(target.pid)
