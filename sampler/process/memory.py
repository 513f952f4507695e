"""Reading (and, for the breakpoint byte only, writing) the target's memory via /proc/PID/mem.

Every access goes through descriptors opened once, at attach: a /proc/PID/mem descriptor
keeps the address space the process had when it was opened, whatever the PID runs later.
Nothing here reaches a process by its PID again (process_vm_readv/writev do, and after an
exec of the target they reach the new program: a process sharing the old memory by
clone(CLONE_VM) could then have sampler read and write a set-user-ID program's memory for it).
When that address space is gone (the process exited, or exec'd and nothing shares the old
memory), a read gives no bytes at all: ``check_alive`` says which.
"""

from __future__ import annotations

import bisect
import os
import threading
import time

from sampler.errors import DebuggerError, ProcessNotFound, TargetExeced, TargetExited
from sampler.process.reads import UnreadableMemory
from sampler.target import permission, procfs
from sampler.target.procfs import exe_path, status

LAST_ADDRESS = 1 << 63
"""/proc/PID/mem takes offsets below this (off_t); user space on x86-64 ends far lower."""
MAX_READ = 1 << 20
SPAN = 4096
"""Reads whose bytes all lie within this many bytes are made as one read of the span (a
pread of 4 KiB costs what one of 8 bytes does: about 1.8 us from Python)."""

class MemoryHang(UnreadableMemory):
    """A read of the target's memory did not return in time (guard.py)."""


class Abandoned(BaseException):
    """Raised in a helper thread that was left waiting on a read (guard.py), when the read
    returns at last: it stops there, before it touches anything the tracing thread uses."""


helping = threading.local()
"""In a helper thread of guard.py: ``helping.left`` is an Event set once it was left."""


def check_left() -> None:
    """After every read and write: a helper that was left stops (Abandoned)."""
    left = getattr(helping, "left", None)
    if left is not None and left.is_set():
        raise Abandoned()


class Memory:
    def __init__(self, pid: int, writable: bool = False) -> None:
        self.pid = pid
        try:
            self.fd = procfs.open_mem(pid, writable)
        except (FileNotFoundError, ProcessLookupError):  # gone, or a zombie by now
            raise TargetExited(f"target process {pid} exited") from None
        except PermissionError:
            raise permission.denied(pid, "read the memory of") from None
        self.hung: set[int] = set()
        """Pages a read of which did not return (guard.py): not read again."""
        self.inflight = (0, 0)
        """(address, size) of the read being made (the one left waiting, when it did not return)."""
        self.protections: Protections | None = None
        """Writable (a run with breakpoints): the mappings of this same memory, opened with it,
        for the instructions sampler runs for a thread (emulate.py)."""
        if writable:
            try:
                self.protections = Protections(pid)
            except BaseException:
                os.close(self.fd)
                raise

    def read(self, address: int, size: int) -> bytes:
        if address <= 0:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (null pointer)")
        if address + size > LAST_ADDRESS or not 0 < size <= MAX_READ:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (out of the address space)")
        if self.hung and self.refuses(address, size):
            raise MemoryHang(f"memory read at {address:#x} did not return before: not read again")
        self.inflight = (address, size)
        try:
            data = os.pread(self.fd, size, address)
        except OSError:  # EIO: nothing mapped there (a bad pointer, the common case: no /proc read)
            check_left()
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}") from None
        check_left()
        if len(data) != size:
            if not data:  # end of file, not EIO: the address space is gone (an exit or an exec)
                self.check_alive()
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
        return data

    def read_many(self, wanted: list[tuple[int, int]]) -> list[bytes | None]:
        """Several reads; None for each that cannot be read. Reads that lie within SPAN bytes
        of each other are made as one read of the span (one system call), and one by one when
        that fails (the span crosses memory that is not mapped)."""
        if not wanted:
            return []
        if len(wanted) > 1:
            low = min(address for address, _ in wanted)
            high = max(address + size for address, size in wanted)
            if low > 0 and high - low <= SPAN:
                try:
                    data = self.read(low, high - low)
                except UnreadableMemory:
                    pass
                else:
                    return [data[address - low:address - low + size] for address, size in wanted]
        results: list[bytes | None] = []
        for address, size in wanted:
            try:
                results.append(self.read(address, size))
            except UnreadableMemory:
                results.append(None)
        return results

    def refuses(self, address: int, size: int) -> bool:
        """A read there would touch a page whose read did not return before."""
        return any(page in self.hung for page in range(address >> 12, ((address + max(size, 1) - 1) >> 12) + 1))

    def mark_hung(self) -> None:
        """The read in flight did not return: its pages are not read again."""
        address, size = self.inflight
        if 0 < size <= MAX_READ:
            self.hung.update(range(address >> 12, ((address + size - 1) >> 12) + 1))

    def batch(self, sizes: list[int]) -> Batch:
        """Reads of these sizes, to be made again and again at other addresses."""
        return Batch(self, sizes)

    def write(self, address: int, data: bytes) -> None:
        """Only ever used for the breakpoint byte and for putting the original back."""
        try:
            written = os.pwrite(self.fd, data, address)
        except OSError:
            written = -1
        if written != len(data):
            self.check_alive()
            raise DebuggerError(f"cannot write {len(data)} byte(s) at {address:#x} of process {self.pid}")

    def check_alive(self) -> None:
        """Raise TargetExited when the process is gone, or going (an exiting process has
        dropped its memory, no VmRSS in its status, before it becomes a zombie), and
        TargetExeced when it lives on with other memory: it exec'd, and the address space
        this descriptor holds is gone (a read of it gives no bytes at all)."""
        try:
            fields = status(self.pid)
        except ProcessNotFound:
            fields = {}
        if fields.get("State", "Z").startswith(("Z", "X")) or "VmRSS" not in fields:
            raise TargetExited(f"target process {self.pid} exited")
        if self.gone():
            try:
                program = exe_path(self.pid)
            except ProcessNotFound:
                program = "another program"
            raise TargetExeced(f"target process {self.pid} ran {program} with exec: the memory sampler read "
                               "went with the old program")

    def gone(self) -> bool:
        """True when the address space this descriptor holds has no process left in it."""
        for address in (0x1000, 0x10000, LAST_ADDRESS - 4096):  # any offset: EIO if unmapped, b"" if gone
            try:
                return os.pread(self.fd, 1, address) == b""
            except OSError:
                continue
        return False

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.protections is not None:
            self.protections.close()


