"""System calls the target makes for sampler (issue 36's injection): the way a debugger calls a
function, reduced to one instruction. A thread of the target, stopped by sampler, has its
registers saved; they are set for the call (rax its number, rdi, rsi, rdx, r10, r8, r9 its
arguments, rip a `syscall` instruction already in the target's code: the vDSO's, or a library's);
one single-step runs it; rax is its result; the registers are put back as they were. No byte of
the target's memory is written for it.

A thread stopped inside a system call of its own (a futex wait, a read) comes back to it: the
saved registers hold the kernel's note that the call is to be restarted (orig_rax, and rax's
-ERESTART*), and the call is set with orig_rax -1 so that the kernel does not restart anything
for it; put back, the thread's own call restarts as if nothing happened. A signal that comes for
the thread while it steps is held and delivered when it is let go.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import DebuggerError
from sampler.process import calls
from sampler.process.tasks import WALL
from sampler.target import procfs

SYSCALL = b"\x0f\x05"
MAX_SCAN = 16 << 20
"""Bytes of a module's code searched for a syscall instruction."""
STEP_TIMEOUT_S = 2.0
"""How long one system call may take (mmap, prctl, memfd_create: microseconds)."""
MASK = (1 << 64) - 1

# the numbers of the calls sampler makes in the target (x86-64)
MMAP, MUNMAP, CLOSE, FTRUNCATE, PRCTL, MEMFD_CREATE = 9, 11, 3, 77, 157, 319
PROT_READ, PROT_WRITE, PROT_EXEC = 1, 2, 4
MAP_SHARED, MAP_PRIVATE, MAP_ANONYMOUS, MAP_FIXED_NOREPLACE = 0x01, 0x02, 0x20, 0x100000
PR_SET_VMA, PR_SET_VMA_ANON_NAME = 0x53564D41, 0
MFD_CLOEXEC = 1


class InjectionError(DebuggerError):
    """A system call sampler asked the target to make did not run (or failed)."""


def find_syscall(pid: int, read: Callable[[int, int], bytes]) -> int:
    """The address of a syscall instruction in the target's code: the vDSO's first (the kernel's
    own page, in every process), else the first executable mapping's that has one."""
    maps = procfs.maps(pid)
    ordered = sorted((m for m in maps if m.executable), key=lambda m: m.path != "[vdso]")
    for mapping in ordered:
        if mapping.path in ("[vsyscall]",):
            continue
        size = min(mapping.end - mapping.start, MAX_SCAN)
        try:
            code = read(mapping.start, size)
        except Exception:  # an unreadable mapping: the next one
            continue
        at = code.find(SYSCALL)
        if at >= 0:
            return mapping.start + at
    raise InjectionError(f"no syscall instruction in the code of process {pid}")


class Injector:
    """Calls made by one thread of the target, stopped by sampler (a ptrace-stop) for them."""

    def __init__(self, tid: int, syscall_at: int) -> None:
        self.tid = tid
        self.syscall_at = syscall_at
        self.held_signals: list[int] = []
        """Signals that came for the thread while it stepped: delivered when it is let go."""

    def call(self, number: int, *arguments: int) -> int:
        """The call's result (a negative errno on failure, as the kernel returns it)."""
        saved = calls.get_registers(self.tid)
        try:
            regs = calls.get_registers(self.tid)
            regs.rax, regs.orig_rax, regs.rip = number, MASK, self.syscall_at  # orig_rax -1: no restart
            for name, value in zip(("rdi", "rsi", "rdx", "r10", "r8", "r9"), arguments):
                setattr(regs, name, value & MASK)
            calls.set_registers(self.tid, regs)
            self._step()
            result = calls.get_registers(self.tid)
            if int(result.rip) != self.syscall_at + len(SYSCALL):
                raise InjectionError(f"the call {number} did not run in thread {self.tid} (pc {int(result.rip):#x})")
            value = int(result.rax)
            return value - (1 << 64) if value & (1 << 63) else value
        finally:
            try:
                calls.set_registers(self.tid, saved)
            except PtraceError as e:  # (the thread ended meanwhile: killed)
                raise InjectionError(f"thread {self.tid} ended while it made a call for sampler ({e})") from None
            finally:
                self._send_held()

    def _send_held(self) -> None:
        """The signals held during the step, sent to the thread again (it stops for each when it goes on, and
        the tracer passes it on as any): a SIGUSR1 sent to the process while the thread made sampler's calls
        was lost before (a test's target never started its calls)."""
        held, self.held_signals = self.held_signals, []
        tgid = procfs.group_and_parent(self.tid)[0] if held else 0
        for sig in held if tgid else ():
            calls.tgkill(tgid, self.tid, sig)

    def checked(self, number: int, *arguments: int) -> int:
        """As ``call``; InjectionError naming the call when it failed."""
        result = self.call(number, *arguments)
        if -4096 < result < 0:
            raise InjectionError(f"system call {number} in process's thread {self.tid} failed: "
                                 f"{os.strerror(-result)}")
        return result

    def _step(self) -> None:
        """One single-step; a signal that comes first is held (and the step made again)."""
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            calls.request(calls.PTRACE_SINGLESTEP, self.tid)
            status = self._wait(deadline)
            if not os.WIFSTOPPED(status):
                raise InjectionError(f"thread {self.tid} ended while it made a call for sampler")
            sig = os.WSTOPSIG(status)
            if sig == signal.SIGTRAP and status >> 16 == 0:
                return
            if status >> 16 == 0:
                self.held_signals.append(sig)  # the step did not run: again, the signal later

    def _wait(self, deadline: float) -> int:
        while True:
            waited, status = os.waitpid(self.tid, os.WNOHANG | WALL)
            if waited == self.tid:
                return status
            if time.monotonic() > deadline:
                raise InjectionError(f"thread {self.tid} did not come back from a call within {STEP_TIMEOUT_S:g} s")
            time.sleep(0.0001)


def c_string(text: str) -> bytes:
    return text.encode() + b"\0"


