"""A small tracer over python-ptrace: seize every thread, breakpoints via /proc/PID/mem,
one wait loop. Only the thread that hits a breakpoint stops; signals the sampler did
not cause are passed on unchanged. All ptrace calls come from the main thread.

Processes the target starts (children.py): a forked child gets a copy of every int3, so
the kernel stops it before its first instruction (PTRACE_O_TRACEFORK), its bytes are put
back and it goes on untraced. A vfork child shares the target's memory: it is traced like
a thread until it execs or exits. An exec of the target itself ends the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ptrace.binding import func as ptrace_func  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.backends.ptrace import calls, emulate
from sampler.backends.ptrace.children import ChildReleaser, shares_memory
from sampler.backends.ptrace.guard import Guard, MemoryDead
from sampler.backends.ptrace.instructions import kind_of
from sampler.backends.ptrace.memory import Memory, MemoryHang, Protections
from sampler.backends.ptrace.router import Router, Wakeups
from sampler.errors import DebuggerError, ProcessNotFound, SamplerError, TargetExeced, TargetExited
from sampler.evaluation.reads import UnreadableMemory
from sampler.safety import supervisor
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
from sampler.safety.patches import Describer, Patch
from sampler.stop import StopFlag
from sampler.target import permission, procfs

PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_LISTEN = 0x4208
PTRACE_O_TRACEFORK = 0x00000002
PTRACE_O_TRACEVFORK = 0x00000004
PTRACE_O_TRACECLONE = 0x00000008
PTRACE_O_TRACEEXEC = 0x00000010
PTRACE_O_TRACEVFORKDONE = 0x00000020
OPTIONS = PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | \
    PTRACE_O_TRACEVFORKDONE
PTRACE_EVENT_FORK = 1
PTRACE_EVENT_VFORK = 2
PTRACE_EVENT_CLONE = 3
PTRACE_EVENT_EXEC = 4
PTRACE_EVENT_VFORK_DONE = 5
NEW_TASK_EVENTS = (PTRACE_EVENT_FORK, PTRACE_EVENT_VFORK, PTRACE_EVENT_CLONE)
PTRACE_EVENT_STOP = 128
WALL = 0x40000000
WNOHANG_WALL = os.WNOHANG | WALL
INT3 = b"\xcc"
GROUP_STOP_SIGNALS = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}
FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
"""Signals an instruction raises itself: the same one again before the step is its own."""
DETACH_TIMEOUT_S = 5.0
ENDED_BY_A_STOP = frozenset({
    232, 281, 441,  # epoll_wait, epoll_pwait, epoll_pwait2
    65, 220,  # semop, semtimedop
    128,  # rt_sigtimedwait (sigwaitinfo too)
    208, 333,  # io_getevents, io_pgetevents
})
"""x86-64 system calls that return EINTR after a ptrace stop, with no handler run (signal(7)):
a thread blocked in one is not stopped unless it must be."""
UNINTERRUPTIBLE_S = 0.2
"""A thread still in an uninterruptible wait (state D) this long after detach interrupted it is not
waited for: it cannot stop (a page of a file system that does not answer); the kernel lets it go."""
HOLD_TIMEOUT_S = 0.2
"""How long the other threads may take to stop for a step over the breakpoint's instruction."""
IN_KERNEL = ("S", "D")
"""Thread states of a thread asleep in the kernel: asked to stop, it stops before its next
instruction in user space, so it cannot run through the breakpoint's place meanwhile."""
T = TypeVar("T")


@dataclass
class Hit:
    tid: int
    address: int
    registers: Any
    """python-ptrace's user_regs_struct of the stopped thread."""
    seen: float
    """When waitpid told sampler of the stop (monotonic seconds)."""
    rewound: bool = False
    """Its rip is set back onto the breakpoint's instruction (in the thread, not only here)."""
    resumed: float = 0.0
    """When PTRACE_CONT was asked for (monotonic seconds): the pause ends there. The time
    until that request returns is not counted: it holds the wake-up of the thread and then,
    often, the worker's own preemption by that thread (1-2 ms, one sample in ten at 10 Hz),
    while the thread runs."""


