"""The pages sampler makes in the target for its in-process probes (issue 36): a code page within
reach of a rel32 jump from the probed module (±2 GiB), and a data area shared with sampler (a memfd
made by the target, mapped by both). Each is made by the target's own system calls (inject.py),
both memfds, so that /proc/PID/maps names them (``/memfd:sampler-code (deleted)``, ``...-data``)
on every kernel (PR_SET_VMA_ANON_NAME needs CONFIG_ANON_VMA_NAME, which this host's kernel lacks),
and sampler writes the code through its own mapping of it. Nothing of the target's own memory is
written for them: the names the calls read are written into a scratch page of sampler's.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
from dataclasses import dataclass

from sampler.printable import printable
from sampler.process.inject import (
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
from sampler.process.memory import Memory
from sampler.target import procfs

PAGE = 4096
REACH = (1 << 31) - (1 << 20)
"""How far from the probed code the code page may be: a rel32 jump's ±2 GiB, less a margin."""
CODE_NAME = "sampler-code"
DATA_NAME = "sampler-data"
STOPS_NAME = "sampler-stops"
MFD_ALLOW_SEALING = 2
SYS_PIDFD_OPEN, SYS_PIDFD_GETFD = 434, 438
_libc = ctypes.CDLL(None, use_errno=True)


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
        descriptor is closed once mapped (no file of sampler's left among its own).

        Sampler takes the very file the target holds (pidfd_getfd), never a path to it (a
        clone(CLONE_FILES) sibling of the target runs while its threads are held, and can put another
        file at the descriptor's number: /proc/PID/fd/N reopened as root was a root-owned file), and
        writes nothing before it checked the file is the memfd made for it (``_not_ours``), sealed so that
        the target can neither shrink nor grow it (a ring cut short would be SIGBUS in sampler)."""
        size = _pages(size)
        fd = self.injector.checked(MEMFD_CREATE, self._string(name), MFD_CLOEXEC | MFD_ALLOW_SEALING)
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
            try:
                local_fd = take_memfd(self.pid, fd, name, got, size)
            except InjectionError:
                self.injector.call(MUNMAP, got, size)
                raise
        finally:
            self.injector.call(CLOSE, fd)
        if private:
            os.close(local_fd)
            area = Area(got, size, kind)
            self.made.append(area)
            return area
        try:
            local = mmap.mmap(local_fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            self.injector.call(MUNMAP, got, size)
            raise InjectionError(f"no in-process probe: sampler cannot map its {name} pages ({e.strerror})") from None
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
        """``text`` in the target's memory for a call to read (``scratch``)."""
        return self.scratch(c_string(text))

    def scratch(self, data: bytes) -> int:
        """``data`` in the target's memory for a call to read or write into: in a scratch page of sampler's
        (made once, anonymous, taken away by ``close``), never in the target's own memory."""
        if self._scratch is None:
            self._scratch = self.injector.checked(MMAP, 0, PAGE, PROT_READ | PROT_WRITE,
                                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        self.memory.write(self._scratch, data[:PAGE])
        return self._scratch

    def close(self) -> None:
        """The scratch page away (the areas stay until ``remove``)."""
        if self._scratch is not None:
            self.injector.call(MUNMAP, self._scratch, PAGE)
            self._scratch = None


def take_memfd(pid: int, fd: int, name: str, address: int, size: int) -> int:
    """Sampler's own descriptor of the file process ``pid`` holds at ``fd`` (pidfd_getfd: the file
    itself, whatever its number names by then), once it is checked to be the memfd ``name`` that the
    target mapped at ``address``, ``size`` bytes, then sealed against shrinking and growing (and
    against more seals). InjectionError, with nothing written, when it is anything else."""
    pidfd = _libc.syscall(SYS_PIDFD_OPEN, pid, 0)  # (os.pidfd_open is missing where Python was built on older
    if pidfd < 0:                                   # kernel headers: RHEL 8's python39)
        raise InjectionError(f"no in-process probe: pidfd_open of process {pid} failed "
                             f"({os.strerror(ctypes.get_errno())}): sampler takes the memory it shares with the "
                             "target only by descriptor (Linux 5.6 and later)")
    try:
        local = _pidfd_getfd(pidfd, fd)
    finally:
        os.close(pidfd)
    try:
        why = _not_ours(local, pid, name, address, size)
    except OSError as e:
        why = f"it could not be checked ({e.strerror})"
    except BaseException:
        os.close(local)
        raise
    if why:
        os.close(local)
        raise InjectionError(f"no in-process probe: the file process {pid} holds for sampler's {name} pages is not "
                             f"the memfd sampler had it make ({why}): nothing was written into it")
    return local


def _pidfd_getfd(pidfd: int, fd: int) -> int:
    got = _libc.syscall(SYS_PIDFD_GETFD, pidfd, fd, 0)
    if got < 0:
        number = ctypes.get_errno()
        if number == errno.ENOSYS:
            raise InjectionError("no in-process probe: this kernel has no pidfd_getfd (Linux 5.6 and later), the "
                                 "one way sampler takes the memory it shares with the target (never by path)")
        raise InjectionError(f"no in-process probe: pidfd_getfd failed ({os.strerror(number)})")
    return int(got)


def _not_ours(local: int, pid: int, name: str, address: int, size: int) -> str:
    """Why the file at ``local`` is not the memfd ``name`` mapped at ``address`` ('' when it is); it is
    sealed when it is."""
    link = os.readlink(f"/proc/self/fd/{local}")
    if link != f"/memfd:{name} (deleted)":
        return f"it is {printable(link)}"
    try:
        seals = fcntl.fcntl(local, fcntl.F_GET_SEALS)
    except OSError:
        return "it takes no seals: not a memfd"
    if seals:
        return f"it was sealed already ({seals:#x})"
    info = os.fstat(local)
    mapped = next((m for m in procfs.maps(pid) if m.start == address), None)
    if mapped is None or mapped.inode != info.st_ino or \
            (mapped.device and mapped.device != f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}"):
        return f"the pages at {address:#x} are not of it"
    ours = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL
    fcntl.fcntl(local, fcntl.F_ADD_SEALS, ours)
    seals = fcntl.fcntl(local, fcntl.F_GET_SEALS)
    if seals != ours:  # (another seal added between the look and ours: a write seal would fail the map)
        return f"it was sealed meanwhile ({seals:#x})"
    if os.fstat(local).st_size != size:  # (cut or grown before the seals went on)
        return f"its size is {os.fstat(local).st_size}, not {size}"
    return ""


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
