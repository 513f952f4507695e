"""A system call that sampler's stop ended with EINTR, made again: what every stop of a thread that
may sit in epoll_wait needs (stacks, injected calls, in-process probes' patching).

epoll_wait, semop, sigtimedwait and io_getevents return EINTR after a ptrace stop, with no handler
run (signal(7)); the kernel restarts the other calls itself. A thread stopped by sampler's
PTRACE_INTERRUPT (not a group stop's SIGSTOP: that EINTR is the program's to see) in one of those
has its registers set back to the call (rax its number, rip on the syscall instruction), so that it
makes the call again as it goes on and the program never sees the EINTR.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.backends.ptrace import calls
from sampler.evaluation.reads import UnreadableMemory
from sampler.target import syscalls

MASK = (1 << 64) - 1
SYSCALL = b"\x0f\x05"
"""x86-64's syscall instruction: the two bytes before a thread's pc in a system call."""


def restart_ended_call(tid: int, regs: Any, read: Callable[[int, int], bytes]) -> str | None:
    """After sampler's own interrupt stopped ``tid`` (registers ``regs``): its call made again at
    the detach when the stop ended it with EINTR; the call's name when so, else None (``regs`` is
    changed too, for a caller that keeps them)."""
    number = int(regs.orig_rax)
    if number not in syscalls.ENDED_BY_A_STOP or int(regs.rax) & MASK != -errno.EINTR & MASK:
        return None
    try:
        if read(int(regs.rip) - 2, 2) != SYSCALL:
            return None
    except UnreadableMemory:
        return None
    regs.rax = number
    regs.rip = int(regs.rip) - 2
    try:
        calls.set_registers(tid, regs)
    except PtraceError:
        return None
    return syscalls.name(number)
