"""A small tracer over python-ptrace: seize every thread, breakpoints via /proc/PID/mem,
one wait loop. Only the thread that hits a breakpoint stops; signals the sampler did
not cause are passed on unchanged. All ptrace calls come from the main thread.

Processes the target starts (children.py): a forked child gets a copy of every int3, so
the kernel stops it before its first instruction (PTRACE_O_TRACEFORK), its bytes are put
back and it goes on untraced. A vfork child shares the target's memory: it is traced like
a thread until it execs or exits. An exec of the target itself ends the run.

This module is attach, detach and the hot path (``catch``); the rest of the tracer is in its
parts (tasks.py names them).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable
from typing import Any, TypeVar

from ptrace.binding import func as ptrace_func  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import DebuggerError, ProcessNotFound, TargetExited
from sampler.process import calls
from sampler.process.events import Dispatch
from sampler.process.memory import MemoryHang
from sampler.process.stepover import Stepping
from sampler.process.tasks import (
    NEW_TASK_EVENTS,
    OPTIONS,
    PTRACE_EVENT_EXEC,
    PTRACE_EVENT_STOP,
    PTRACE_INTERRUPT,
    PTRACE_SEIZE,
    WNOHANG_WALL,
    Hit,
)
from sampler.safety import supervisor
from sampler.stop import StopFlag
from sampler.target import permission, procfs

DETACH_TIMEOUT_S = 5.0
UNINTERRUPTIBLE_S = 0.2
"""A thread still in an uninterruptible wait (state D) this long after detach interrupted it is not
waited for: it cannot stop (a page of a file system that does not answer); the kernel lets it go."""
T = TypeVar("T")
TRAP_STOP = signal.SIGTRAP << 8 | 0x7F
"""waitpid's status of a thread stopped by a plain SIGTRAP (no ptrace event): a breakpoint's."""


class Tracer(Dispatch, Stepping):
    """One process traced: every thread seized, breakpoints armed and served (the Tracer is its parts)."""

    def seize(self) -> None:
        """PTRACE_SEIZE every thread (stops none of them); new threads follow by TRACECLONE."""
        self._start_wakeups()
        try:
            while True:
                new = set(_tasks(self.pid)) - self.threads
                if not new:
                    break
                for tid in sorted(new):
                    self._seize(tid)
        except BaseException:
            self.detach()
            raise

    def take_over(self) -> None:
        """Instead of ``seize``: the process is a child a traced process forked, traced already
        (with this tracer's options) and stopped before its first instruction (--follow-forks)."""
        self._start_wakeups()
        self.threads.add(self.pid)

    def let_go_at_first_stop(self) -> None:
        """After ``take_over``, when the child cannot be taken in after all: every byte back,
        and the child detached from its first stop (it reports no other stop to wait for)."""
        try:
            self.probes.disarm_all()
            self._request(ptrace_func.PTRACE_DETACH, self.pid, 0, 0)
            self.threads.clear()
        finally:
            self._stop_wakeups()

    def resume_first_stop(self) -> None:
        """After ``take_over``: let the child run its first instruction."""
        self._request(ptrace_func.PTRACE_CONT, self.pid, 0, 0)

    def _seize(self, tid: int) -> None:
        try:
            ptrace_func.ptrace(PTRACE_SEIZE, tid, 0, OPTIONS)
        except PtraceError as e:
            if e.errno == errno.ESRCH:
                return  # the thread ended meanwhile
            if e.errno == errno.EPERM:
                raise permission.denied(self.pid, "trace") from None  # names a tracer already there
            raise DebuggerError(f"PTRACE_SEIZE of thread {tid} failed: {e}") from None
        self.threads.add(tid)

    def detach(self) -> None:
        """Restore every byte, stop each thread briefly, absorb pending traps, detach it."""
        try:
            self._detach()
        finally:
            self._thread_files.close()
            self._stop_wakeups()  # (in a run of many: out of the router, whatever happened)

    def _detach(self) -> None:
        self.probes.disarm_all()  # every byte is back: the journal's entry goes
        self._detaching = True
        pending, detached = set(), set()
        stopped = {tid for tid, _ in self._queue}
        for tid in list(self.threads):
            if supervisor.IN_WORKER and tid not in self._stepping and tid not in stopped \
                    and self._asleep_for_good(tid) is not None:
                # asleep in a system call: an interrupt would end epoll_wait, sigtimedwait and their
                # kin with EINTR (signal(7)); every byte is back, and the kernel lets it go
                # untouched when this tracer ends with the worker (exit_ptrace), or the router at
                # its next stop (a run of many); a tracer in a process that goes on stops it
                self.left_asleep.add(tid)
                self.threads.discard(tid)
                continue
            if self._request(PTRACE_INTERRUPT, tid):
                pending.add(tid)
            else:
                self.threads.discard(tid)
        started = time.monotonic()
        deadline = started + DETACH_TIMEOUT_S
        while pending and time.monotonic() < deadline:
            if time.monotonic() - started > UNINTERRUPTIBLE_S:  # (a step is waited for: its trap flag)
                waiting = {tid for tid in pending if tid not in self._stepping and self._thread_state(tid) == "D"}
                self.stats.waiting_in_kernel |= waiting  # (a page of a file system that does not answer?)
                pending -= waiting
            for tid, status in self._events():
                if os.WIFEXITED(status) or os.WIFSIGNALED(status):
                    pending.discard(tid)
                    self.threads.discard(tid)
                    continue
                if not os.WIFSTOPPED(status):
                    continue
                if status >> 16 in NEW_TASK_EVENTS:
                    child = self._on_new_task(tid, status >> 16)
                    if child is not None and child not in detached:
                        pending.add(child)  # it reports its first stop, then it is detached too
                elif status >> 16 == PTRACE_EVENT_EXEC:  # the old threads are gone, the execing one's
                    pending = {t for t in pending if t in self.sharing}  # old tid without a word
                if tid not in self.threads and tid not in pending and status >> 16 == PTRACE_EVENT_STOP \
                        and not procfs.is_thread_of(self.pid, tid):
                    self._early[tid] = status  # a forked child before its parent's event
                    continue
                if status >> 16 == PTRACE_EVENT_STOP and self._trap_pending(tid):
                    self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)  # the trap stops it next: rewound
                    continue
                self._request(ptrace_func.PTRACE_DETACH, tid, 0, self._signal_to_pass(tid, status))
                detached.add(tid)
                pending.discard(tid)
                self.threads.discard(tid)
            if pending:
                self._sleep(deadline - time.monotonic())
        for child in list(self._early):  # whose fork event never came (the parent was killed)
            self.children.release(child, self.patches, first_stop_seen=True, counted=self.probes.semaphores)
            del self._early[child]
        self.stats.left_stepping |= pending & set(self._stepping)  # in the kernel for a page that does not come:
        pending -= set(self._stepping)  # the kernel lets them go when this tracer ends, with the trap flag
        if pending:  # set (summary), or sampler does at their stop (router.owner)
            raise DebuggerError(f"threads {sorted(pending)} of process {self.pid} did not stop for detach")

    def arm(self, address: int) -> None:
        if self.probes.arm(address):
            self._emulations.pop(address, None)  # decoded again: the code there may have changed
            self._displaced.pop(address, None)

    def disarm(self, address: int) -> None:
        self.probes.disarm(address)

    def rewind(self, hit: Hit) -> None:
        """Set the held thread back onto the original instruction, at once: if sampler is
        killed while it holds the thread, the kernel lets it go from there, not from the
        middle of the instruction (the byte is back by then, or the guardian puts it back)."""
        hit.registers.rip = hit.address
        hit.rewound = self._set_registers(hit)

    def resume(self, hit: Hit) -> None:
        """Rewind the hitting thread onto the original instruction (unless done) and let it go."""
        if not hit.rewound:
            self.rewind(hit)
            if not hit.rewound:
                return  # the thread is gone
        hit.resumed = time.monotonic()
        self._request(calls.PTRACE_CONT, hit.tid)

    def catch(self, holds: dict[int, Callable[[Any], T]], deadline: float, stop: StopFlag,
              keep: bool = False) -> tuple[Hit, T | MemoryHang] | None:
        """The hot path of a sample. Serve events until a thread traps on one of the armed
        addresses of ``holds``; while it is stopped, do nothing but put that byte back, rewind
        the thread, ``hold(registers)`` (the address's read plan's reads) and let it go; with
        ``keep``, read and step it over with the breakpoint kept (``step_over``). Returns the
        hit, resumed, and what its ``hold`` returned; None at the deadline or on stop. Written
        flat on purpose: every call and object made between waitpid and PTRACE_CONT is paid by
        the stopped thread, and on a cold cache (a sample every 100 ms) each Python call costs
        microseconds."""
        registers = calls.user_regs_struct()  # made before the hit, not during it
        reference = ctypes.addressof(registers)
        ptrace, waitpid, monotonic, fd = calls.ptrace, os.waitpid, time.monotonic, self.memory.fd
        router = self.router
        hit = None
        while hit is None:
            while True:
                if self._queue:
                    tid, status = self._queue.pop(0)
                elif router is not None:
                    tid, status = router.poll(self)
                    if tid == 0:
                        break
                else:
                    try:
                        tid, status = waitpid(-1, WNOHANG_WALL)
                    except ChildProcessError:
                        break
                    if tid == 0:
                        break
                seen = self._seen = monotonic()
                if status == TRAP_STOP and not (self._stepping and tid in self._stepping) \
                        and ptrace(calls.PTRACE_GETREGS, tid, None, reference) != -1 \
                        and (address := registers.rip - 1) in holds and address in self.armed:
                    registers.rip = self.stands_for.get(address, address)  # $rip reads the breakpoint's address
                    hit = Hit(tid, address, registers, seen)  # (the thread's: at rewind)
                    self.threads.add(tid)
                    self.stats.stops[tid] = self.stats.stops.get(tid, 0) + 1
                    break
                hit = self._handle(tid, status)  # anything else, the general way
                if hit is not None:
                    address, registers, reference = hit.address, hit.registers, ctypes.addressof(hit.registers)
                    break
            if hit is None:
                remaining = deadline - monotonic()
                if remaining <= 0 or stop.is_set():
                    return None
                self._sleep(remaining)
        hold = holds[address]  # every armed address has one (the caller's promise)
        held: T | MemoryHang
        emulated: Any = None
        try:
            if keep:  # the reads and the instruction's own memory, in one hand-over (guard.py)
                try:
                    held, emulated = self.guard.call(lambda: (hold(registers), self._emulated(address, registers)))
                except MemoryHang as e:
                    held = e
            else:
                original = self.armed.pop(address)
                try:
                    restored = os.pwrite(fd, original, address) == 1
                except OSError:
                    restored = False
                if not restored:  # the careful way, for its errors
                    self.armed[address] = original
                    self.disarm(address)
                registers.rip = address
                hit.rewound = ptrace(calls.PTRACE_SETREGS, hit.tid, None, reference) != -1 \
                    or self._set_registers(hit)
                try:
                    held = self.guard.call(lambda: hold(registers))
                except MemoryHang as e:  # the row says so; the thread goes on as always
                    held = e
        finally:
            if keep:
                self.step_over(hit, emulated, computed=True)
            else:
                hit.resumed = monotonic()
                if hit.rewound and ptrace(calls.PTRACE_CONT, hit.tid, None, None) == -1:
                    self._request(calls.PTRACE_CONT, hit.tid)  # again, for its error
        return hit, held

    def let_run(self) -> None:
        """Right after letting a thread go: step off the CPU for a moment, so that the thread
        runs at once. The kernel wakes the thread on the CPU sampler's worker runs on, and it
        waited there until the worker slept again: 400-460 us median after PTRACE_CONT on the
        stall target, the worker computing its row meanwhile (bench/stall.py); with this
        pause, about 30 us. The worker wakes up on the other CPU, or after the thread's turn."""
        if self.switches.let_run_s > 0:
            time.sleep(self.switches.let_run_s)

    def warm(self, hold: Callable[[Any], Any], last: Hit) -> None:
        """Before arming: run the hot path's code once, so that the next hit does not pay
        for cold caches (at 10 Hz they are cold, and that cost the pause 20 us): the reads
        at the last hit's registers (reads only), GETREGS of that thread (it runs: ESRCH;
        stopped by a signal not yet served: a read) and SETREGS of sampler itself, which
        no one traces (ESRCH): never of a thread of the target."""
        registers = calls.user_regs_struct.from_buffer_copy(last.registers)
        reference = ctypes.addressof(registers)
        calls.ptrace(calls.PTRACE_GETREGS, last.tid, None, reference)
        hold(registers)
        calls.ptrace(calls.PTRACE_SETREGS, os.getpid(), None, reference)


def _tasks(pid: int) -> list[int]:
    try:
        return procfs.tasks(pid)
    except ProcessNotFound:
        raise TargetExited(f"target process {pid} exited") from None

