"""What evaluation reads through: the target's memory and a stopped thread's registers, as
protocols (Delve's EvalScope holds the same three things: Regs, Mem, BinInfo).

The ptrace backend gives them from /proc/PID/mem and PTRACE_GETREGS (process/memory.py,
tracer.py); a read plan's snapshot, a test's dictionary and, later, stacks, in-process probes and
Python values give them from elsewhere. Nothing here knows how the bytes are fetched.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

Read = Callable[[int, int], bytes]
"""How evaluation reads the target: ``read(address, size)`` gives the bytes or raises
UnreadableMemory (Memory.read, a read plan's snapshot, a test's dictionary)."""


class UnreadableMemory(Exception):
    """An address the target has not mapped (a per-sample problem, not a session error)."""


class Batch(Protocol):
    """Reads of fixed sizes made again and again at other addresses (one system call)."""

    def read(self, addresses: list[int]) -> bytes | None: ...


class Memory(Protocol):
    """The target's memory as a read plan uses it."""

    def read(self, address: int, size: int) -> bytes: ...

    def read_many(self, wanted: list[tuple[int, int]]) -> list[bytes | None]: ...

    def batch(self, sizes: list[int]) -> Batch: ...


class Stop(Protocol):
    """A thread stopped at a place: what a scope needs of it. ``registers`` has the fields of
    struct user_regs_struct as attributes (``registers.rdi``)."""

    @property
    def address(self) -> int: ...

    @property
    def registers(self) -> Any: ...
