"""Go's goroutines: every goroutine of ``runtime.allgs`` with its status, wait reason and stack, as
a Go panic and Delve's `goroutines -t` show them, not only the OS threads.

The layout of ``runtime.g`` (and of ``runtime.m``, for the thread a goroutine runs on) comes from
the program's DWARF, so any Go version that writes it is read; a program without DWARF (Debian
strips its Go binaries) has no goroutines here, and says so. A goroutine that waits keeps where it
stopped in ``g.sched`` (its stack, instruction and frame pointers): it is unwound from there with
nothing stopped (it does not run while it waits); one that runs, or is in a system call, has the
stack of its thread. A goroutine whose status or saved pointers changed while it was read is read
again, once, then said torn. Everything read is the target's: counts and strings are bounded.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.types import Array, Pointer, Scalar, Struct, Type
from sampler.process.reads import Read, UnreadableMemory
from sampler.unwind.code import CodeMap
from sampler.unwind.frames import Stack
from sampler.unwind.walk import RBP, RIP, RSP, unwind

MAX_GOROUTINES = 10_000
TIME_BUDGET_S = 5.0
"""The most the goroutines' reading, and then their unwinding, may take (10,000 goroutines of 50
frames took 9.9 s): the rest are said not read."""
MAX_G_SIZE = 64 << 10
"""runtime.g's size taken from DWARF, at most (it is under 500 bytes in every Go)."""
"""Goroutines read (a server may have a million: the summary says how many more there are)."""
MAX_REASON = 64
POINTERS_AT_ONCE = 512
"""runtime.allgs' pointers read in one read (a page)."""
STATUSES = {0: "idle", 1: "runnable", 2: "running", 3: "syscall", 4: "waiting", 5: "moribund", 6: "dead",
            7: "enqueue", 8: "copystack", 9: "preempted"}
"""runtime/runtime2.go's _G* values (0x1000, _Gscan, is a flag on them)."""
RUNNING, SYSCALL, DEAD = 2, 3, 6


@dataclass
class Goroutine:
    goid: int
    status: str
    wait_reason: str | None
    thread: int | None
    """The thread it runs on (running, or in a system call)."""
    stack: Stack | None
    created_by: tuple[str | None, str | None, int | None] | None = None
    """The function, file and line of the go statement that started it."""
    torn: bool = False


class Layout:
    """Where runtime.g's fields are, from DWARF."""

    def __init__(self, g: Struct, m: Struct | None) -> None:
        if not 0 < g.size <= MAX_G_SIZE:
            raise ValueError(f"runtime.g of {g.size} bytes in the program's DWARF")
        self.size = g.size
        self.goid = _field(g, "goid")
        self.status = _field(g, "atomicstatus", "value")
        self.reason = _field(g, "waitreason")
        self.sched_sp = _field(g, "sched", "sp")
        self.sched_pc = _field(g, "sched", "pc")
        self.sched_bp = _field(g, "sched", "bp")
        self.syscall_sp = _field(g, "syscallsp")
        self.syscall_pc = _field(g, "syscallpc")
        self.gopc = _field(g, "gopc")
        self.m = _field(g, "m")
        self.procid = _field(m, "procid") if m is not None else None
        if None in (self.goid, self.status, self.sched_sp, self.sched_pc):
            raise ValueError("runtime.g has no goid, atomicstatus or sched in this program's DWARF")


def _field(struct_type: Struct | None, *path: str) -> tuple[int, int] | None:
    """(offset, size) of a (nested) field; None when the DWARF has no such field."""
    offset = 0
    current_type: Type | None = struct_type
    for name in path:
        if not isinstance(current_type, Struct):
            return (offset, current_type.size) if current_type is not None and name == "value" else None
        found = current_type.members.get(name)
        if found is None:
            return None
        offset, current_type = offset + found.offset, found.type
    if isinstance(current_type, Struct) and "value" in current_type.members and path[-1] != "value":
        inner = current_type.members["value"]  # Go 1.20's atomic.Uint32 and friends
        return offset + inner.offset, inner.type.size
    return (offset, current_type.size) if current_type is not None else None


