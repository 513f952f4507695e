"""Every thread of a process, read and unwound: what `sampler stack` prints and a profile counts.

Each thread is read as briefly as it can be (backends/ptrace/snapshot.py: asleep in a system call,
without stopping it; else stopped for its registers and one read of its stack) and unwound after it
runs again, from the copy of its stack (unwind/walk.py). With ``consistent``, every thread that may
be stopped is stopped at once, all are read, then all are let go: one moment for the whole process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from sampler.backends.ptrace.snapshot import Image, Snapshots
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.modules import Modules
from sampler.evaluation.reads import UnreadableMemory
from sampler.target import procfs
from sampler.target.threads import Thread, thread_of
from sampler.unwind.code import CodeMap
from sampler.unwind.frames import Stack
from sampler.unwind.walk import MAX_DEPTH, unwind


@dataclass
class ThreadStack:
    thread: Thread
    stack: Stack | None
    """None: not read (``how`` says why)."""
    how: str
    """"stopped for N us", "not stopped (asleep in a system call)", or why it was not read."""
    stopped_us: float | None = None


@dataclass
class ProcessStacks:
    pid: int
    name: str
    threads: list[ThreadStack] = field(default_factory=list)
    goroutines: list[object] | None = None
    notes: list[str] = field(default_factory=list)
    took_s: float = 0.0


class Reader:
    """One process: its modules and code, opened once, and its threads read as often as asked
    (a profile reads them at every tick)."""

    def __init__(self, pid: int, debug_dirs: tuple[str, ...] = (), say: object = None) -> None:
        self.pid = pid
        self.notes: list[str] = []
        self.modules = Modules(pid, DebugFinder(pid, debug_dirs, lambda _: None, self.notes.append))
        self.snapshots = Snapshots(pid)
        self.code = self._code_map()

    def _code_map(self) -> CodeMap:
        by_path = {module.path: module for module in self.modules.everything()}
        ranges = [(m.start, m.end, by_path.get(m.path), m.path) for m in self.snapshots.maps if m.executable]
        return CodeMap(ranges, self.snapshots.read)

    def close(self) -> None:
        try:
            self.snapshots.close()
        finally:
            self.modules.close()

    def refresh(self) -> None:
        """The process's mappings again (a library loaded since, a thread's new stack)."""
        self.snapshots.maps = procfs.maps(self.pid)
        self.modules.refresh()
        self.code = self._code_map()

    def read(self, tids: list[int], consistent: bool = False, max_depth: int = MAX_DEPTH
             ) -> list[ThreadStack]:
        """The threads (those still there), each as the kernel shows it the moment before it is read."""
        images: dict[int, tuple[Image | None, str]] = {}
        threads = []
        try:
            for tid in tids:
                thread = thread_of(self.pid, tid)
                if thread is not None:
                    threads.append(thread)
                    images[tid] = self._image(thread, hold=consistent)
        finally:
            self.snapshots.release_all()
        found = []
        for thread in threads:
            image, how = images[thread.tid]
            if image is None:
                found.append(ThreadStack(thread, None, how))
                continue
            stack = self._unwind(image, max_depth)
            if stack.short_of_registers and not image.stopped and not consistent \
                    and self.snapshots.must_not_stop(thread.tid) is None:
                again = self.snapshots.stopped(thread.tid)  # its stack needs the registers it keeps
                if again.problem is None:
                    image, how = again, _held(again)
                    stack = self._unwind(image, max_depth)
            found.append(ThreadStack(thread, stack, how, image.stopped_us))
        return found

    def _image(self, thread: Thread, hold: bool = False) -> tuple[Image | None, str]:
        if thread.state == "Z":
            return None, "a zombie: it has no stack"
        asleep = self.snapshots.asleep(thread.tid)
        if asleep is not None:
            reason = self.snapshots.must_not_stop(thread.tid)
            return asleep, f"not stopped ({reason or 'asleep in a system call'})"
        reason = self.snapshots.must_not_stop(thread.tid)
        if reason is not None:
            return None, f"not read: {reason}, and it woke while it was read"
        image = self.snapshots.hold(thread.tid) if hold else self.snapshots.stopped(thread.tid)
        if image.problem is not None:
            return None, f"not read: {image.problem}"
        return image, _held(image)

    def _unwind(self, image: Image, max_depth: int) -> Stack:
        def read(address: int, size: int) -> bytes:
            copied = image.read(address, size)
            if copied is not None:
                return copied
            return self.snapshots.read(address, size)

        return unwind(image.registers, self.code, read, max_depth)


def _held(image: Image) -> str:
    return f"stopped for {image.stopped_us:.0f} us" if image.stopped_us is not None else "stopped"


def collect(pid: int, consistent: bool = False, max_depth: int = MAX_DEPTH,
            debug_dirs: tuple[str, ...] = ()) -> ProcessStacks:
    """Every thread of ``pid``, with its user stack; ProcessNotFound when it is not there."""
    started = time.monotonic()
    reader = Reader(pid, debug_dirs)
    try:
        result = ProcessStacks(pid, procfs.comm(pid), reader.read(sorted(procfs.tasks(pid)), consistent, max_depth))
    finally:
        reader.close()
    result.notes = reader.notes
    result.took_s = time.monotonic() - started
    return result


__all__ = ["ProcessStacks", "Reader", "ThreadStack", "UnreadableMemory", "collect"]
