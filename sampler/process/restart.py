"""A system call that sampler's stop ended with EINTR, made again: what every stop of a thread that
may sit in a blocking call needs (stacks, injected calls, in-process probes' patching).

epoll_wait, semop, sigtimedwait, io_getevents, io_uring_enter, and socket calls with SO_RCVTIMEO or
SO_SNDTIMEO return EINTR after a ptrace stop, with no handler run (signal(7)); the kernel restarts
the other calls itself. A thread stopped by sampler's PTRACE_INTERRUPT (not a group stop's SIGSTOP:
that EINTR is the program's to see) with a call's EINTR in rax gets -ERESTARTNOHAND there instead:
as the thread goes on, the kernel makes the call again when no handler runs, and gives the program
EINTR when one of its signals' handlers does, as it would have without sampler (a flag the handler
sets is seen). Nothing is read or written but the thread's rax.
"""

from __future__ import annotations

import errno
from typing import Any

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.process import calls
from sampler.target import syscalls

MASK = (1 << 64) - 1
ERESTARTNOHAND = 514
"""The kernel's "restart this call unless a handler runs" (include/linux/errno.h)."""


def restart_ended_call(tid: int, regs: Any) -> str | None:
    """After sampler's own interrupt stopped ``tid`` (registers ``regs``, the kernel's view at the
    stop): its call made again as it goes on when the stop ended it with EINTR; the call's name when
    so, else None (``regs`` is changed too, for a caller that keeps them)."""
    number = int(regs.orig_rax)
    if number & (1 << 63) or int(regs.rax) & MASK != -errno.EINTR & MASK:
        return None  # not in a system call, or not ended with EINTR
    regs.rax = -ERESTARTNOHAND & MASK
    try:
        calls.set_registers(tid, regs)
    except PtraceError:
        return None
    return syscalls.name(number)
