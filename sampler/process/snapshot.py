"""A thread's registers and the top of its stack, for `sampler stack` and profiles: read with the
thread stopped only while they are read, or not stopped at all.

A thread asleep in a system call does not run its user code: its stack and instruction pointers
are in /proc/PID/task/TID/syscall and its stack does not change while it sleeps, so it is read
without stopping it, and the read is kept only when the thread's schedstat line (its CPU time and
times switched in) and its syscall line are the same after as before: it did not run meanwhile.
Its other registers are not known. A thread in user code, or one whose stack needs more registers
to be unwound, is stopped: PTRACE_SEIZE, PTRACE_INTERRUPT, its registers, one read of its stack,
PTRACE_DETACH (which lets it go; a signal that came meanwhile is delivered as it detaches). No
byte of the target is written. A thread asleep in a system call is stopped (when its stack
needs more registers than those two) only in a call the kernel makes again after a stop, its
timeout kept (futex, nanosleep, poll...: syscalls.RESTARTED_AFTER_A_STOP): a stop ends epoll_wait,
semop, sigtimedwait, io_getevents, io_uring_enter and timed socket calls with EINTR (signal(7)), and
one made again would start its timeout again; --interrupt-waits allows it. A thread in an
uninterruptible sleep (state D) is never stopped (it would not stop until it woke). A running
thread that enters a call between sampler's look and its interrupt, and one --interrupt-waits
stops, gets its call made again if the stop ended it with EINTR (restart.py): the program sees no
EINTR but its own handlers'.

If sampler dies while a thread is stopped, the kernel detaches it and it runs on (ptrace(2):
a tracer's exit detaches its tracees).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time
from contextlib import suppress
from dataclasses import dataclass, field

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.debuginfo.x86 import RIP, RSP, registers_of
from sampler.errors import ProcessNotFound
from sampler.process import calls, guard
from sampler.process.reads import UnreadableMemory
from sampler.process.restart import restart_ended_call
from sampler.process.tasks import PTRACE_EVENT_STOP, PTRACE_INTERRUPT, PTRACE_SEIZE, WNOHANG_WALL
from sampler.target import permission, procfs, syscalls
from sampler.target.threads import parse_syscall

PTRACE_DETACH = 17
STACK_BYTES = 256 << 10
"""Bytes of a stack read at once, from the stack pointer up (less where its mapping ends): a frame
past them is read from the live memory."""
RED_ZONE = 128
"""Bytes below the stack pointer a function may use without moving it (the x86-64 ABI)."""
STOP_TIMEOUT_S = 2.0
"""How long a thread may take to stop for an interrupt (one waiting for a CPU on a loaded host)."""


@dataclass
class Image:
    """What was read of one thread."""

    tid: int
    registers: dict[int, int] = field(default_factory=dict)
    """By DWARF number; a thread read without stopping it has RSP and RIP only."""
    fs_base: int | None = None
    current_g: int | None = None
    """The word just below the thread's TLS (fs_base - 8): Go keeps the running goroutine there."""
    stack_at: int = 0
    stack: bytes = b""
    stopped: bool = False
    stopped_us: float | None = None
    """How long the thread was held, from its stop to the detach (sampler's clock; the wait for a
    running thread to reach the stop is not in it: it ran, or waited for a CPU, meanwhile)."""
    problem: str | None = None
    """Why nothing could be read (None: something was)."""
    restarted: str | None = None
    """The system call the stop ended with EINTR, made again at the detach (its name)."""
    quiet: bytes | None = None
    """Read asleep: its schedstat and syscall lines then (Snapshots.quiet)."""

    def read(self, address: int, size: int) -> bytes | None:
        """Bytes of the copy of the stack, or None when the copy does not hold them all."""
        start = address - self.stack_at
        if start >= 0 and start + size <= len(self.stack):
            return self.stack[start:start + size]
        return None


