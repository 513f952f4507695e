"""Running a thread over the instruction under a breakpoint (every-hit mode): emulated where
emulate.py can (one stop, the int3 never leaves), else single-stepped with the original byte in
place and every other thread held meanwhile, so that none runs through uncounted; signals that
come during the step held back; a step whose instruction waits in the kernel given up on.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from collections.abc import Callable
from typing import Any

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import DebuggerError, ProcessNotFound
from sampler.process import calls, emulate
from sampler.process.guard import MemoryDead
from sampler.process.instructions import kind_of
from sampler.process.memory import MemoryHang
from sampler.process.reads import UnreadableMemory
from sampler.process.restart import restart_ended_call
from sampler.process.tasks import (
    NEW_TASK_EVENTS,
    PTRACE_EVENT_EXEC,
    PTRACE_EVENT_STOP,
    PTRACE_INTERRUPT,
    WNOHANG_WALL,
    Hit,
    Tasks,
)
from sampler.target import procfs, syscalls

FAULTS = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL}
"""Signals an instruction raises itself: the same one again before the step is its own."""
HOLD_ALL_TIMEOUT_S = 2.0
"""How long every thread may take to stop for an in-process probe's jump to go in or out."""
HOLD_TIMEOUT_S = 0.2
"""How long the other threads may take to stop for a step over the breakpoint's instruction."""
STEP_TIMEOUT_S = 0.1
"""How long the other threads stay held for one thread's single-step over a breakpoint."""
LATE = -1
"""_wait_for: no status by the deadline."""


class NotHeld(DebuggerError):
    """A thread did not stop for ``hold`` in time (the others were let go)."""


