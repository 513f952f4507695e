"""Every thread of a process stopped for a moment, by a sampler that does not trace it: what an
in-process probe's jump needs to be put in or taken out (``sampler repair``, the guardian after
the worker died, the tests). A thread running through five bytes while they are written would run
half of the old instruction and half of the new.

Each thread is seized and interrupted at once (snapshot.py), the threads asleep in a system call
too (a call the stop ended with EINTR is made again as it goes on: restart.py); a thread that
starts meanwhile is stopped in a further round. Nothing of the target is read but the registers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from sampler.errors import DebuggerError
from sampler.process.snapshot import Image, Snapshots
from sampler.target import procfs

MAX_ROUNDS = 16
"""Looks at the process's threads until every one is held (one may start while the others stop)."""


class NotHeld(DebuggerError):
    """A thread of the process could not be stopped: nothing that needs them all is done."""


@contextmanager
def every_thread_held(pid: int) -> Iterator[dict[int, Image]]:
    """Inside the ``with``: every thread of ``pid`` stopped (their images: registers and fs_base);
    NotHeld when one cannot be (a thread in an uninterruptible sleep that does not wake within
    snapshot.STOP_TIMEOUT_S, another tracer's)."""
    snapshots = Snapshots(pid)
    snapshots.interrupt_waits = True
    snapshots.copy_stacks = False
    try:
        held: dict[int, Image] = {}
        for _ in range(MAX_ROUNDS):
            new = [tid for tid in procfs.tasks(pid) if tid not in held]
            if not new:
                break
            for tid, image in snapshots.hold_many(new).items():
                if image.problem is None:
                    held[tid] = image
                elif image.problem != "it ended while it was read":
                    raise NotHeld(f"thread {tid} of process {pid} could not be stopped: {image.problem}")
        else:
            raise NotHeld(f"the threads of process {pid} kept changing: not every one could be stopped")
        yield held
    finally:
        snapshots.close()

