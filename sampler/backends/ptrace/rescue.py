"""What the guardian does for a ptrace run when the tracing worker died mid-run.

The kernel detached every thread when the worker died; what may remain is an int3
in the code, or an in-process probe's jump (put back last, with every thread stopped:
freeze.py). The worker told the guardian each byte before patching it, so the
guardian has the originals in memory and /proc/PID/mem already open (the run's first
target's: a copy of the worker's own descriptor, the very memory it patches): after the
worker's death it only writes them back, each where the bytes around are still those the
worker saw (a process that exec'd since holds other code there). A forked child the worker
was cleaning of those bytes gets them back too. The journal entries are tidied afterwards.
"""

from __future__ import annotations

import os
import time

from sampler.errors import SamplerError
from sampler.process.freeze import every_thread_held
from sampler.safety import repair
from sampler.safety.patches import Patch, put_back_into, put_back_through
from sampler.safety.semaphores import add
from sampler.target import procfs

HOLD_TRIES_S = 10.0
"""How long the guardian tries to hold every thread for a jump: the dead worker's threads stay
traced a moment after its pipe closes (the kernel closes its files before it detaches them)."""


def _hold_and_put_back(pid: int, fd: int, theirs: dict[int, Patch]) -> None:
    deadline = time.monotonic() + HOLD_TRIES_S
    while True:
        try:
            put_back_through(fd, theirs, every_thread_held(pid))
            return
        except SamplerError:
            if time.monotonic() > deadline:
                return  # a thread that would not stop: the journal keeps them for repair
            time.sleep(0.02)


def _count_out_in(child: int, addresses: set[int]) -> None:
    """A forked child the worker was cleaning holds a copy of each count."""
    try:
        fd = procfs.open_mem(child, writable=True)
    except OSError:
        return
    try:
        for address in addresses:
            add(fd, address, -1)
    finally:
        os.close(fd)


class PatchRescue:
    """For one process, or (``watch``) each process of a run of many."""

    def __init__(self, pid: int, memory_fd: int = -1) -> None:
        """``memory_fd``: the worker's /proc/PID/mem descriptor of the run's first target, which
        the guardian (a fork) keeps: the very memory the worker patches, whatever the PID runs
        later."""
        self.pid = pid
        """The run's first target: the process of patches said without a PID (0)."""
        self._fds: dict[int, int] = {}
        self._children: set[int] = set()
        self._memory_fd = memory_fd

    def ready(self) -> None:
        if self._memory_fd >= 0:
            try:
                self._fds[self.pid] = os.dup(self._memory_fd)
                return
            except OSError:
                pass
        self.watch(self.pid)

    def watch(self, pid: int) -> None:
        if pid in self._fds:
            return
        try:
            self._fds[pid] = procfs.open_mem(pid, writable=True)
        except OSError:
            pass  # gone already: cleanup's repair finds nothing to do either

    def run(self, patches: dict[int, dict[int, Patch]], children: dict[int, int],
            semaphores: dict[int, set[int]]) -> None:
        jumps: list[tuple[int, int, dict[int, Patch]]] = []
        for pid, theirs in patches.items():
            fd = self._fds.get(pid or self.pid, -1)
            if fd >= 0:
                put_back_through(fd, theirs)  # only where the code around is as it was; the int3s first
                if any(patch.group for patch in theirs.values()):
                    jumps.append((pid or self.pid, fd, theirs))
        for child, parent in children.items():
            put_back_into(child, patches.get(parent, {}), every_thread_held)  # (the kernel let it go: it runs)
        for pid, addresses in semaphores.items():  # after the int3s: a count is no hazard to the target
            fd = self._fds.get(pid or self.pid, -1)
            for address in addresses if fd >= 0 else ():
                add(fd, address, -1)
            for child, parent in children.items():
                if parent == pid:
                    _count_out_in(child, addresses)
        self._children = set(children)
        for pid, fd, theirs in jumps:  # not in a hurry: a jump keeps the target running, into the trampoline
            _hold_and_put_back(pid, fd, theirs)

    def cleanup(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        pids = set(self._fds) | {self.pid}
        self._fds.clear()
        for pid in (*sorted(pids), *self._children):
            try:
                repair.repair(pid, count_out=False)  # the journal entry: its bytes are back, it is dropped (its
                # semaphores were counted out above, those the guardian heard of: never twice)
            except SamplerError:
                pass  # an untrusted or unwritable journal: nothing of ours to tidy
