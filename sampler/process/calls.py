"""ptrace requests called straight through libc: python-ptrace's wrapper (errno reset,
checks, formatting) costs microseconds that a stopped thread pays in every pause."""

from __future__ import annotations

import ctypes
import os
from typing import Any

from ptrace.binding.linux_struct import user_regs_struct as user_regs_struct  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

PTRACE_CONT = 7
PTRACE_SINGLESTEP = 9
PTRACE_GETREGS = 12
PTRACE_SETREGS = 13

_libc = ctypes.CDLL(None, use_errno=True)
ptrace = _libc.ptrace
"""ptrace(2) itself: -1 on failure (errno in ctypes.get_errno()), for the hot path."""
ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
ptrace.restype = ctypes.c_long
_ptrace = ptrace


def request(command: int, tid: int, addr: int = 0, data: int = 0) -> None:
    """A request whose arguments are numbers (CONT, SINGLESTEP, DETACH, INTERRUPT, LISTEN;
    ``data``: the signal to deliver); PtraceError when it fails."""
    if _ptrace(command, tid, addr or None, data or None) == -1:
        _fail(command, tid)


def get_registers(tid: int) -> Any:
    """The thread's registers, as python-ptrace's user_regs_struct (its own getregs took 15 us
    more of every pause)."""
    registers = user_regs_struct()
    if _ptrace(PTRACE_GETREGS, tid, None, ctypes.addressof(registers)) == -1:
        _fail(PTRACE_GETREGS, tid)
    return registers


def set_registers(tid: int, registers: Any) -> None:
    if _ptrace(PTRACE_SETREGS, tid, None, ctypes.addressof(registers)) == -1:
        _fail(PTRACE_SETREGS, tid)


def _fail(command: int, tid: int) -> None:
    errno = ctypes.get_errno()
    raise PtraceError(f"ptrace({command}, {tid}) failed: {os.strerror(errno)}", errno=errno, pid=tid)


PTRACE_GETSIGINFO = 0x4202
PTRACE_SETSIGINFO = 0x4203


def get_siginfo(tid: int) -> bytes | None:
    """The siginfo of the signal a thread is stopped for (128 bytes), None when it cannot be had."""
    info = ctypes.create_string_buffer(128)
    if _ptrace(PTRACE_GETSIGINFO, tid, None, ctypes.addressof(info)) == -1:
        return None
    return info.raw


def set_siginfo(tid: int, info: bytes) -> None:
    """Give back a signal's siginfo before it is delivered with a resume: the kernel keeps it
    whole when its signal number is the one delivered (else it makes one up, as from kill)."""
    buffer = ctypes.create_string_buffer(info, 128)
    _ptrace(PTRACE_SETSIGINFO, tid, None, ctypes.addressof(buffer))


_SYS_TGKILL = 234


def tgkill(tgid: int, tid: int, signum: int) -> None:
    """Send ``signum`` to one thread (a signal held back during a step, queued again)."""
    _libc.syscall(_SYS_TGKILL, tgid, tid, signum)


_SFD_NONBLOCK, _SFD_CLOEXEC = 0o4000, 0o2000000


def signalfd(signums: set[int]) -> int:
    """A file descriptor that reads these (blocked) signals: they then cost no handler."""
    mask = (ctypes.c_uint64 * 16)()  # sigset_t: 1024 bits
    for signum in signums:
        mask[(signum - 1) // 64] |= 1 << ((signum - 1) % 64)
    fd = int(_libc.signalfd(-1, ctypes.byref(mask), _SFD_NONBLOCK | _SFD_CLOEXEC))
    if fd < 0:
        raise OSError(ctypes.get_errno(), f"signalfd: {os.strerror(ctypes.get_errno())}")
    return fd
