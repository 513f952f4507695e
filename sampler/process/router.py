"""One tracing thread, many traced processes: whose each event is.

ptrace makes a thread the tracer of every process it seizes, and ``waitpid(-1, __WALL)``
reports the events of all of them. A run of many processes (fleet.py) has one ``Tracer``
per process; the router takes the kernel's events and hands each to the tracer of its
process: its threads, its vfork children, and new tasks by their thread group or parent.
It also owns the one way the worker sleeps until a tracee stops (``Wakeups``), which every
tracer shares.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any, Protocol

from ptrace.binding import func as ptrace_func  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler import waits
from sampler.process import calls
from sampler.safety.patches import Patch, put_back_into
from sampler.target import procfs

WALL = 0x40000000
PTRACE_EVENT_STOP = 128
WNOHANG_WALL = os.WNOHANG | WALL
SLEEP_SLICE_S = 0.1


class Tracer(Protocol):
    """What the router needs of a tracer (tracer.py's)."""

    pid: int
    patches: dict[int, Patch]
    """Every address it ever patched -> the original byte and the code around it."""

    def owns(self, tid: int) -> bool: ...

    def take_later(self, tid: int, status: int) -> None: ...

    def has_events(self) -> bool: ...


class Router:
    def __init__(self) -> None:
        self.tracers: dict[int, Tracer] = {}
        """Each traced process's tracer, by its PID."""
        self._owners: dict[int, Tracer] = {}
        """Tasks seen -> their tracer (checked again at each use: a task ID is reused)."""
        self.strays = 0
        """Stopped tasks no tracer claimed, let go (for the tests)."""
        self.wakeups = Wakeups()
        """Shared by every tracer of the run."""

    def add(self, tracer: Tracer) -> None:
        if not self.tracers:
            self.wakeups.start()
        self.tracers[tracer.pid] = tracer

    def remove(self, tracer: Tracer) -> None:
        """After its detach; the wakeups end with the last one."""
        self.tracers.pop(tracer.pid, None)
        self._owners = {tid: owner for tid, owner in self._owners.items() if owner is not tracer}
        if not self.tracers:
            self.wakeups.stop()

    # -- events ----------------------------------------------------------------

    def poll(self, tracer: Tracer) -> tuple[int, int]:
        """The next event of ``tracer``'s tasks from the kernel, (0, 0) when none is there now;
        the events of other tracers' tasks taken meanwhile go to them (``take_later``)."""
        while True:
            try:
                tid, status = os.waitpid(-1, WNOHANG_WALL)
            except ChildProcessError:
                return 0, 0
            if tid == 0:
                return 0, 0
            owner = self.owner(tid, status, tracer)
            if owner is tracer:
                return tid, status
            if owner is not None:
                owner.take_later(tid, status)

    def drain(self) -> None:
        """Every event the kernel has now, each to its tracer (served at its next call)."""
        while True:
            try:
                tid, status = os.waitpid(-1, WNOHANG_WALL)
            except ChildProcessError:
                return
            if tid == 0:
                return
            owner = self.owner(tid, status, None)
            if owner is not None:
                owner.take_later(tid, status)

    def busy(self) -> list[Tracer]:
        """The tracers with events to serve."""
        return [tracer for tracer in self.tracers.values() if tracer.has_events()]

    def owner(self, tid: int, status: int, asking: Tracer | None) -> Tracer | None:
        """Whose task ``tid`` is: a tracer's thread or vfork child, else a new task of its
        process (a thread) or one its process forked; ``asking`` when nothing says (as a lone
        tracer would take it). None: a stopped task nobody traces any more, let go here."""
        owner = self._owners.get(tid)
        first_stop = os.WIFSTOPPED(status) and status >> 16 == PTRACE_EVENT_STOP
        if owner is None or not owner.owns(tid):
            owner = next((tracer for tracer in self.tracers.values() if tracer.owns(tid)), None)
            if owner is None:
                group, parent = procfs.group_and_parent(tid)
                owner = self.tracers.get(group)
                if owner is None and first_stop:  # a new process: its parent's (the fork event follows)
                    owner = self.tracers.get(parent)
                if owner is None and self.tracers.get(parent) is None:
                    owner = asking  # as a lone tracer would take it
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self._owners.pop(tid, None)
            return owner
        if owner is None:
            if os.WIFSTOPPED(status):  # (a process whose part ended, its last events: not its parent's)
                signum = os.WSTOPSIG(status)  # a signal it stopped for goes on with it; a trap (a
                self._let_go(tid, clean=first_stop,  # step of sampler's ending late) does not
                             signum=0 if status >> 16 or signum == signal.SIGTRAP else signum)
            return None
        self._owners[tid] = owner
        return owner

    def _let_go(self, tid: int, clean: bool, signum: int = 0) -> None:
        """A stopped task no tracer claims: let go, with the signal it stopped for (``signum``:
        a thread left asleep in a system call at its process's detach, woken by a signal since;
        every breakpoint of that process was out first). ``clean``: at its first stop, a child whose
        parent was killed at its fork, before the fork event said whose it is; it may hold
        copies of sampler's int3 bytes: each goes back where one stands (the originals of every
        process of the run: they are one program but for a run of several programs)."""
        self.strays += 1
        if clean:
            originals: dict[int, Patch] = {}
            for tracer in self.tracers.values():
                originals.update(tracer.patches)
            put_back_into(tid, originals)
        try:
            ptrace_func.ptrace_detach(tid, signum)
        except PtraceError:
            pass

    def sleep(self, timeout: float) -> None:
        self.wakeups.sleep(timeout)



SLEPT_S = 50e-6
"""A sleep this long or longer waited for something: no stop was pending when it began."""
IDLE_UNTIL = [0.0]
"""When the tracing worker last woke from a sleep of SLEPT_S or more (monotonic seconds): a stop it
sees later than just after that came at that moment or after, and may have waited for it (latency.py)."""


def _ignore(_signum: int, _frame: object) -> None:
    """SIGCHLD's handler while sampling and after: it only wakes the loop (the wakeup fd)."""

class Wakeups:
    """How the tracing worker sleeps until a tracee stops. SIGCHLD is blocked in this thread
    and read from a signalfd: a handler would run inside every ptrace request that wakes a
    thread which soon stops again (every-hit mode: 5-7 us per request). Where other threads
    leave it unblocked (a program that runs the tracer in-process, as the tests do), the kernel
    hands it to one of them; the handler and the wakeup pipe then wake the select as before.
    The session's stop signals write to the wakeup pipe too."""

    def __init__(self) -> None:
        self.wake_r = self.wake_w = self.child_fd = -1
        self.also: dict[int, Callable[[], None]] = {}
        """Other descriptors that end a sleep, each with what reads it (--exe's exec events)."""
        self._previous: tuple[Any, int, Any] | None = None

    def start(self) -> None:
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(self.wake_w, False)
        previous_handler = signal.signal(signal.SIGCHLD, _ignore)
        previous_fd = signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        self._previous = (previous_handler, previous_fd, mask)
        try:
            self.child_fd = calls.signalfd({signal.SIGCHLD})
        except OSError:
            self.stop()  # the handler, the wakeup fd and the mask as they were
            raise

    def stop(self) -> None:
        if self._previous is not None:
            handler, fd, mask = self._previous
            # a SIGCHLD that came (to another thread) just before this must meet a Python handler
            # when Python gets to it: with SIG_DFL back it prints "OSError: Signal 17 ignored due
            # to race condition" and a traceback (1 of 100 Ctrl-C runs). So where the default was
            # (SIGCHLD's is to ignore it), a handler that does nothing stays.
            signal.signal(signal.SIGCHLD, handler if callable(handler) else _ignore)
            signal.set_wakeup_fd(fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            self._previous = None
        for fd in (self.wake_r, self.wake_w, self.child_fd):
            if fd >= 0:
                os.close(fd)
        self.wake_r = self.wake_w = self.child_fd = -1

    def sleep(self, timeout: float) -> None:
        """Until a signal comes or ``timeout``; at most SLEEP_SLICE_S, so that a wake-up the
        kernel gave to another thread costs a slice, not the whole wait."""
        if timeout <= 0 or self.child_fd < 0:
            return
        began = time.monotonic()
        ready = waits.readable([self.wake_r, self.child_fd, *self.also], min(timeout, SLEEP_SLICE_S))
        woke = time.monotonic()
        if woke - began >= SLEPT_S:
            IDLE_UNTIL[0] = woke
        for fd in ready:
            if fd in self.also:
                self.also[fd]()
                continue
            try:
                while os.read(fd, 1024):
                    pass
            except BlockingIOError:
                pass
