"""What the guardian does for a ptrace run when the tracing worker died mid-run.

The kernel detached every thread when the worker died; what may remain is an int3
in the code. The worker told the guardian each byte before patching it, so the
guardian has the originals in memory and /proc/PID/mem already open: after the
worker's death it only writes them back. A forked child the worker was cleaning of
those bytes gets them back too. The journal entries are tidied afterwards.
"""

from __future__ import annotations

import os

from sampler.errors import SamplerError
from sampler.safety import repair


class PatchRescue:
    """For one process, or (``watch``) each process of a run of many."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        """The run's first target: the process of patches said without a PID (0)."""
        self._fds: dict[int, int] = {}
        self._children: set[int] = set()

    def ready(self) -> None:
        self.watch(self.pid)

    def watch(self, pid: int) -> None:
        if pid in self._fds:
            return
        try:
            self._fds[pid] = os.open(f"/proc/{pid}/mem", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            pass  # gone already: cleanup's repair finds nothing to do either

    def run(self, patches: dict[int, dict[int, int]], children: dict[int, int]) -> None:
        for pid, theirs in patches.items():
            fd = self._fds.get(pid or self.pid, -1)
            if fd >= 0:
                repair.put_back_through(fd, theirs)
        for child, parent in children.items():
            repair.put_back(child, patches.get(parent, {}))
        self._children = set(children)

    def cleanup(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        pids = set(self._fds) | {self.pid}
        self._fds.clear()
        for pid in (*sorted(pids), *self._children):
            try:
                repair.repair(pid)  # the journal entry: its bytes are back, it is dropped
            except SamplerError:
                pass  # an untrusted or unwritable journal: nothing of ours to tidy
