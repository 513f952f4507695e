"""A killed tracer's int3s never kill the target (issue 59, sampler/backends/ptrace/keepalive.py): the target's
own SIGTRAP handler, in sampler's pages, sends a thread that traps at an int3 no tracer serves on through a copy
of the instruction the int3 covers; while sampler lives, every hit goes through the same copy. How often redis
under load survives its worker SIGKILLed is bench/killed.py's (a rate: a thread stopped at its trap when the
tracer dies is let go without its signal, one byte past the int3, and no handler can run; docs/safety.md)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    Target,
    assert_code_matches_files,
    descendants,
)
from tests.integration.test_emulate import FUNCTIONS, _int3s
from tests.integration.test_inprocess import no_pages_of_sampler

SIGTRAP_BIT = 1 << (signal.SIGTRAP - 1)


def _caught(pid: int) -> int:
    """The process's SigCgt mask (the signals it has a handler for)."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
    return int(line.split()[1], 16)


def _sum(target: Target) -> str:
    target.wait_for(lambda: any(line.startswith("done calls=") for line in target.lines), 60, "the calls never ended")
    return next(line for line in target.lines if line.startswith("sum="))


def _emulate(start_target: Callable[..., Target]) -> Target:
    """emulate's one thread, 50 calls of each function, without address space randomisation (f_lea_rip returns an
    address: the sum is the same at every run)."""
    return start_target("setarch", "x86_64", "-R", str(ROOT / "targets" / "bin" / "emulate"), "1", "50", binary=False)


def test_int3s_left_by_a_killed_worker_and_guardian_are_run_through_by_the_targets_own_handler(
        start_target: Callable[..., Target], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(tmp_path / "journal"))
    # GIVEN what emulate's one thread computes from functions that start with 28 kinds of instruction (a push, a
    # rip-relative lea and cmpb, a ret...), untraced
    plain = _emulate(start_target)
    plain.proc.send_signal(signal.SIGUSR1)
    expected = _sum(plain)
    # AND the same program with an int3 at every one of those first instructions, left by a sampler whose worker
    # and guardian were both SIGKILLed (no one is left to put a byte back)
    target = _emulate(start_target)
    assert not _caught(target.pid) & SIGTRAP_BIT
    err = tmp_path / "err"
    with err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--pid", str(target.pid), "--probe", "int3",
                                 *[arg for function in FUNCTIONS for arg in ("--at", function)],
                                 "--out", str(tmp_path / "t.csv")], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr)
    target.wait_for(lambda: "breakpoints in" in err.read_text() or proc.poll() is not None, 60,
                    "the int3s did not all go in")
    # (where the site takes a jump, its int3 is in a stop of sampler's page the jump leads to; else in the code)
    said = err.read_text()
    assert "int3(s) in stops of sampler's page" in said, said
    code = _int3s(target.pid)
    assert code > len(FUNCTIONS)
    worker = int(Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()[0])
    for pid in descendants(worker):  # (the guardian first: no one is left to put a byte back)
        if Path(f"/proc/{pid}/comm").read_text().strip() == "sampler-guard":
            os.kill(pid, signal.SIGKILL)
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(10) == 128 + signal.SIGKILL
    target.wait_for(lambda: target.status()["TracerPid"].strip() == "0", 10, "the dead tracer did not let go")
    assert _int3s(target.pid) == code
    # WHEN the program calls each function 50 times, untraced
    target.proc.send_signal(signal.SIGUSR1)
    # THEN it lives and computes what it computes untraced: every trap went through the instruction's copy
    assert _sum(target) == expected
    assert target.proc.poll() is None
    assert _caught(target.pid) & SIGTRAP_BIT  # (the handler stays after a kill: it passes other SIGTRAPs on)
    # AND sampler repair puts every byte back
    result = subprocess.run([sys.executable, "-m", "sampler", "repair", "--pid", str(target.pid)], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert_code_matches_files(target.pid)


def test_a_trace_with_int3s_leaves_the_programs_own_sigtrap_handling_and_no_page(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN ringbuf-c, whose reader calls ring_read millions of times a second
    target = start_target("ringbuf-c")
    # WHEN every call is traced with an int3 for 2 s
    result = subprocess.run([sys.executable, "-m", "sampler", "trace", "--pid", str(target.pid), "--at", "ring_read",
                             "--probe", "int3", "--duration", "2s", "--out", str(tmp_path / "t.csv")],
                            cwd=ROOT, capture_output=True, text=True, timeout=120)
    # THEN every hit went on through the copy (no step, no emulation), and afterwards the program has no SIGTRAP
    # handler (as before), no page of sampler's, its own code
    assert result.returncode == 0, result.stderr
    steps = re.search(r"every hit: (\d+) ran on without a single-step, (\d+) single-stepped", result.stderr)
    assert steps and int(steps.group(1)) > 1000 and steps.group(2) == "0", result.stderr
    assert not _caught(target.pid) & SIGTRAP_BIT
    assert no_pages_of_sampler(target.pid)
    assert_code_matches_files(target.pid)
    assert target.assert_working()
