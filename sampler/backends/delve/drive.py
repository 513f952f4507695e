"""What the two Delve drives (the terminal, backend.py; JSON-RPC, rpc_backend.py) share of
the Backend interface: one --at at most, so no probe column and one sample a tick; nothing
to serve between samples (dlv does); and the end of a run: the target settled (running, no
breakpoint), dlv told to detach, its connection closed, the guardian dismissed; and the time
limits of dlv's answers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sampler.backends.base import Note, Stopping
from sampler.config import SessionConfig
from sampler.errors import DebuggerError, TargetExited
from sampler.probes.columns import value_columns
from sampler.safety.guardian import Guardian
from sampler.stop import StopFlag
from sampler.target import procfs

T = TypeVar("T")

HALT_TIMEOUT_S = 5.0
"""How long a debugger may take to halt a running target."""
CALL_TIMEOUT_S = 10.0
"""How long a debugger may take to answer one command."""
POLL_S = 0.05
"""How often a wait for a breakpoint looks at the stop flag."""


class DelveDrive(Stopping):
    """The part of the Backend interface both Delve drives give alike."""

    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.columns = value_columns(config.expressions, probe_column=False, timed=False)
        """One --at at most (select.py gives several to ptrace): no probe column."""
        self._attached = False
        self._exited = False
        """dlv said the target process ended."""
        self.guardian: Guardian | None = None

    def begin_tick(self) -> int:
        return 1

    def notes(self) -> list[Note]:
        return []

    @property
    def pids(self) -> list[int]:
        return [self.config.pid]

    def idle(self, seconds: float, stop: StopFlag) -> None:
        stop.wait(seconds)

    def detach(self) -> None:
        if not self._attached:
            return
        self._attached = False
        try:
            self._leave()
        finally:
            self._close()
            if self.guardian is not None:
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()

    def _leave(self) -> None:
        """The target left running with no breakpoint, dlv detached from it."""
        raise NotImplementedError

    def _close(self) -> None:
        """dlv's connection closed (dlv ends with it)."""
        raise NotImplementedError


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
