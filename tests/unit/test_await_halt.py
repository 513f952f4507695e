"""await_halt: a target killed while the debugger halts it is an exit, not a hung debugger."""

from __future__ import annotations

import subprocess
import time

import pytest

from sampler.backends.delve import drive
from sampler.errors import DebuggerError, TargetExited


def test_an_answer_is_returned_as_soon_as_it_comes() -> None:
    answers = iter([None, None, "stopped"])
    assert drive.await_halt(1, lambda s: next(answers)) == "stopped"


def test_a_target_that_died_during_the_halt_is_an_exit() -> None:
    child = subprocess.Popen(["sleep", "60"])
    child.kill()
    time.sleep(0.1)  # a zombie now: not reaped until wait()
    try:
        started = time.monotonic()
        with pytest.raises(TargetExited, match=f"process {child.pid} exited"):
            drive.await_halt(child.pid, lambda s: None)
        assert time.monotonic() - started < drive.HALT_TIMEOUT_S
    finally:
        child.wait()


def test_a_live_target_that_never_halts_is_the_debuggers_fault(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drive, "HALT_TIMEOUT_S", 0.3)
    child = subprocess.Popen(["sleep", "60"])
    try:
        with pytest.raises(DebuggerError, match="did not halt"):
            drive.await_halt(child.pid, lambda s: time.sleep(s))
    finally:
        child.kill()
        child.wait()
