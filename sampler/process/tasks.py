"""The tracer's tasks: the state every part of the tracer shares (its threads, the vfork
children in its memory, the events taken early), the ptrace constants, a hit, and the plain
requests and waits (``_request``, ``_poll``, ``_events``, sleeping through router.Wakeups).

The tracer is cut along its seams, each part a class over this one: events.py (what each
waitpid status means: hits, signals, forks, execs), stepover.py (step-over and emulation, holding
the other threads), probes.py (the probe table: every byte written, journaled), tracer.py (attach,
detach, the hot path). All ptrace calls come from the worker's main thread.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import DebuggerError
from sampler.process import calls, emulate
from sampler.process.children import ChildReleaser
from sampler.process.guard import Guard
from sampler.process.memory import Memory, Protections
from sampler.process.patchtable import ProbeTable
from sampler.process.router import Router, Wakeups
from sampler.process.stats import TracerStats
from sampler.process.switches import Switches
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
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


class Tasks:
    """What the parts of the tracer share: one process's tasks and the way to reach them."""

    def __init__(self, pid: int, memory: Memory, journal: Journal | None = None,
                 guardian: Guardian | Ward | None = None, go: bool = False, router: Router | None = None,
                 guard: Guard | None = None, switches: Switches | None = None,
                 adopt: Callable[[int], bool] | None = None) -> None:
        self.pid = pid
        self.go = go
        """The target is a Go program (its stack check may be emulated: emulate.py)."""
        self.memory = memory
        self.switches = switches or Switches()
        """What the benchmarks and tests turn off or on (switches.py)."""
        self.stats = TracerStats()
        """What happened, for the summary."""
        self.threads: set[int] = set()
        self.probes = ProbeTable(pid, memory, journal, guardian, self.stats)
        """Every byte written into the target's code, journaled first (probes.py)."""
        self.armed = self.probes.armed
        """Breakpoints in place: address -> original byte (the table's, read by the hot path)."""
        self.originals = self.probes.originals
        """Every address ever armed -> its original byte: to recognise traps that arrive after
        a clear."""
        self.patches = self.probes.patches
        """Every address ever armed -> its original byte and the code around it: what the journal
        and the guardian keep, and what cleans the copies a forked child got."""
        self.sharing: set[int] = set()
        """Child processes that run in the target's memory (vfork): traced like its threads
        until they exec or exit."""
        self.shared_children = 0
        """Children seen that ran in the target's memory (vfork, clone with CLONE_VM): an in-process
        probe counts their calls as the parent's thread's."""
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
        self.stands_for: dict[int, int] = {}
        """An int3 in a stop of sampler's page -> the site it stands for (the site jumps there, every register
        as at the site but the pc): a hit there reads $rip as the site's."""
        self.outofline: dict[int, int] = {}
        """Breakpoint address -> where a copy of its instruction runs in the target (the in-process pages:
        outofline.py): a hit goes on there, no step, no emulation."""
        self._emulations: dict[int, emulate.Emulation | None] = {}
        """Breakpoint address -> how its instruction runs without a step (None: it is stepped)."""
        self.protections = memory.protections or Protections(pid)
        """The armed memory's mappings, for emulated accesses (opened with ``memory``, never by PID)."""
        self._access = emulate.Access(memory, self.protections)
        self.guard = guard or Guard(pid, memory.mark_hung)
        """What reads the memory while a thread of the target is held, TIMEOUT_S at most (guard.py)."""
        self._detaching = False
        self.trace_vfork_children = permission.can_ptrace()
        """A traced program's exec drops its set-user-ID and capabilities unless its tracer has
        CAP_SYS_PTRACE: without it, a vfork child is let go at once and the breakpoints are out
        of the shared memory until its parent says it exec'd or exited (VFORK_DONE)."""
        self._thread_files = procfs.ThreadFiles(lambda: self.threads)
        """Each thread's stat and schedstat, opened once (closed at detach)."""
        self._asleep: dict[int, bytes] = {}
        """During a step: the threads left asleep in a system call (not held), and their CPU time."""
        self.left_asleep: set[int] = set()
        """Threads not stopped for detach, asleep in a system call (state S): the kernel lets
        them go as the tracer ends, the router at a stop before that (a run of many)."""
        self.exit_status: int | None = None
        self._seen = 0.0
        """When the last event came out of waitpid (monotonic seconds)."""
        self.adopt = adopt
        """--follow-forks: offered each forked child, stopped before its first instruction and
        cleaned of sampler's bytes; True when it was taken in (it is then its own tracer's)."""
        self.router = router
        """In a run of many processes, what hands this tracer its tasks' events (router.py)."""
        self._wakeups = router.wakeups if router is not None else Wakeups()

    # -- what the other parts give (the Tracer is all of them) -----------------------

    def _handle(self, tid: int, status: int) -> Hit | None:
        """events.py: serve one status; the hit, when it is one on an armed breakpoint."""
        raise NotImplementedError

    def _on_event(self, tid: int, status: int) -> bool:
        """events.py: a fork, vfork, clone or exec event."""
        raise NotImplementedError

    def _on_new_task(self, parent: int, event: int) -> int | None:
        """events.py: a new thread or process of ``parent``."""
        raise NotImplementedError

    def _step_ended(self, tid: int, status: int) -> bool:
        """stepover.py: a step given up on ended."""
        raise NotImplementedError

    def rewind(self, hit: Hit) -> None:
        """tracer.py: the held thread set back onto the original instruction."""
        raise NotImplementedError

    def resume(self, hit: Hit) -> None:
        """tracer.py: the held thread rewound and let go."""
        raise NotImplementedError

    def disarm(self, address: int) -> None:
        """tracer.py: the original byte back (probes.py)."""
        raise NotImplementedError

    # -- the tasks, requests and waits -----------------------------------------------

    def _thread_state(self, tid: int) -> str:
        return self._thread_files.state(self._group_of(tid), tid)

    def _group_of(self, tid: int) -> int:
        return tid if tid in self.sharing else self.pid

    def _set_registers(self, hit: Hit) -> bool:
        """Write the hit's registers back; False when the thread vanished meanwhile (ESRCH)."""
        try:
            calls.set_registers(hit.tid, hit.registers)
        except PtraceError as e:
            if e.errno != errno.ESRCH:
                raise DebuggerError(f"cannot set the registers of thread {hit.tid}: {e}") from None
            return False
        return True

    def _at(self, tid: int) -> int | None:
        try:
            return int(calls.get_registers(tid).rip)
        except PtraceError:
            return None

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
