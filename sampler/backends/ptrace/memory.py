"""Reading (and, for the breakpoint byte only, writing) the target's memory via /proc/PID/mem."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable

from sampler.errors import DebuggerError, ProcessNotFound, TargetExited
from sampler.target import permission
from sampler.target.procfs import status

LAST_ADDRESS = 1 << 63
"""/proc/PID/mem takes offsets below this (off_t); user space on x86-64 ends far lower."""
MAX_READ = 1 << 20

Read = Callable[[int, int], bytes]
"""How everything above this module reads the target: ``read(address, size)`` gives the
bytes or raises UnreadableMemory (Memory.read, a read plan's snapshot, a test's dictionary)."""


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


_libc = ctypes.CDLL(None, use_errno=True)
_readv = _libc.process_vm_readv
_readv.argtypes = [ctypes.c_int, ctypes.POINTER(_Iovec), ctypes.c_ulong, ctypes.POINTER(_Iovec),
                   ctypes.c_ulong, ctypes.c_ulong]
_readv.restype = ctypes.c_ssize_t


_writev = _libc.process_vm_writev
_writev.argtypes = _readv.argtypes
_writev.restype = ctypes.c_ssize_t


def read_as_cpu(pid: int, address: int, size: int) -> bytes | None:
    """SIZE bytes of the target's memory as its own instructions could read them (None where
    they would fault): process_vm_readv honours the pages' protections, /proc/PID/mem does not."""
    buffer = ctypes.create_string_buffer(size)
    local, remote = _Iovec(ctypes.addressof(buffer), size), _Iovec(address, size)
    try:
        done = _readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
    except ctypes.ArgumentError:
        return None
    return buffer.raw if done == size else None


def write_as_cpu(pid: int, address: int, data: bytes) -> bool:
    """Write as the target's own instruction would (process_vm_writev: a read-only page is
    refused, as the CPU would fault): only ever the stack slot of an emulated push."""
    buffer = ctypes.create_string_buffer(data, len(data))
    local, remote = _Iovec(ctypes.addressof(buffer), len(data)), _Iovec(address, len(data))
    try:
        return bool(_writev(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) == len(data))
    except ctypes.ArgumentError:
        return False


class UnreadableMemory(Exception):
    """An address the target has not mapped (a per-sample problem, not a session error)."""


class Memory:
    def __init__(self, pid: int, writable: bool = False) -> None:
        self.pid = pid
        try:
            self.fd = os.open(f"/proc/{pid}/mem", os.O_RDWR if writable else os.O_RDONLY)
        except (FileNotFoundError, ProcessLookupError):  # gone, or a zombie by now
            raise TargetExited(f"target process {pid} exited") from None
        except PermissionError:
            raise permission.denied(pid, "read the memory of") from None

    def read(self, address: int, size: int) -> bytes:
        if address <= 0:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (null pointer)")
        if address + size > LAST_ADDRESS or not 0 < size <= MAX_READ:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (out of the address space)")
        try:
            data = os.pread(self.fd, size, address)
        except OSError:  # EIO: nothing mapped there (a bad pointer, the common case: no /proc read)
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}") from None
        if len(data) != size:
            if not data:  # end of file, not EIO: the process has dropped its memory (exit mid-attach)
                self.check_alive()
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
        return data

    def read_many(self, wanted: list[tuple[int, int]]) -> list[bytes | None]:
        """Several reads in one system call (process_vm_readv); None for each that cannot be
        read. The kernel stops at the first that fails: the rest are read one by one."""
        count = len(wanted)
        if count == 1:  # a pread costs less than building a readv's vectors
            try:
                return [self.read(*wanted[0])]
            except UnreadableMemory:
                return [None]
        if count == 0:
            return []
        total = sum(size for _, size in wanted)
        buffer = ctypes.create_string_buffer(total)
        local, remote = (_Iovec * count)(), (_Iovec * count)()
        at = ctypes.addressof(buffer)
        for index, (address, size) in enumerate(wanted):
            local[index].base, local[index].length = at, size
            remote[index].base, remote[index].length = address, size
            at += size
        done = _readv(self.pid, local, count, remote, count, 0)
        raw = buffer.raw
        results: list[bytes | None] = []
        at = 0
        for address, size in wanted:
            if done >= at + size:
                results.append(raw[at:at + size])
            else:
                try:
                    results.append(self.read(address, size))
                except UnreadableMemory:
                    results.append(None)
            at += size
        return results

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
        """Raise TargetExited when the process is gone, or going: an exiting process has
        dropped its memory (no VmRSS in its status) before it becomes a zombie."""
        try:
            fields = status(self.pid)
        except ProcessNotFound:
            fields = {}
        if fields.get("State", "Z").startswith(("Z", "X")) or "VmRSS" not in fields:
            raise TargetExited(f"target process {self.pid} exited")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class Batch:
    """Reads of fixed sizes made at every hit (a read plan's level): the buffer and the
    vectors are made once, so that a hit sets the addresses and makes one system call."""

    def __init__(self, memory: Memory, sizes: list[int]) -> None:
        self.memory = memory
        self.count, self.total = len(sizes), sum(sizes)
        self._buffer = ctypes.create_string_buffer(max(self.total, 1))
        self._local, self._remote = (_Iovec * self.count)(), (_Iovec * self.count)()
        at = ctypes.addressof(self._buffer)
        for index, size in enumerate(sizes):
            self._local[index].base, self._local[index].length = at, size
            self._remote[index].length = size
            at += size
        self._size = sizes[0] if self.count == 1 else 0

    def read(self, addresses: list[int]) -> bytes | None:
        """The bytes of every read, one after the other; None unless all of them were read
        (then the caller reads them the careful way, one by one)."""
        if self.count == 1:  # a pread costs less than process_vm_readv's vectors
            try:
                data = os.pread(self.memory.fd, self._size, addresses[0])
            except (OSError, OverflowError):
                return None
            return data if len(data) == self._size else None
        remote = self._remote
        for index, address in enumerate(addresses):
            remote[index].base = address
        try:
            done = _readv(self.memory.pid, self._local, self.count, remote, self.count, 0)
        except ctypes.ArgumentError:
            return None
        return self._buffer.raw[:self.total] if done == self.total else None