class Snapshots:
    """The threads of one process, read one by one (or all stopped at once: ``hold_all``)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        try:
            self.mem = procfs.open_mem(pid)
        except (FileNotFoundError, ProcessLookupError):  # it ended meanwhile
            raise ProcessNotFound(f"process {pid} exited while sampler looked at it") from None
        except PermissionError:
            raise permission.denied(pid, "read the memory of") from None
        try:
            self.maps = procfs.maps(pid)
        except BaseException:
            os.close(self.mem)
            raise
        self.held: dict[int, int] = {}
        """Threads stopped now, and the signal each is to get back at its detach."""
        self.pending: set[int] = set()
        """Threads interrupted that did not stop in time: detached when they do."""
        self._holding: dict[int, tuple[Image, float]] = {}
        """Each thread stopped now: its image and when it stopped (for its stopped_us, at the detach)."""
        self.interrupt_waits = False
        """--interrupt-waits: a thread asleep in epoll_wait and its kin is stopped too when its stack
        needs registers; its call, ended by the stop, is made again as it goes on (restart.py)."""
        self.go = False
        """A Go program: each stopped thread's goroutine is read too (``current_g``)."""
        self.copy_stacks = True
        """False: a stopped thread's registers only (freeze.py holds threads to patch, not to read)."""
        setting = guard.forced()
        self.files_may_hang = guard.needed(pid) if setting is None else setting
        self._remapped = time.monotonic()
        """A FUSE or network file system is mounted: a page of a file's mapping is never read live."""

    def close(self) -> None:
        self.release_all()
        self._reap_pending(1.0)
        os.close(self.mem)

    # -- without stopping -------------------------------------------------------

    def asleep(self, tid: int) -> Image | None:
        """The thread read without stopping it, when it is asleep in a system call (or in D) and
        stays so while it is read; None when it is not (it must be stopped to be read)."""
        where = f"/proc/{self.pid}/task/{tid}"
        before = _read(f"{where}/schedstat"), _read(f"{where}/syscall")
        if before[0] is None or before[1] is None or _state(self.pid, tid) not in ("S", "D"):
            return None
        fields = before[1].split()
        if len(fields) not in (3, 9) or fields[0] == b"running":
            return None
        try:
            sp, pc = int(fields[-2], 16), int(fields[-1], 16)
        except ValueError:
            return None
        image = Image(tid, {RSP: sp, RIP: pc}, quiet=before[0] + before[1])
        self._copy_stack(image)
        if (_read(f"{where}/schedstat"), _read(f"{where}/syscall")) != before:
            return None  # it ran meanwhile: the copy may be torn
        return image

    def quiet(self, tid: int) -> bytes | None:
        """The thread's schedstat and syscall lines while it sleeps in a system call (the same
        later: it has not run since, its stack is the same); None when it runs."""
        where = f"/proc/{self.pid}/task/{tid}"
        schedstat, syscall = _read(f"{where}/schedstat"), _read(f"{where}/syscall")
        if schedstat is None or syscall is None or syscall.startswith(b"running"):
            return None
        return schedstat + syscall

    def must_not_stop(self, tid: int) -> str | None:
        """Why the thread is not stopped even when its stack needs it (None: it may be)."""
        state = _state(self.pid, tid)
        if state == "D":
            return "in an uninterruptible sleep"
        if state == "S" and not self.interrupt_waits:
            text = _read(f"/proc/{self.pid}/task/{tid}/syscall")
            call = parse_syscall(text.decode(errors="replace")) if text else None
            number = call.number if call is not None else None
            if number is None:
                return "asleep outside a system call"
            if number in syscalls.ENDED_BY_A_STOP:
                return f"asleep in {syscalls.name(number)}, which a stop would end with EINTR"
            if number in syscalls.RESTARTED_AFTER_A_STOP:
                return None
            if call is not None and number in syscalls.RESTARTED_ON_FILES and call.arguments \
                    and not _is_socket(self.pid, call.arguments[0]):
                return None  # a pipe's, a terminal's or a file's: made again as it was
            return f"asleep in {syscalls.name(number)}, which a stop could end early or start again"
        return None

    # -- stopped ---------------------------------------------------------------------

    def stopped(self, tid: int) -> Image:
        """The thread stopped, read and let go."""
        return self.stopped_many([tid])[tid]

    def stopped_many(self, tids: list[int]) -> dict[int, Image]:
        """The threads interrupted all at once, each read and let go as soon as it stops: a thread
        is held only for its own read, and one waiting for a CPU does not hold up the others (10
        busy threads on 2 CPUs took tens of milliseconds each to reach a stop)."""
        return self._stop(tids, keep=False)

    def hold(self, tid: int) -> Image:
        """Stop the thread and read it; it stays stopped until ``release``."""
        return self._stop([tid], keep=True)[tid]

    def hold_many(self, tids: list[int]) -> dict[int, Image]:
        """The threads interrupted all at once, each read and held until ``release``."""
        return self._stop(tids, keep=True)

    def _stop(self, tids: list[int], keep: bool) -> dict[int, Image]:
        self._reap_pending(0.0)  # threads that stopped late since the last read: let go first
        images: dict[int, Image] = {}
        waiting: list[int] = []
        for tid in tids:
            image = images[tid] = self._interrupt(tid)
            if image.problem is None:
                waiting.append(tid)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        polls = 0
        while waiting:
            for tid in list(waiting):
                status = self._poll(tid)
                if status is None:
                    continue
                waiting.remove(tid)
                if status < 0:
                    images[tid].problem = "it ended while it was read"
                    continue
                self._take(images[tid], status)
                if not keep and tid in self.held:
                    self.release(tid)
            polls += 1
            if waiting and time.monotonic() > deadline:
                for tid in waiting:  # let go as soon as it stops, at the next read or at close
                    self.pending.add(tid)
                    images[tid].problem = f"it did not stop within {STOP_TIMEOUT_S:g} s"
                break
            if waiting and polls > 20:
                time.sleep(0.0002 if polls < 200 else 0.002)
        return images

    def _interrupt(self, tid: int) -> Image:
        """PTRACE_SEIZE and PTRACE_INTERRUPT: the thread stops as soon as it can."""
        image = Image(tid)
        if tid in self.pending:
            image.problem = "it has not stopped yet for an earlier read"
        elif calls.ptrace(PTRACE_SEIZE, tid, None, None) == -1:
            image.problem = _seize_problem(ctypes.get_errno(), tid)
        elif calls.ptrace(PTRACE_INTERRUPT, tid, None, None) == -1:
            self.pending.add(tid)  # seized and not stopped (it is ending): reaped or let go later
            image.problem = "it ended while it was read"
        return image

    def _poll(self, tid: int) -> int | None:
        """A seized thread's stop status; -1 when it ended (reaped), None while it has not stopped."""
        try:
            waited, status = os.waitpid(tid, WNOHANG_WALL)
        except ChildProcessError:
            return -1
        if waited != tid:
            return None
        return status if os.WIFSTOPPED(status) else -1

    def _take(self, image: Image, status: int) -> None:
        """A thread that stopped (``status``): its registers and stack top read; held until released."""
        tid = image.tid
        stopped = time.monotonic()
        event = status >> 16 == PTRACE_EVENT_STOP
        self.held[tid] = 0 if event else os.WSTOPSIG(status)  # a signal that came first: delivered at detach
        self._holding[tid] = (image, stopped)
        interrupted = event and os.WSTOPSIG(status) == signal.SIGTRAP  # sampler's (not a SIGSTOP's group stop)
        try:
            regs = calls.get_registers(tid)
        except PtraceError:
            image.problem = "its registers cannot be read"
            return
        image.registers = registers_of(regs)
        if interrupted:
            image.restarted = restart_ended_call(tid, regs)
        image.fs_base = int(regs.fs_base)
        image.stopped = True
        if self.copy_stacks:
            self._copy_stack(image)
        if image.fs_base and self.go:
            try:
                image.current_g = int.from_bytes(self.read(image.fs_base - 8, 8), "little")
            except UnreadableMemory:
                pass


    def release(self, tid: int) -> None:
        sig = self.held.pop(tid, 0)
        if calls.ptrace(PTRACE_DETACH, tid, None, sig or None) == -1:
            # killed while held (an exit_group, another thread's execve): a zombie only its tracer
            # reaps, which would hold up the process's exit or exec: reaped now
            with suppress(ChildProcessError):
                os.waitpid(tid, WNOHANG_WALL)
        image, stopped = self._holding.pop(tid, (None, 0.0))
        if image is not None:
            image.stopped_us = (time.monotonic() - stopped) * 1e6

    def release_all(self) -> None:
        for tid in list(self.held):
            self.release(tid)

    def _reap_pending(self, timeout: float) -> None:
        """Threads that stopped after their read gave up on them: let go now (a call their stop
        ended made again); one that ended, reaped. The others at the next read, or when sampler
        exits (the kernel lets them go)."""
        deadline = time.monotonic() + timeout
        while self.pending:
            for tid in list(self.pending):
                status = self._poll(tid)
                if status is None:
                    continue
                self.pending.discard(tid)
                if status >= 0:
                    event = status >> 16 == PTRACE_EVENT_STOP
                    if event and os.WSTOPSIG(status) == signal.SIGTRAP:
                        with suppress(PtraceError):
                            restart_ended_call(tid, calls.get_registers(tid))
                    self.held[tid] = 0 if event else os.WSTOPSIG(status)
                    self.release(tid)
            if not self.pending or time.monotonic() >= deadline:
                return
            time.sleep(0.005)

    # -- the stack's bytes -------------------------------------------------------------

    def _copy_stack(self, image: Image) -> None:
        """One read of the stack from below its red zone up to its mapping's end (at most STACK_BYTES)."""
        sp = image.registers.get(RSP)
        if sp is None:
            return
        mapping = self._mapping(sp)
        if mapping is None or not _plain(mapping):
            return
        start = max(sp - RED_ZONE, mapping.start)
        end = min(mapping.end, sp + STACK_BYTES)
        try:
            image.stack = os.pread(self.mem, end - start, start)
            image.stack_at = start
        except OSError:
            pass

    def read_data(self, address: int, size: int) -> bytes:
        """The live memory at any address the process maps now (a CPython's objects and frames: its heap,
        and chunks each new thread maps), without looking in the mappings first where no FUSE or network
        file system is mounted (nothing then can hold a read); else ``read``."""
        if self.files_may_hang:
            return self.read(address, size)
        if address <= 0 or size < 0:
            raise UnreadableMemory(f"nothing is mapped at {address:#x}")
        return pread_exactly(self.mem, address, size)

    def _remap(self) -> bool:
        """The mappings read again, at most every REMAP_S (an address in none of them may be in one
        made since; a bad pointer is not worth a read of /proc/PID/maps each time)."""
        now = time.monotonic()
        if now - self._remapped < REMAP_S:
            return False
        self._remapped = now
        try:
            self.maps = procfs.maps(self.pid)
        except (ProcessNotFound, OSError):
            return False
        return True

    def _mapping(self, address: int) -> procfs.Mapping | None:
        for mapping in self.maps:
            if mapping.start <= address < mapping.end:
                return mapping
        return None

    def read(self, address: int, size: int) -> bytes:
        """The live memory, where reading it cannot hang: anonymous mappings (stacks, the heap) and
        the vDSO always; a file's mapping unless a FUSE or network file system is mounted (guard.py:
        a page such a file system does not send would hold the read for good)."""
        mapping = self._mapping(address)
        if (mapping is None or address + size > mapping.end) and self._remap():
            mapping = self._mapping(address)  # (mapped since it was read: a new thread's stack, a CPython
        if mapping is None or address + size > mapping.end:  # thread's frame chunk, the heap grown)
            raise UnreadableMemory(f"nothing is mapped at {address:#x}")
        if self.files_may_hang and not _plain(mapping) and mapping.path != "[vdso]":
            raise UnreadableMemory(f"{address:#x} is in a file's mapping ({mapping.path}): not read, "
                                   "the process has a FUSE or network file system mounted")
        return pread_exactly(self.mem, address, size)