class Stepping(Tasks):
    """Every-hit mode's way over the instruction under a breakpoint, the breakpoint kept."""

    def step_over(self, hit: Hit, emulated: Any = None, computed: bool = False) -> None:
        """Every-hit mode: run the hitting thread over the original instruction with the
        breakpoint kept, and let it go. Emulated when it can be (emulate.py: one stop, the
        int3 never leaves); else single-stepped: while it steps the original byte is in place,
        so every other thread of the target is held meanwhile: none runs through uncounted.
        ``emulated``: the registers the emulation left (``catch`` computes them with the hit's
        reads); not ``computed``: computed here."""
        if not computed:
            emulated = self._moved(hit.address, hit.registers)
            if emulated is None:
                try:
                    emulated = self.guard.call(lambda: self._emulated(hit.address, hit.registers))
                except MemoryHang:
                    emulated = None  # (the step's own access then waits in the target's thread, not here)
        if emulated is not None:
            if hit.address in self.outofline:
                self.stats.moved += 1
            else:
                self.stats.emulated += 1
            hit.rewound = True  # past the instruction, as a step leaves it
            hit.resumed = time.monotonic()
            if calls.ptrace(calls.PTRACE_SETREGS, hit.tid, None, ctypes.addressof(emulated)) != -1:
                self._request(calls.PTRACE_CONT, hit.tid)
            else:
                self._set_registers(hit)  # for its error (ESRCH: gone)
            return
        if self.guard.on and not self._memory_answers(hit):
            self.stats.given_up.add(hit.address)  # not stepped: a step that never ends is a SIGTRAP later
            self.disarm(hit.address)
            self.resume(hit)  # it runs the instruction itself, and waits where it would untraced
            return
        self.stats.stepped += 1
        kind = self._displaced.get(hit.address)
        if kind is None:
            kind = self._displaced[hit.address] = self._kind_at(hit.address)
        if kind == "kernel":  # it may wait in the kernel for a thread that would be held: no hold
            self.stats.unsure += len(self.threads) > 1
            self._step_in_place(hit, repeat=False)
            return
        emulation = self._emulation_for(hit.address) if self.switches.check_emulation else None
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

    def _moved(self, address: int, registers: Any) -> Any:
        """The registers with the pc at the out-of-line copy of the instruction at ``address`` (it runs
        there for real: probe.S's handler sends a thread there too when sampler is gone); None: it has none."""
        copy = self.outofline.get(address)
        if copy is None:
            return None
        moved = calls.user_regs_struct.from_buffer_copy(registers)
        moved.rip = copy
        return moved

    def _code_at(self, address: int) -> bytes:
        """The longest instruction's bytes at a breakpoint, its original first byte in front."""
        return bytes([self.originals[address]]) + self.memory.read(address + 1, 15)

    def _emulated(self, address: int, registers: Any) -> Any:
        """The registers the instruction at ``address`` leaves, computed from ``registers`` (and
        the thread's memory) without a step; None when it must be stepped. Called in a guard's
        helper: it changes nothing the tracing thread holds but the cache of decodings."""
        moved = self._moved(address, registers)
        if moved is not None:
            return moved
        if not self.switches.emulate or self.switches.check_emulation:
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
            self.stats.checked += 1
            found = emulate.differences(expected, stepped)
            for address, data in recorder.writes:
                if recorder.read(address, len(data)) != data:
                    found.append(f"the {len(data)} bytes it wrote at {address:#x}")
            if found:
                self.stats.mismatches.append(f"{hit.address:#x}: {', '.join(found)}")
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
                    self.stats.unsure += 1
                    break
                if polls > 64:
                    self._sleep(0.0005)
        return held

    def hold(self, tids: list[int] | None = None, timeout: float = HOLD_ALL_TIMEOUT_S) -> list[tuple[int, int]]:
        """Every thread (or ``tids``) stopped, the ones asleep in a system call too: for bytes that
        no thread may run half-written (an in-process probe's jump). (thread, status) of each held;
        a call the interrupt ended with EINTR is made again when it goes on (``let_go``). A thread
        that starts meanwhile stops at its first instruction and waits for its turn (queued).
        DebuggerError when one does not stop within HOLD_ALL_TIMEOUT_S (an uninterruptible sleep),
        after those that did are let go."""
        stopped = {queued for queued, _ in self._queue}
        waiting = set()
        for tid in (self.threads if tids is None else tids):
            if tid not in stopped and tid in self.threads and self._request(PTRACE_INTERRUPT, tid):
                waiting.add(tid)
        held: list[tuple[int, int]] = []
        deadline = time.monotonic() + timeout
        polls = 0
        while waiting:
            got, status = self._poll()
            if got:
                if got not in waiting:
                    self.take_later(got, status)
                elif os.WIFSTOPPED(status):
                    waiting.discard(got)
                    held.append((got, status))
                else:
                    waiting.discard(got)
                    self._queue.append((got, status))
                continue
            if time.monotonic() > deadline:
                self.let_go(held)
                raise NotHeld(f"thread(s) {sorted(waiting)} of process {self.pid} did not stop within "
                              f"{timeout:g} s (an uninterruptible sleep? a vfork() waiting for its child?)")
            polls += 1
            if polls > 64:
                self._sleep(0.0005)
        return held

    def stopped_already(self) -> list[int]:
        """Threads stopped with an event not yet served (queued): ``hold`` leaves them as they are,
        and they do not run until it is served, but their pc is wherever they stopped (inside the
        bytes a jump takes, inside a trampoline)."""
        return sorted({tid for tid, status in self._queue if os.WIFSTOPPED(status)})

    def let_go(self, held: list[tuple[int, int]]) -> None:
        """Threads ``hold`` stopped go on; a call the stop ended with EINTR is made again."""
        for tid, status in held:
            if status >> 16 == PTRACE_EVENT_STOP and os.WSTOPSIG(status) == signal.SIGTRAP:
                with contextlib.suppress(PtraceError):
                    restart_ended_call(tid, calls.get_registers(tid))
        self._release(held)

    def _asleep_for_good(self, tid: int) -> bytes | None:
        """Blocked in a system call that a ptrace stop ends with EINTR (signal(7): epoll_wait,
        semop, sigtimedwait, io_getevents...; read, poll, accept and most others are restarted
        by the kernel, unseen): its schedstat line then, read first (a wake-up after it shows
        as a change), else None."""
        group, files = self._group_of(tid), self._thread_files
        ran = files.ran(group, tid)
        if ran is None or self._thread_state(tid) != "S" \
                or files.system_call(group, tid) not in syscalls.ENDED_BY_A_STOP:
            return None
        return ran

    def _ran_meanwhile(self) -> None:
        """After a step: a thread left asleep for it that ran since (it woke) may have run
        through the breakpoint's place while the byte was out: counted in ``unsure``."""
        files = self._thread_files
        if any(files.ran(self._group_of(tid), tid) not in (ran, None) for tid, ran in self._asleep.items()):
            self.stats.unsure += 1
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
                self.stats.unsure += 1  # the byte stays out until its step ends (_step_ended)
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
        self.probes.put_in(hit.address)
        hit.resumed = time.monotonic()
        if stepping and later and info is not None:
            calls.set_siginfo(hit.tid, info)
        if stepping and self._request(calls.PTRACE_CONT, hit.tid, 0, later[0] if later else 0):
            for sig in later[1:]:  # one is delivered with the resume; the others queued again
                if sig:
                    calls.tgkill(self.pid if hit.tid not in self.sharing else hit.tid, hit.tid, sig)

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
            self.probes.put_in(address)
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
