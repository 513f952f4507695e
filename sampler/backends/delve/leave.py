"""Delve's safe way out, shared by both Delve drives (terminal and JSON-RPC).

Clearing a breakpoint that was just hit and detaching at once killed targets with
SIGTRAP (Delve issue #1771, ../shared/FACTS.md): other threads may already have
trapped on it. So: halt if running; if our breakpoint is still set, clear it,
resume, let the target run SETTLE_S so Delve absorbs those traps, halt again.
The caller then detaches (quit, answering no; or RPCServer.Detach Kill=false).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from sampler.errors import TargetExited
from sampler.safety.repair import restore_code
from sampler.target import procfs

SETTLE_S = 0.05


def settle_before_detach(*, running: bool, armed: bool, halt: Callable[[], object],
                         clear_and_resume: Callable[[], None]) -> None:
    """Leave the target halted with no breakpoint of ours, safe to detach from."""
    try:
        if running:
            halt()
        if armed:
            clear_and_resume()
            time.sleep(SETTLE_S)
            halt()
    except TargetExited:
        pass  # nothing left to protect


def after_dlv_killed(pid: int) -> None:
    """dlv had to be killed: put back the int3s it left, and let go threads it had stopped.

    Delve halts threads with SIGSTOP; when dlv dies, the kernel delivers those and the
    whole process would stay stopped.
    """
    time.sleep(0.1)  # the kernel lets the threads go
    restore_code(pid)
    if procfs.state(pid) == "T":
        try:
            os.kill(pid, signal.SIGCONT)
        except OSError:
            pass