LET_RUN_S = 0.0 if os.environ.get("SAMPLER_LET_RUN") == "0" else 20e-6
"""How long the worker steps off the CPU after letting the hitting thread go (let_run);
SAMPLER_LET_RUN=0 turns it off (for measuring what it is worth: bench/stall.py)."""
SLEEP_SLICE_S = 0.1
EMULATE = os.environ.get("SAMPLER_EMULATE") != "0"
"""SAMPLER_EMULATE=0 single-steps every hit (for measuring what emulation is worth: bench/limit.py)."""
CHECK_EMULATION = os.environ.get("SAMPLER_CHECK_EMULATION") == "1"
"""Run every emulated instruction on the CPU too (a single-step) and compare (for the tests)."""
STEP_TIMEOUT_S = 0.1
"""How long the other threads stay held for one thread's single-step over a breakpoint."""
LATE = -1
"""_wait_for: no status by the deadline."""
TRAP_STOP = signal.SIGTRAP << 8 | 0x7F
"""waitpid's status of a thread stopped by a plain SIGTRAP (no ptrace event): a breakpoint's."""


class Tracer:
    def __init__(self, pid: int, memory: Memory, journal: Journal | None = None,
                 guardian: Guardian | Ward | None = None, go: bool = False, router: Router | None = None,
                 guard: Guard | None = None) -> None:
        self.pid = pid
        self.go = go
        """The target is a Go program (its stack check may be emulated: emulate.py)."""
        self.memory = memory
        self.journal = journal
        """Where each patched byte is noted before it is patched (for repair after a crash)."""
        self.guardian = guardian
        """Told each patched byte before it is patched (it puts them back if the worker dies)."""
        self.threads: set[int] = set()
        self.armed: dict[int, bytes] = {}
        """Breakpoints in place: address -> original byte."""
        self.originals: dict[int, int] = {}
        """Every address ever armed -> its original byte: to recognise traps that arrive after
        a clear."""
        self.patches: dict[int, Patch] = {}
        """Every address ever armed -> its original byte and the code around it: what the journal
        and the guardian keep, and what cleans the copies a forked child got."""
        self._describer = Describer(pid, memory.fd)
        self.sharing: set[int] = set()
        """Child processes that run in the target's memory (vfork): traced like its threads
        until they exec or exit."""
        self.children = ChildReleaser(guardian, journal is not None)
        self._early: dict[int, int] = {}
        """New processes whose first stop came before their parent's fork event: held."""
        self._queue: list[tuple[int, int]] = []
        """Events of other threads taken while holding them for a step, served next."""
        self._stepping: dict[int, tuple[int, bytes, list[int]]] = {}
        """Threads whose single-step did not end within STEP_TIMEOUT_S -> (breakpoint address, its
        original byte, the signals held back for them): the byte stays out until it ends."""
        self._displaced: dict[int, str] = {}
        """Breakpoint address -> what its instruction needs for a step (instructions.kind_of)."""
        self._emulations: dict[int, emulate.Emulation | None] = {}
        """Breakpoint address -> how its instruction runs without a step (None: it is stepped)."""
        self.protections = memory.protections or Protections(pid)
        """The armed memory's mappings, for emulated accesses (opened with ``memory``, never by PID)."""
        self._access = emulate.Access(memory, self.protections)
        self.guard = guard or Guard(pid, memory.mark_hung)
        """What reads the memory while a thread of the target is held, TIMEOUT_S at most (guard.py)."""
        self.emulated = 0
        """Every-hit hits whose instruction was emulated (no single-step)."""
        self.stepped = 0
        """Every-hit hits whose instruction was single-stepped."""
        self.checked = 0
        self.mismatches: list[str] = []
        """With SAMPLER_CHECK_EMULATION=1: where an emulation differed from the CPU's step."""
        self._detaching = False
        self.trace_vfork_children = permission.can_ptrace()
        """A traced program's exec drops its set-user-ID and capabilities unless its tracer has
        CAP_SYS_PTRACE: without it, a vfork child is let go at once and the breakpoints are out
        of the shared memory until its parent says it exec'd or exited (VFORK_DONE)."""
        self._suspended = 0
        """vfork children running untraced in the target's memory: the int3 bytes are out."""
        self.vfork_windows = 0
        """How often the breakpoints were out for a vfork child (for the summary)."""
        self.unsure = 0
        """Steps over the breakpoint during which a thread of the target could not be held:
        a call it made meanwhile may have been missed (said in the summary)."""
        self.waiting_in_kernel: set[int] = set()
        """Threads that could not stop for detach: waiting in the kernel (state D)."""
        self._thread_files = procfs.ThreadFiles(lambda: self.threads)
        """Each thread's stat and schedstat, opened once (closed at detach)."""
        self._asleep: dict[int, bytes] = {}
        """During a step: the threads left asleep in a system call (not held), and their CPU time."""
        self.left_asleep: set[int] = set()
        """Threads not stopped for detach, asleep in a system call (state S): the kernel lets
        them go as the tracer ends, the router at a stop before that (a run of many)."""
        self.given_up: set[int] = set()
        """Every-hit breakpoints taken out for good: the instruction's memory did not answer."""
        self.left_stepping: set[int] = set()
        """Threads inside a single-step that had not ended at detach (the trap flag still set)."""
        self.stops: dict[int, int] = {}
        """ptrace-stops seen per thread (breakpoint traps and passed-on signals alike)."""
        self.exit_status: int | None = None
        self._seen = 0.0
        """When the last event came out of waitpid (monotonic seconds)."""
        self.adopt: Callable[[int], bool] | None = None
        """--follow-forks: offered each forked child, stopped before its first instruction and
        cleaned of sampler's bytes; True when it was taken in (it is then its own tracer's)."""
        self.router = router
        """In a run of many processes, what hands this tracer its tasks' events (router.py)."""
        self._wakeups = router.wakeups if router is not None else Wakeups()

    # -- attach and detach ----------------------------------------------------

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
            for address in list(self.armed):
                self.disarm(address)
            if self.journal is not None:
                self.journal.clear()
                self.journal.close()
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
        for address in list(self.armed):
            self.disarm(address)
        if self.journal is not None:
            self.journal.clear()  # every byte is back: the entry goes
            self.journal.close()
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
                self.waiting_in_kernel |= waiting  # (a page of a file system that does not answer?)
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
            self.children.release(child, self.patches, first_stop_seen=True)
            del self._early[child]
        self.left_stepping |= pending & set(self._stepping)  # in the kernel for a page that does not come:
        pending -= set(self._stepping)  # the kernel lets them go when this tracer ends, with the trap flag
        if pending:  # set (summary), or sampler does at their stop (router.owner)
            raise DebuggerError(f"threads {sorted(pending)} of process {self.pid} did not stop for detach")

    def _trap_pending(self, tid: int) -> bool:
        """A thread that ran one of sampler's int3s just as it was interrupted reports the
        interrupt first, its SIGTRAP still pending: detached then, it would die of it."""
        if not procfs.pending_signals(tid if tid in self.sharing else self.pid, tid) >> (signal.SIGTRAP - 1) & 1:
            return False
        try:
            return int(calls.get_registers(tid).rip) - 1 in self.originals
        except PtraceError:
            return False

    def _signal_to_pass(self, tid: int, status: int) -> int:
        """The signal a thread must get on detach: none for our traps and for ptrace's own stops."""
        sig = os.WSTOPSIG(status)
        if status >> 16:
            return 0
        if self._stepping.pop(tid, None) is not None and sig == signal.SIGTRAP:
            return 0  # the end of a step given up on
        if sig == signal.SIGTRAP and self._rewind_if_ours(tid):
            return 0
        return sig

    # -- breakpoints --------------------------------------------------------------

    def arm(self, address: int) -> None:
        if address in self.armed:
            return
        try:
            original = self.memory.read(address, 1)
        except UnreadableMemory:
            self.memory.check_alive()
            raise
        patch = self.patches.get(address)
        if patch is None or patch.original != original[0]:
            patch = self.patches[address] = self._describer.describe(address, original[0])
        if self.journal is not None:
            self.journal.record(address, patch)
        if self.guardian is not None:
            self.guardian.note_patch(address, patch)
        self.armed[address] = original
        self.originals[address] = original[0]
        self._emulations.pop(address, None)  # decoded again: the code there may have changed
        self._displaced.pop(address, None)
        self._write_int3(address)

    def _write_int3(self, address: int) -> None:
        """The int3 goes in, unless the breakpoints are out for a vfork child (it goes in then)."""
        if not self._suspended:
            self.memory.write(address, INT3)

    def disarm(self, address: int) -> None:
        """Put the original byte back. The journal keeps its entry until detach: an entry that
        outlives its patch is harmless (repair writes only where an int3 stands), and a
        journal written and synced at every sample cost the next pause 20-25 us where the
        journal's folder is on disk (the sync's work goes on around the hit)."""
        original = self.armed.pop(address, None)
        if original is not None:
            try:
                self.memory.write(address, original)
            except TargetExited:
                pass  # the process is gone

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

    def _set_registers(self, hit: Hit) -> bool:
        """Write the hit's registers back; False when the thread vanished meanwhile (ESRCH)."""
        try:
            calls.set_registers(hit.tid, hit.registers)
        except PtraceError as e:
            if e.errno != errno.ESRCH:
                raise DebuggerError(f"cannot set the registers of thread {hit.tid}: {e}") from None
            return False
        return True

    def step_over(self, hit: Hit, emulated: Any = None, computed: bool = False) -> None:
        """Every-hit mode: run the hitting thread over the original instruction with the
        breakpoint kept, and let it go. Emulated when it can be (emulate.py: one stop, the
        int3 never leaves); else single-stepped: while it steps the original byte is in place,
        so every other thread of the target is held meanwhile: none runs through uncounted.
        ``emulated``: the registers the emulation left (``catch`` computes them with the hit's
        reads); not ``computed``: computed here."""
        if not computed:
            try:
                emulated = self.guard.call(lambda: self._emulated(hit.address, hit.registers))
            except MemoryHang:
                emulated = None  # (the step's own access then waits in the target's thread, not here)
        if emulated is not None:
            self.emulated += 1
            hit.rewound = True  # past the instruction, as a step leaves it
            hit.resumed = time.monotonic()
            if calls.ptrace(calls.PTRACE_SETREGS, hit.tid, None, ctypes.addressof(emulated)) != -1:
                self._request(calls.PTRACE_CONT, hit.tid)
            else:
                self._set_registers(hit)  # for its error (ESRCH: gone)
            return
        if self.guard.on and not self._memory_answers(hit):
            self.given_up.add(hit.address)  # not stepped: a step that never ends is a SIGTRAP later
            self.disarm(hit.address)
            self.resume(hit)  # it runs the instruction itself, and waits where it would untraced
            return
        self.stepped += 1
        kind = self._displaced.get(hit.address)
        if kind is None:
            kind = self._displaced[hit.address] = self._kind_at(hit.address)
        if kind == "kernel":  # it may wait in the kernel for a thread that would be held: no hold
            self.unsure += len(self.threads) > 1
            self._step_in_place(hit, repeat=False)
            return
        emulation = self._emulation_for(hit.address) if CHECK_EMULATION else None
        held = self._hold_others(hit.tid)
        try:  # the check's reads once the others are held: what the step itself will see
            check = self._checker(hit, emulation) if emulation is not None else None
            self._step_in_place(hit, repeat=kind == "repeat", check=check)
        finally:
            self._ran_meanwhile()
            self._release(held)

    def _memory_answers(self, hit: Hit) -> bool:
        """Whether the memory the instruction at the hit reads or writes comes (read through the
        guard, TIMEOUT_S at most). A single-step whose instruction waits in the kernel for good
        leaves its thread with the trap flag set: Linux does not clear it when its tracer ends,
        and the thread dies of SIGTRAP once its memory comes, if ever (issue 32)."""
        memory, access = self.memory, self._access

        def read() -> bool:
            spans = emulate.touched(self._code_at(hit.address), hit.address, hit.registers)
            for address, size in spans:
                access.read(address, size)  # (faults each page in, as the instruction would)
            return not (memory.hung and any(memory.refuses(address, size) for address, size in spans))
        try:
            return self.guard.call(read)
        except (MemoryHang, MemoryDead):
            return False
        except UnreadableMemory:
            return True  # the step finds out, as the CPU does

    def _code_at(self, address: int) -> bytes:
        """The longest instruction's bytes at a breakpoint, its original first byte in front."""
        return bytes([self.originals[address]]) + self.memory.read(address + 1, 15)

    def _emulated(self, address: int, registers: Any) -> Any:
        """The registers the instruction at ``address`` leaves, computed from ``registers`` (and
        the thread's memory) without a step; None when it must be stepped. Called in a guard's
        helper: it changes nothing the tracing thread holds but the cache of decodings."""
        if not EMULATE or CHECK_EMULATION:
            return None
        emulation = self._emulation_for(address)
        if emulation is None:
            return None
        after = calls.user_regs_struct.from_buffer_copy(registers)
        return after if emulation(after, self._access) else None

    def _emulation_for(self, address: int) -> emulate.Emulation | None:
        if address in self._emulations:
            return self._emulations[address]
        emulation = self._emulations[address] = self._emulation_at(address)
        return emulation

    def _emulation_at(self, address: int) -> emulate.Emulation | None:
        try:
            code = self._code_at(address)
        except UnreadableMemory:
            return None
        try:  # a CET shadow stack (kernel 6.6 and later, when the program asks for one)
            shadow_stack = "shstk" in procfs.status(self.pid).get("x86_Thread_features", "")
        except ProcessNotFound:
            return None
        return emulate.emulation_for(code, address, self.go, shadow_stack)

    def _checker(self, hit: Hit, emulation: emulate.Emulation) -> Callable[[int], None] | None:
        """With SAMPLER_CHECK_EMULATION=1: what the emulation would leave, to be compared with
        what the CPU's single-step left (registers, and the stack slot of a push)."""
        expected = emulate.copy(hit.registers)
        recorder = emulate.Recorder(self.memory, self.protections)
        if not emulation(expected, recorder):
            return None

        def check(tid: int) -> None:
            try:
                stepped = calls.get_registers(tid)
            except PtraceError:
                return
            self.checked += 1
            found = emulate.differences(expected, stepped)
            for address, data in recorder.writes:
                if recorder.read(address, len(data)) != data:
                    found.append(f"the {len(data)} bytes it wrote at {address:#x}")
            if found:
                self.mismatches.append(f"{hit.address:#x}: {', '.join(found)}")
        return check

    def _kind_at(self, address: int) -> str:
        """What the instruction at a breakpoint is, for the step over it (instructions.kind_of)."""
        try:
            code = bytes([self.originals[address]]) + self.memory.read(address + 1, 15)
        except UnreadableMemory:
            return "kernel"
        return kind_of(code, address)

    def _hold_others(self, tid: int) -> list[tuple[int, int]]:
        """Stop every thread but ``tid`` (PTRACE_INTERRUPT); returns (thread, status) of each
        that stopped. Only threads the kernel has running are waited for: one asleep, stopped
        or dead cannot run an instruction before it stops. One still running past
        HOLD_TIMEOUT_S counts in ``unsure``. Events of other tracees taken meanwhile are queued."""
        stopped = {queued for queued, _ in self._queue}  # stopped already, their stop not yet served
        self._asleep = {}
        waiting = set()
        for other in self.threads:
            if other == tid or other in stopped:
                continue
            ran = self._asleep_for_good(other)  # an interrupt would end its call with EINTR: not
            if ran is not None:  # held, and checked after the step (_ran_meanwhile)
                self._asleep[other] = ran
                continue
            if self._request(PTRACE_INTERRUPT, other):
                waiting.add(other)
        held: list[tuple[int, int]] = []
        deadline = time.monotonic() + HOLD_TIMEOUT_S
        polls = 0
        while waiting:
            got, status = self._poll()
            if got:
                if got not in waiting:
                    self.take_later(got, status)  # a new thread or child: served after the step
                    continue
                waiting.discard(got)
                if os.WIFSTOPPED(status):
                    held.append((got, status))
                else:
                    self._queue.append((got, status))
                continue
            polls += 1
            if polls == 8:  # not at once: the ones asleep need not be waited for
                waiting = {t for t in waiting if self._thread_state(t) == "R"}
            elif polls > 8:
                if time.monotonic() > deadline:
                    self.unsure += 1
                    break
                if polls > 64:
                    self._sleep(0.0005)
        return held

    def _thread_state(self, tid: int) -> str:
        return self._thread_files.state(self._group_of(tid), tid)

    def _group_of(self, tid: int) -> int:
        return tid if tid in self.sharing else self.pid

    def _asleep_for_good(self, tid: int) -> bytes | None:
        """Blocked in a system call that a ptrace stop ends with EINTR (signal(7): epoll_wait,
        semop, sigtimedwait, io_getevents...; read, poll, accept and most others are restarted
        by the kernel, unseen): its schedstat line then, read first (a wake-up after it shows
        as a change), else None."""
        group, files = self._group_of(tid), self._thread_files
        ran = files.ran(group, tid)
        if ran is None or self._thread_state(tid) != "S" or files.system_call(group, tid) not in ENDED_BY_A_STOP:
            return None
        return ran

    def _ran_meanwhile(self) -> None:
        """After a step: a thread left asleep for it that ran since (it woke) may have run
        through the breakpoint's place while the byte was out: counted in ``unsure``."""
        files = self._thread_files
        if any(files.ran(self._group_of(tid), tid) not in (ran, None) for tid, ran in self._asleep.items()):
            self.unsure += 1
        self._asleep = {}

    def _release(self, held: list[tuple[int, int]]) -> None:
        """Let held threads go: a thread stopped by the interrupt goes on; one that stopped
        for something else (a hit at the same moment, a signal, a fork) is served next."""
        for tid, status in held:
            if status >> 16 == PTRACE_EVENT_STOP:
                self._handle(tid, status)
            else:
                self._queue.append((tid, status))

    def _step_in_place(self, hit: Hit, repeat: bool, check: Callable[[int], None] | None = None) -> None:
        """Single-step the thread over the original instruction. A signal that comes first
        is held back and delivered once the instruction has run: delivered on the step, its
        handler would return onto the breakpoint, and the call would be counted twice (Go's
        preemption signal, SIGURG, did that). The instruction's own fault is delivered at once."""
        original = self.armed.pop(hit.address)
        self.memory.write(hit.address, original)
        if not hit.rewound:
            self.rewind(hit)
        signum = 0
        later: list[int] = []
        info: bytes | None = None
        stepping = hit.rewound  # False: the thread vanished (ESRCH)
        while stepping:
            if not self._request(calls.PTRACE_SINGLESTEP, hit.tid, 0, signum):
                break  # the thread is gone
            status = self._wait_for(hit.tid, time.monotonic() + STEP_TIMEOUT_S)
            if status == LATE:  # it waits in the kernel (a page of a file system that does not answer?):
                self._stepping[hit.tid] = (hit.address, original, later)  # nothing more is held for it;
                self.unsure += 1  # the byte stays out until its step ends (_step_ended)
                hit.resumed = time.monotonic()
                return
            if status is None or not os.WIFSTOPPED(status):
                break
            sig, event = os.WSTOPSIG(status), status >> 16
            if event in NEW_TASK_EVENTS or event == PTRACE_EVENT_EXEC:
                stepping = self._on_event(hit.tid, status)  # it forked or exec'd: past the instruction
                info = None  # a resume from an event stop delivers no signal: all are sent again
                later.insert(0, 0)
                break
            if event == PTRACE_EVENT_STOP:
                signum = 0  # an interrupt asked for earlier stopped it before the step: step again
                continue
            if repeat and sig == signal.SIGTRAP and not signum and self._at(hit.tid) == hit.address:
                continue  # a rep instruction ran one iteration: step on until it is done
            if sig == signal.SIGTRAP or event or signum:
                break  # stepped (or parked), or the instruction's fault was delivered
            if sig in FAULTS and sig in later:
                signum = sig  # the instruction itself faults: deliver it now, where it stands
                info = None if later[0] == sig else info
                later.remove(sig)
                continue
            if not later:
                info = calls.get_siginfo(hit.tid)  # kept whole: a timer's si_value, SIGCHLD's si_pid
            later.append(sig)  # held back until the instruction has run
            signum = 0
        if check is not None and stepping:
            check(hit.tid)
        self.armed[hit.address] = original
        self._write_int3(hit.address)
        hit.resumed = time.monotonic()
        if stepping and later and info is not None:
            calls.set_siginfo(hit.tid, info)
        if stepping and self._request(calls.PTRACE_CONT, hit.tid, 0, later[0] if later else 0):
            for sig in later[1:]:  # one is delivered with the resume; the others queued again
                if sig:
                    calls.tgkill(self.pid if hit.tid not in self.sharing else hit.tid, hit.tid, sig)

    def _at(self, tid: int) -> int | None:
        try:
            return int(calls.get_registers(tid).rip)
        except PtraceError:
            return None

    def _wait_for(self, tid: int, deadline: float) -> int | None:
        """The next status of thread ``tid``, LATE when none came by ``deadline`` (a single-step
        ends within microseconds, unless its instruction's page must come from a file system
        that is slow or never answers: the other threads held must not wait for it); the other
        threads' events wait in the kernel's queue meanwhile."""
        polls = 0
        while True:
            try:
                got, status = os.waitpid(tid, WNOHANG_WALL)
            except ChildProcessError:
                return None
            if got:
                return status
            polls += 1
            if polls > 2:  # not spinning: the thread stepped may need this CPU to run its instruction
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return LATE
                self._sleep(min(remaining, 0.001))  # (woken by its SIGCHLD: router.Wakeups)

    def _step_ended(self, tid: int, status: int) -> bool:
        """A step given up on (``_step_in_place``) ended: the breakpoint goes back in and the thread
        goes on with the signals held back for it. False when ``tid`` was not stepping."""
        stepping = self._stepping.pop(tid, None)
        if stepping is None:
            return False
        address, original, later = stepping
        if address not in self.armed and address in self.originals and not self._detaching:
            self.armed[address] = original
            self._write_int3(address)
        if not os.WIFSTOPPED(status):
            return False  # it exited or was killed: its end is handled as any
        if status >> 16:
            return False  # an event: handled as any
        sig = os.WSTOPSIG(status)
        first = later[0] if later else (0 if sig == signal.SIGTRAP else sig)
        if self._request(calls.PTRACE_CONT, tid, 0, first):
            for more in later[1:]:
                if more:
                    calls.tgkill(self.pid if tid not in self.sharing else tid, tid, more)
        return True

    # -- waiting ---------------------------------------------------------------

    def wait_for_hit(self, deadline: float, stop: StopFlag) -> Hit | None:
        """Serve every event until a thread stops on an armed breakpoint, or until deadline."""
        while True:
            for tid, status in self._events():
                hit = self._handle(tid, status)
                if hit is not None:
                    return hit
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.is_set():
                return None
            self._sleep(remaining)

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
                    registers.rip = address  # $rip reads the breakpoint's address (the thread's: at rewind)
                    hit = Hit(tid, address, registers, seen)
                    self.threads.add(tid)
                    self.stops[tid] = self.stops.get(tid, 0) + 1
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
        if LET_RUN_S > 0:
            time.sleep(LET_RUN_S)

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

    def serve_until(self, deadline: float, stop: StopFlag) -> None:
        """Between samples: keep passing signals on and following new threads."""
        hit = self.wait_for_hit(deadline, stop)
        if hit is not None:  # a late trap on an armed breakpoint: cannot happen while disarmed
            self.resume(hit)

    def _handle(self, tid: int, status: int) -> Hit | None:
        if self._stepping and tid in self._stepping and self._step_ended(tid, status):
            return None
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self.threads.discard(tid)
            self.sharing.discard(tid)
            if tid == self.pid:
                self.exit_status = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
                raise TargetExited(f"target process {self.pid} exited with status {self.exit_status}")
            return None
        if not os.WIFSTOPPED(status):
            return None
        sig, event = os.WSTOPSIG(status), status >> 16
        if tid not in self.threads and event == PTRACE_EVENT_STOP and not procfs.is_thread_of(self.pid, tid):
            self._early[tid] = status  # a new process whose parent's fork event is still to come
            return None
        self.threads.add(tid)
        self.stops[tid] = self.stops.get(tid, 0) + 1
        if event in NEW_TASK_EVENTS:
            try:
                self._on_event(tid, status)
            finally:  # the parent goes on, whatever became of its child
                self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif event == PTRACE_EVENT_EXEC:
            self._on_event(tid, status)
        elif event == PTRACE_EVENT_VFORK_DONE:
            try:
                self._vfork_done()
            finally:
                self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif event == PTRACE_EVENT_STOP:
            # a group-stop (someone sent SIGSTOP) stays a stop; a new thread's first stop goes on
            request = PTRACE_LISTEN if sig in GROUP_STOP_SIGNALS else ptrace_func.PTRACE_CONT
            self._request(request, tid, 0, 0)
        elif event:
            self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif sig == signal.SIGTRAP:
            try:
                registers = calls.get_registers(tid)
            except PtraceError:
                return None  # killed meanwhile (SIGKILL): its exit comes next
            address = registers.rip - 1
            if address in self.armed:
                registers.rip = address  # $rip reads the breakpoint's address (the thread's: at rewind)
                return Hit(tid, address, registers, self._seen)
            if address in self.originals:  # hit at the same moment as another thread: rewind, go on
                self.resume(Hit(tid, address, registers, 0.0))
            else:
                self._request(ptrace_func.PTRACE_CONT, tid, 0, sig)  # not ours: pass it on
        else:
            self._request(ptrace_func.PTRACE_CONT, tid, 0, sig)  # SIGURG, SIGPROF...: pass it on
        return None

    def _on_event(self, tid: int, status: int) -> bool:
        """What a fork, vfork, clone or exec event of ``tid`` needs; True when ``tid`` may go on."""
        event = status >> 16
        if event in NEW_TASK_EVENTS:
            self._on_new_task(tid, event)
            return True
        if tid in self.sharing:  # a vfork child ran a new program: none of sampler's bytes are in it
            self.sharing.discard(tid)
            self.threads.discard(tid)
            self._request(ptrace_func.PTRACE_DETACH, tid, 0, 0)
            return False
        self._exec_happened()
        return False

    def _on_new_task(self, parent: int, event: int) -> int | None:
        """A thread or process ``parent`` just started (``parent`` is stopped at the event).
        A thread, or a process in the same memory, is traced from now on (returned); a
        process with a copy of the memory is cleaned of the breakpoints and let go (None)."""
        try:
            child = int(ptrace_func.ptrace_geteventmsg(parent))
        except PtraceError:
            return None  # the parent vanished (SIGKILL): its child goes with it
        if event == PTRACE_EVENT_CLONE and procfs.is_thread_of(self.pid, child):
            pass
        elif event == PTRACE_EVENT_VFORK and not self.trace_vfork_children:
            self._suspend()  # its exec must not be a traced one: let it go with no int3 in its way
            early = self._early.pop(child, None)
            self.children.release(child, {}, first_stop_seen=early is not None)
            return None
        elif event == PTRACE_EVENT_VFORK or shares_memory(self.pid, child):  # clone(CLONE_VM|SIGCHLD) is a "fork"
            self.sharing.add(child)
        else:
            early = self._early.pop(child, None)
            if self.adopt is None or self._detaching:
                self.children.release(child, self.patches, first_stop_seen=early is not None)
            elif self.children.release(child, self.patches, first_stop_seen=early is not None, keep=True) \
                    and not self.adopt(child):
                self._request(ptrace_func.PTRACE_DETACH, child, 0, 0)  # not taken in: let go, clean
            return None
        self.threads.add(child)
        early = self._early.pop(child, None)
        if early is not None and self._detaching:  # its first stop came first: it is let go now
            self._request(ptrace_func.PTRACE_DETACH, child, 0, 0)
            self.threads.discard(child)
            self.sharing.discard(child)
            return None
        if early is not None:
            self._handle(child, early)  # its first stop came first: it goes on now
        return child

    def _suspend(self) -> None:
        """Take every int3 out of the memory a vfork child shares, until VFORK_DONE."""
        if not self._suspended:
            for address, original in self.armed.items():
                self.memory.write(address, original)
            self.vfork_windows += 1
        self._suspended += 1

    def _vfork_done(self) -> None:
        if self._suspended:
            self._suspended -= 1
            if not self._suspended:
                for address in self.armed:
                    self.memory.write(address, INT3)

    def _exec_happened(self) -> None:
        """The target ran a new program: the breakpoints went with the old one. Nothing of
        sampler's may be written into the new program, so they are forgotten, and the run
        ends with one line."""
        for address, original in self.armed.items():  # the fd holds the old memory, never the new
            with contextlib.suppress(OSError, SamplerError):
                self.memory.write(address, original)  # (a vfork child may still run in it)
        self.armed.clear()
        self.originals.clear()
        self.patches.clear()
        if self.guardian is not None:
            self.guardian.forget_patches()
        if self.journal is not None:
            self.journal.clear()
        self.threads = set(self.sharing)
        self._request(ptrace_func.PTRACE_DETACH, self.pid, 0, 0)  # stopped at the event: let go now
        try:
            program = procfs.exe_path(self.pid)
        except ProcessNotFound:
            program = "a new program"
        raise TargetExeced(f"target process {self.pid} ran {program} with exec: its breakpoints went with "
                           "the old program")

    def _rewind_if_ours(self, tid: int) -> bool:
        try:
            registers = calls.get_registers(tid)
        except PtraceError:
            return False
        if registers.rip - 1 not in self.originals:
            return False
        registers.rip -= 1
        ptrace_func.ptrace_setregs(tid, registers)
        return True

    def _events(self) -> Iterator[tuple[int, int]]:
        while self._queue:
            self._seen = time.monotonic()
            yield self._queue.pop(0)
        while True:
            tid, status = self._poll()
            if tid == 0:
                return
            self._seen = time.monotonic()  # a hit's pause starts here, with the kernel's word of it
            yield tid, status

    def _poll(self) -> tuple[int, int]:
        """The next event of this tracer's tasks from the kernel; (0, 0) when there is none now."""
        if self.router is not None:
            return self.router.poll(self)
        try:
            return os.waitpid(-1, WNOHANG_WALL)
        except ChildProcessError:
            return 0, 0

    # -- in a run of many processes (router.py) --------------------------------

    def owns(self, tid: int) -> bool:
        """``tid`` is one of this tracer's tasks (a thread, a vfork child, a new process not yet
        announced by its parent's fork event)."""
        return tid == self.pid or tid in self.threads or tid in self.sharing or tid in self._early

    def take_later(self, tid: int, status: int) -> None:
        """An event of one of this tracer's tasks that the router took while serving another:
        served at this tracer's next call. A new process's first stop is kept as ``_handle``
        keeps it (its parent's fork event looks for it there)."""
        if tid not in self.threads and os.WIFSTOPPED(status) and status >> 16 == PTRACE_EVENT_STOP \
                and tid != self.pid and not procfs.is_thread_of(self.pid, tid):
            self._early[tid] = status
        else:
            self._queue.append((tid, status))

    def has_events(self) -> bool:
        return bool(self._queue)

    def _request(self, request: int, tid: int, addr: int = 0, data: int = 0) -> bool:
        """A ptrace request that tolerates a thread that has just vanished."""
        try:
            calls.request(request, tid, addr, data)
            return True
        except PtraceError as e:
            if e.errno == errno.ESRCH:
                return False
            raise DebuggerError(f"ptrace request {request:#x} on thread {tid} failed: {e}") from None

    # -- sleeping until something happens (router.Wakeups) ---------------------------

    def _start_wakeups(self) -> None:
        if self.router is None:
            self._wakeups.start()
        else:
            self.router.add(self)

    def _stop_wakeups(self) -> None:
        if self.router is None:
            self._wakeups.stop()
        else:
            self.router.remove(self)

    def _sleep(self, timeout: float) -> None:
        self._wakeups.sleep(timeout)


def _tasks(pid: int) -> list[int]:
    try:
        return procfs.tasks(pid)
    except ProcessNotFound:
        raise TargetExited(f"target process {pid} exited") from None

