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
    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._fd = -1
        self._children: set[int] = set()

    def ready(self) -> None:
        try:
            self._fd = os.open(f"/proc/{self.pid}/mem", os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            self._fd = -1  # gone already: cleanup's repair finds nothing to do either

    def run(self, patches: dict[int, int], children: set[int]) -> None:
        if self._fd >= 0:
            repair.put_back_through(self._fd, patches)
        for child in children:
            repair.put_back(child, patches)
        self._children = children

    def cleanup(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for pid in (self.pid, *self._children):
            try:
                repair.repair(pid)  # the journal entry: its bytes are back, it is dropped
            except SamplerError:
                pass  # an untrusted or unwritable journal: nothing of ours to tidy
