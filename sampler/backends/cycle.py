"""What every backend's sample cycle shares: its time limits and the words for a miss."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sampler.errors import DebuggerError, TargetExited
from sampler.stop import StopFlag
from sampler.target import procfs

T = TypeVar("T")

HALT_TIMEOUT_S = 5.0
"""How long a debugger may take to halt a running target."""
CALL_TIMEOUT_S = 10.0
"""How long a debugger may take to answer one command."""
POLL_S = 0.05
"""How often a wait for a breakpoint looks at the stop flag."""


def miss(stop: StopFlag, hit_timeout_s: float) -> str:
    """The row's error when the breakpoint was not hit."""
    if stop.is_set():
        return "stopped before the breakpoint was hit"
    return f"breakpoint not hit within {hit_timeout_s:g}s"


def await_halt(pid: int, poll: Callable[[float], T | None]) -> T:
    """What ``poll`` gives once the debugger has halted the target; raise if it never does.

    ``poll(seconds)`` waits up to that long for the debugger's answer. Between waits the
    target is looked at: a target killed while the debugger halts it may leave the
    debugger waiting for a stop that never comes, and that is the target's exit, not the
    debugger's fault.
    """
    deadline = time.monotonic() + HALT_TIMEOUT_S
    while True:
        answer = poll(max(0.0, min(POLL_S * 4, deadline - time.monotonic())))
        if answer is not None:
            return answer
        if not procfs.is_running(pid):
            raise TargetExited(f"target process {pid} exited")
        if time.monotonic() >= deadline:
            raise DebuggerError(f"dlv did not halt the target within {HALT_TIMEOUT_S:g}s")