def _target(t: Type | None) -> Type | None:
    return t.target if isinstance(t, Pointer) else None


class Reader:
    """The goroutines of one Go program: its layout read once, its goroutines at each call."""

    def __init__(self, debug: Debug, address_of: Callable[[str], int | None], read: Read) -> None:
        allgs = debug.global_variable("runtime.allgs")
        if allgs is None:
            raise ValueError("no runtime.allgs in the program's DWARF")
        array = allgs.type.members.get("array") if isinstance(allgs.type, Struct) else None
        g = _target(_target(array.type)) if array is not None else None
        if not isinstance(g, Struct):
            raise ValueError("runtime.allgs is not a slice of *runtime.g in the program's DWARF")
        m_member = g.members.get("m")
        m_type = _target(m_member.type) if m_member is not None else None
        self.layout = Layout(g, m_type if isinstance(m_type, Struct) else None)
        where = address_of("runtime.allgs")
        if where is None:
            raise ValueError("the program's symbols do not say where runtime.allgs is")
        self.allgs = where
        self.read = read
        self.reasons = self._reasons(debug, address_of)

    def _reasons(self, debug: Debug, address_of: Callable[[str], int | None]) -> list[str]:
        """runtime.waitReasonStrings, read from the program's memory (each Go version its own)."""
        variable = debug.global_variable("runtime.waitReasonStrings")
        where = address_of("runtime.waitReasonStrings")
        if variable is None or where is None or not isinstance(variable.type, Array) or not variable.type.count:
            return []
        found = []
        for i in range(min(variable.type.count, 256)):
            try:
                pointer, length = struct.unpack("<QQ", self.read(where + 16 * i, 16))
                text = self.read(pointer, min(length, MAX_REASON)).decode("utf-8", "replace") if length else ""
            except (UnreadableMemory, struct.error):
                text = ""
            found.append(text)
        return found

    def snapshot(self) -> tuple[list[tuple[int, bytes]], bool]:
        """Every goroutine that is not dead as its g's bytes now (MAX_GOROUTINES at most, read in
        TIME_BUDGET_S at most), and whether that is all of them: what --consistent reads while every
        thread is held, before it lets them go and unwinds."""
        pointer, length, _ = struct.unpack("<QQQ", self.read(self.allgs, 24))
        total = min(length, 10_000_000)  # (a count the target says: bounded by the loop's deadline too)
        raws: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + TIME_BUDGET_S
        for first in range(0, total, POINTERS_AT_ONCE):
            try:  # the list's pointers a page or so at a time (one read each), then each g
                count = min(POINTERS_AT_ONCE, total - first)
                gs = struct.unpack(f"<{count}Q", self.read(pointer + 8 * first, 8 * count))
            except UnreadableMemory:
                return raws, False
            for g in gs:
                if len(raws) >= MAX_GOROUTINES or time.monotonic() > deadline:
                    return raws, False
                if not g:  # (the runtime's list holds no nil: what follows one is not believed)
                    return raws, False
                try:
                    raw = self.read(g, self.layout.size)
                except UnreadableMemory:
                    continue
                if self._int(raw, self.layout.status) & ~0x1000 != DEAD:
                    raws.append((g, raw))
        return raws, total == length

    def status(self, raw: bytes) -> int:
        """A g's status (its bytes as ``snapshot`` gives them), the scan bit cleared."""
        return self._int(raw, self.layout.status) & ~0x1000

    def goroutines(self, code: CodeMap, running: dict[int, tuple[int, Stack]], max_depth: int,
                   raws: list[tuple[int, bytes]] | None = None, complete: bool = True
                   ) -> tuple[list[Goroutine], bool]:
        """Every goroutine that is not dead, with its stack (from ``raws``, a snapshot's, or read now),
        and whether that is every one. ``running``: the goroutine (its g) each stopped thread ran, with that
        thread and its stack. A goroutine read now whose status or saved pointers changed while it
        was unwound is read again, once, then said torn; TIME_BUDGET_S in all."""
        fixed = raws is not None
        if raws is None:
            raws, complete = self.snapshot()
        found: list[Goroutine] = []
        deadline = time.monotonic() + TIME_BUDGET_S
        for g, raw in raws:
            if time.monotonic() > deadline:
                return found, False
            try:
                found.append(self._one(g, raw, code, running, max_depth, fixed))
            except UnreadableMemory:
                continue
        return found, complete

    def _one(self, g: int, raw: bytes, code: CodeMap, running: dict[int, tuple[int, Stack]], max_depth: int,
             fixed: bool) -> Goroutine:
        goroutine = self._from(g, raw, self._int(raw, self.layout.status) & ~0x1000, code, running, max_depth)
        if fixed:
            return goroutine  # (read while every thread was held)
        for _ in range(2):
            again = self.read(g, self.layout.size)
            if all(self._int(again, at) == self._int(raw, at) for at in
                   (self.layout.status, self.layout.sched_sp, self.layout.sched_pc)):
                return goroutine
            raw = again
            goroutine = self._from(g, raw, self._int(raw, self.layout.status) & ~0x1000, code, running, max_depth)
        goroutine.torn = True
        return goroutine

    def _from(self, g: int, raw: bytes, status: int, code: CodeMap, running: dict[int, tuple[int, Stack]],
              max_depth: int) -> Goroutine:
        layout = self.layout
        reason = None
        if status == 4 and layout.reason is not None:
            index = self._int(raw, layout.reason)
            reason = self.reasons[index] if index < len(self.reasons) and self.reasons[index] else f"reason {index}"
        thread = None
        stack: Stack | None = None
        if g in running:  # a thread ran it when it was stopped: that thread's stack is its stack
            thread, stack = running[g]
        elif status in (RUNNING, SYSCALL) and layout.m is not None and layout.procid is not None:
            thread = self._thread(raw)
        if stack is None and status == RUNNING:
            stack = Stack(ended="it runs, and its thread ran another goroutine when it was read")
        elif stack is None:
            sp, pc = self._int(raw, layout.sched_sp), self._int(raw, layout.sched_pc)
            bp = self._int(raw, layout.sched_bp) if layout.sched_bp is not None else None
            if status == SYSCALL and layout.syscall_sp is not None and layout.syscall_pc is not None:
                sp, pc, bp = self._int(raw, layout.syscall_sp), self._int(raw, layout.syscall_pc), None
            registers = {RIP: pc, RSP: sp}
            if bp:
                registers[RBP] = bp
            stack = unwind(registers, code, self.read, max_depth) if sp and pc else None
        created = None
        goid = self._int(raw, layout.goid)
        if layout.gopc is not None and goid != 1:  # (the main goroutine's: the runtime's start, not said)
            gopc = self._int(raw, layout.gopc)
            module = code.at(gopc - 1) if gopc else None
            if module is not None:
                place = module.place(gopc - 1 - module.bias)
                created = (place.function, place.file, place.line)
        return Goroutine(goid, STATUSES.get(status, f"status {status}"), reason, thread,
                         stack, created)

    def _thread(self, raw: bytes) -> int | None:
        """The thread of the goroutine's m (m.procid)."""
        m = self._int(raw, self.layout.m)
        if not m or self.layout.procid is None:
            return None
        try:
            return int.from_bytes(self.read(m + self.layout.procid[0], self.layout.procid[1]), "little") or None
        except UnreadableMemory:
            return None

    @staticmethod
    def _int(raw: bytes, at: tuple[int, int] | None) -> int:
        if at is None:
            return 0
        offset, size = at
        return int.from_bytes(raw[offset:offset + size], "little")


__all__ = ["Goroutine", "Reader", "Scalar"]