class Batch:
    """Reads of fixed sizes made at every hit (a read plan's level), each at an address given
    then: one pread of the span that holds them all when it is no longer than SPAN, else one
    pread each."""

    def __init__(self, memory: Memory, sizes: list[int]) -> None:
        self.memory = memory
        self.sizes = sizes
        self.count, self.total = len(sizes), sum(sizes)
        self._size = sizes[0] if self.count == 1 else 0

    def read(self, addresses: list[int]) -> bytes | None:
        """The bytes of every read, one after the other; None unless all of them were read
        (then the caller reads them the careful way, one by one)."""
        memory = self.memory
        fd = memory.fd
        if memory.hung and any(memory.refuses(a, n) for a, n in zip(addresses, self.sizes)):
            return None
        try:
            if self.count == 1:
                memory.inflight = (addresses[0], self._size)
                data = os.pread(fd, self._size, addresses[0])
                check_left()
                return data if len(data) == self._size else None
            low = min(addresses)
            high = max(address + size for address, size in zip(addresses, self.sizes))
            if high - low <= SPAN:
                memory.inflight = (low, high - low)
                span = os.pread(fd, high - low, low)
                check_left()
                if len(span) != high - low:
                    return None
                return b"".join(span[address - low:address - low + size]
                                for address, size in zip(addresses, self.sizes))
            parts = []
            for address, size in zip(addresses, self.sizes):
                memory.inflight = (address, size)
                parts.append(os.pread(fd, size, address))
        except (OSError, OverflowError):
            check_left()
            return None
        check_left()
        data = b"".join(parts)
        return data if len(data) == self.total else None


REFRESH_S = 0.05
"""Protections: the least time between two reads of /proc/PID/maps (a read costs 20-300 us,
and 20 times that is waited at least: a process of 60,000 mappings is read less often)."""
MAX_MAPS = 16 << 20
"""Protections: no more of /proc/PID/maps is read than this (65,530 mappings, the kernel's
default limit, take about 7 MB with paths)."""


class Protections:
    """What the memory a Memory holds lets the target's own instructions do, for running an
    instruction for a thread (emulate.py): /proc/PID/maps opened with it keeps the same address
    space (read again at offset 0, it lists that memory's mappings as they are now). Read again
    when an address is in none of the mappings read, or where the access is not allowed, at
    most every REFRESH_S; in between such an access is refused (the instruction is then
    single-stepped, which is always right). A mapping made read-only since the last read is
    still taken as writable: the write then lands in the target's private copy (the kernel's
    forced write), where the CPU would have faulted."""

    def __init__(self, pid: int) -> None:
        try:
            self.fd = os.open(f"/proc/{pid}/maps", os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError):
            raise TargetExited(f"target process {pid} exited") from None
        except PermissionError:
            raise permission.denied(pid, "read the memory of") from None
        self._starts: list[int] = []
        self._regions: list[tuple[int, int, bytes]] = []
        self._next = 0.0
        self.reads = 0
        """How often /proc/PID/maps was read (for the tests)."""

    def allows(self, address: int, size: int, access: bytes) -> bool:
        """True when SIZE bytes at ADDRESS may be read (b"r") or written (b"w") by the target's own
        instructions, as far as the mappings last read say."""
        if self._allowed(address, size, access):
            return True
        if time.monotonic() < self._next:
            return False
        self.refresh()
        return self._allowed(address, size, access)

    def _allowed(self, address: int, size: int, access: bytes) -> bool:
        index = bisect.bisect_right(self._starts, address) - 1
        end = address + size
        while 0 <= index < len(self._regions):
            start, stop, perms = self._regions[index]
            if not start <= address < stop or access not in perms:
                return False
            if end <= stop:
                return True
            address, index = stop, index + 1  # the next mapping must start where this one ends
        return False

    def refresh(self) -> None:
        began = time.monotonic()
        chunks, total = [], 0
        while total < MAX_MAPS:
            try:
                chunk = os.pread(self.fd, 1 << 16, total)
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        regions = []
        for line in b"".join(chunks).split(b"\n"):
            fields = line.split(b" ", 2)
            if len(fields) < 2 or b"-" not in fields[0]:
                continue
            low, _, high = fields[0].partition(b"-")
            try:
                regions.append((int(low, 16), int(high, 16), fields[1][:3]))
            except ValueError:
                continue
        if total >= MAX_MAPS and regions:
            regions.pop()  # the last line may be cut
        regions.sort()
        self._regions = regions
        self._starts = [start for start, _, _ in regions]
        self.reads += 1
        now = time.monotonic()
        self._next = now + max(REFRESH_S, 20 * (now - began))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
