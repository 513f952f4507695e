"""The pages sampler makes in the target for its in-process probes (issue 36): a code page within
reach of a rel32 jump from the probed module (±2 GiB), and a data area shared with sampler (a memfd
made by the target, mapped by both). Each is made by the target's own system calls (inject.py),
both memfds, so that /proc/PID/maps names them (``/memfd:sampler-code (deleted)``, ``...-data``)
on every kernel (PR_SET_VMA_ANON_NAME needs CONFIG_ANON_VMA_NAME, which this host's kernel lacks),
and sampler writes the code through its own mapping of it. Nothing of the target's own memory is
written for them: the names the calls read are written into a scratch page of sampler's.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass

from sampler.backends.ptrace.inject import (
    CLOSE,
    FTRUNCATE,
    MAP_ANONYMOUS,
    MAP_FIXED_NOREPLACE,
    MAP_PRIVATE,
    MAP_SHARED,
    MEMFD_CREATE,
    MFD_CLOEXEC,
    MMAP,
    MUNMAP,
    PROT_EXEC,
    PROT_READ,
    PROT_WRITE,
    InjectionError,
    Injector,
    c_string,
)
from sampler.backends.ptrace.memory import Memory
from sampler.target import procfs

PAGE = 4096
REACH = (1 << 31) - (1 << 20)
"""How far from the probed code the code page may be: a rel32 jump's ±2 GiB, less a margin."""
CODE_NAME = "sampler-code"
DATA_NAME = "sampler-data"
STOPS_NAME = "sampler-stops"


@dataclass
class Area:
    address: int
    size: int
    kind: str
    """"code", "data" or "stops"."""
    local: mmap.mmap | None = None
    """The area as sampler maps it (None for the stops' page, written through /proc/PID/mem)."""


class Areas:
    """The pages sampler made in one process."""

    def __init__(self, pid: int, injector: Injector, memory: Memory) -> None:
        self.pid = pid
        self.injector = injector
        self.memory = memory
        self.made: list[Area] = []
        self._scratch: int | None = None

    def code_page(self, near: int, size: int = PAGE) -> Area:
        """Pages the target can run, within a rel32 jump of ``near``: a memfd the target maps read
        and execute (never write), and sampler maps to write the code into."""
        return self._shared(CODE_NAME, size, near, PROT_READ | PROT_EXEC, "code")

    def data_area(self, near: int, size: int) -> Area:
        """A memfd of ``size`` bytes the target and sampler both map read and write, near ``near``."""
        return self._shared(DATA_NAME, size, near, PROT_READ | PROT_WRITE, "data")

    def stops_page(self, near: int) -> Area:
        """A page the target can run, within a rel32 jump of ``near``, for filtering probes' stops: a memfd
        mapped private, so that sampler writes it through /proc/PID/mem as it writes an int3 into the
        program's code (and the guardian, and the cleaning of a forked child's copy, as well)."""
        return self._shared(STOPS_NAME, PAGE, near, PROT_READ | PROT_EXEC, "stops", private=True)

    def _shared(self, name: str, size: int, near: int, protection: int, kind: str, private: bool = False) -> Area:
        """A memfd named ``name`` (so /proc/PID/maps names it: ``/memfd:sampler-code (deleted)``),
        mapped shared by the target within REACH of ``near`` and by sampler; the target's
        descriptor is closed once mapped (no file of sampler's left among its own)."""
        size = _pages(size)
        fd = self.injector.checked(MEMFD_CREATE, self._string(name), MFD_CLOEXEC)
        try:
            self.injector.checked(FTRUNCATE, fd, size)
            where = free_gap(procfs.maps(self.pid), near, size)
            if where is None:
                raise InjectionError(f"no free address within 2 GiB of {near:#x} in process {self.pid}")
            got = self.injector.checked(MMAP, where, size, protection,
                                        (MAP_PRIVATE if private else MAP_SHARED) | MAP_FIXED_NOREPLACE, fd, 0)
            if got != where:
                self.injector.call(MUNMAP, got, size)
                raise InjectionError(f"the {kind} pages came at {got:#x}, not at {where:#x}")
            local_fd = os.open(f"/proc/{self.pid}/fd/{fd}", os.O_RDWR | os.O_CLOEXEC) if not private else -1
        finally:
            self.injector.call(CLOSE, fd)
        if private:
            area = Area(got, size, kind)
            self.made.append(area)
            return area
        try:
            local = mmap.mmap(local_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(local_fd)
        area = Area(got, size, kind, local)
        self.made.append(area)
        return area

    def remove(self, area: Area) -> None:
        """The area unmapped in the target (and sampler's own view of it closed)."""
        self.injector.checked(MUNMAP, area.address, area.size)
        if area.local is not None:
            area.local.close()
        self.made.remove(area)

    def _string(self, text: str) -> int:
        """``text`` in the target's memory for a call to read: in a scratch page of sampler's (made
        once, anonymous, taken away with the areas), never in the target's own memory."""
        if self._scratch is None:
            self._scratch = self.injector.checked(MMAP, 0, PAGE, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        self.memory.write(self._scratch, c_string(text)[:PAGE])
        return self._scratch

    def close(self) -> None:
        """The scratch page away (the areas stay until ``remove``)."""
        if self._scratch is not None:
            self.injector.call(MUNMAP, self._scratch, PAGE)
            self._scratch = None


def free_gap(maps: list[procfs.Mapping], near: int, size: int) -> int | None:
    """A page-aligned address where ``size`` bytes are free, within REACH of ``near`` (the nearest
    such), with a free page on either side (nothing of ours touches the target's own mappings)."""
    spans = sorted((m.start, m.end) for m in maps)
    best: int | None = None
    previous_end = PAGE * 16  # (the lowest pages are never used)
    for start, end in [*spans, (1 << 47, 1 << 47)]:
        first = _align_up(max(previous_end + PAGE, near - REACH))
        last = _align_down(min(start - PAGE - size, near + REACH - size))
        previous_end = max(previous_end, end)
        if first > last:
            continue
        candidate = min(max(_align_down(near), first), last)
        if best is None or abs(candidate - near) < abs(best - near):
            best = candidate
    return best


def _align_up(address: int) -> int:
    return (address + PAGE - 1) // PAGE * PAGE


def _pages(size: int) -> int:
    return (size + PAGE - 1) // PAGE * PAGE


def _align_down(address: int) -> int:
    return address // PAGE * PAGE