def pread_exactly(fd: int, address: int, size: int) -> bytes:
    """``size`` bytes at ``address`` of a /proc/PID/mem descriptor; UnreadableMemory when not all are there
    (an address past 2^63, a torn or hostile pointer, too: pread would raise OverflowError)."""
    if not (address > 0 and size >= 0 and address + size < 1 << 63):
        raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (out of the address space)")
    try:
        data = os.pread(fd, size, address)
    except OSError as e:
        raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} ({e.strerror})") from None
    if len(data) != size:
        raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
    return data


REMAP_S = 0.1
"""The mappings are read again at most this often when an address is in none of them."""


def _plain(mapping: procfs.Mapping) -> bool:
    """Memory of no file: a stack, the heap, an anonymous mapping (its pages come from no disk)."""
    return mapping.inode == 0 and (not mapping.path or mapping.path.startswith("[stack")
                                   or mapping.path in ("[heap]",) or mapping.path.startswith("[anon"))


def _seize_problem(number: int, tid: int) -> str:
    if number == errno.ESRCH:
        return "it ended while it was read"
    if number == errno.EPERM:
        tracer = _tracer(tid)
        return f"another tracer (PID {tracer}) holds it" if tracer else "sampler may not trace it"
    return f"it cannot be traced ({os.strerror(number)})"


def _tracer(tid: int) -> int:
    try:
        return procfs.tracer_pid(tid)
    except Exception:  # gone: no tracer to name
        return 0


def _read(path: str) -> bytes | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 512)
    except OSError:
        return None
    finally:
        os.close(fd)


def _state(pid: int, tid: int) -> str:
    return procfs.thread_state(pid, tid)


def _is_socket(pid: int, fd: int) -> bool:
    """A socket's calls may have a timeout (SO_RCVTIMEO): a stop ends them with EINTR. True when
    it cannot be told."""
    try:
        return os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    except OSError:
        return True


def _syscall_number(pid: int, tid: int) -> int | None:
    text = _read(f"/proc/{pid}/task/{tid}/syscall")
    if not text:
        return None
    first = text.split(b" ", 1)[0].strip()
    return int(first) if first.isdigit() else None


__all__ = ["Image", "Snapshots"]
