"""Reading (and, for the breakpoint byte only, writing) the target's memory via /proc/PID/mem."""

from __future__ import annotations

import os

from sampler import permission
from sampler.errors import DebuggerError, ProcessNotFound, TargetExited
from sampler.procfs import is_running

LAST_ADDRESS = 1 << 63
"""/proc/PID/mem takes offsets below this (off_t); user space on x86-64 ends far lower."""
MAX_READ = 1 << 20


class UnreadableMemory(Exception):
    """An address the target has not mapped (a per-sample problem, not a session error)."""


class Memory:
    def __init__(self, pid: int, writable: bool = False) -> None:
        self.pid = pid
        try:
            self._fd = os.open(f"/proc/{pid}/mem", os.O_RDWR if writable else os.O_RDONLY)
        except FileNotFoundError:
            raise ProcessNotFound(f"no process with PID {pid}") from None
        except PermissionError:
            raise permission.denied(pid, "read the memory of") from None

    def read(self, address: int, size: int) -> bytes:
        if address <= 0:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (null pointer)")
        if address + size > LAST_ADDRESS or not 0 < size <= MAX_READ:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x} (out of the address space)")
        try:
            data = os.pread(self._fd, size, address)
        except OSError:
            data = b""
        if len(data) != size:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
        return data

    def write(self, address: int, data: bytes) -> None:
        """Only ever used for the breakpoint byte and for putting the original back."""
        try:
            written = os.pwrite(self._fd, data, address)
        except OSError:
            written = -1
        if written != len(data):
            self.check_alive()
            raise DebuggerError(f"cannot write {len(data)} byte(s) at {address:#x} of process {self.pid}")

    def check_alive(self) -> None:
        """Raise TargetExited when the process is gone (why a read or write failed)."""
        if not is_running(self.pid):
            raise TargetExited(f"target process {self.pid} exited")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
