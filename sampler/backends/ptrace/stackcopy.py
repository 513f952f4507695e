"""``ustack`` at a breakpoint: the top of the thread's stack copied while it waits (one read of
COPY_BYTES), unwound once it went on (unwind/walk.py), folded as flamegraph.pl reads stacks.

The copy holds the frames of all but deep stacks; a frame past it is read from the live memory,
when the thread may have moved on (rare: 64 KiB hold hundreds of frames of most programs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sampler.debuginfo.modules import Modules
from sampler.errors import UnsupportedTarget
from sampler.process.memory import Memory
from sampler.process.reads import UnreadableMemory
from sampler.process.snapshot import RED_ZONE
from sampler.python.interpreter import Interpreter, PyThread
from sampler.python.objects import Unreadable
from sampler.stacks import python
from sampler.target import procfs
from sampler.unwind.code import CodeMap
from sampler.unwind.walk import MAX_DEPTH, RSP, registers_of, unwind

COPY_BYTES = 64 << 10


@dataclass
class Copy:
    registers: dict[int, int]
    at: int
    data: bytes
    python: PyThread | None = None
    """CPython: the thread's Python frames, read while it waited."""


class StackCopier:
    """One process's stacks at its breakpoints."""

    def __init__(self, pid: int, modules: Modules) -> None:
        self.pid = pid
        self.modules = modules
        self._code: CodeMap | None = None
        self._stacks: list[tuple[int, int]] = []
        self._python: Interpreter | None = None
        self._python_tried = False

    def python(self, memory: Memory) -> Interpreter | None:
        """The process's CPython (its ustack is Python where it runs Python), found once."""
        if not self._python_tried:
            self._python_tried = True
            try:
                self._python = Interpreter(self.modules, memory.read)
            except UnsupportedTarget:
                self._python = None
        return self._python

    def copy(self, registers: Any, memory: Memory, tid: int | None = None) -> Copy:
        """While the thread waits: its registers and one read of its stack's top (and, in a CPython,
        its Python frames)."""
        values = registers_of(registers)
        sp = values[RSP]
        span = self._mapping(sp)
        if span is None:  # a stack mapped since (a new thread's): the mappings again, not the modules
            self._stacks = _data_mappings(self.pid)
            span = self._mapping(sp)
        start = max(sp - RED_ZONE, span[0]) if span is not None else sp
        end = span[1] if span is not None else None
        data = b""
        if end is not None:
            try:
                data = memory.read(start, min(end - start, COPY_BYTES))
            except UnreadableMemory:
                data = b""
        python = None
        interpreter = self.python(memory) if tid is not None else None
        if interpreter is not None:
            try:
                found = interpreter.threads(None, {tid}, names=False)
                python = found[0] if found else None
            except (Unreadable, UnreadableMemory):
                python = None
        return Copy(values, start, data, python)

    def folded(self, copy: Copy, memory: Memory, limit: int) -> str:
        """After the thread went on: the stack, outermost first, ``;`` between frames; the
        innermost ``limit`` frames (0: all of them, up to MAX_DEPTH)."""
        def read(address: int, size: int) -> bytes:
            start = address - copy.at
            if start >= 0 and start + size <= len(copy.data):
                return copy.data[start:start + size]
            return memory.read(address, size)

        stack = unwind(copy.registers, self._code_map(memory), read, limit or MAX_DEPTH)
        merged = python.folded(stack, copy.python, native=True)
        if merged is not None:
            parts = merged.split(";")
            return ";".join(parts[-limit:]) if limit else merged
        return stack.folded(limit or None)

    def _code_map(self, memory: Memory) -> CodeMap:
        if self._code is None:
            self.refresh(memory)
        assert self._code is not None
        return self._code

    def refresh(self, memory: Memory) -> None:
        """The process's mappings read again (a library loaded since, a thread's new stack)."""
        maps = procfs.maps(self.pid)
        self.modules.refresh()
        by_path = {module.path: module for module in self.modules.everything()}
        self._code = CodeMap([(m.start, m.end, by_path.get(m.path), m.path) for m in maps if m.executable],
                             memory.read)
        self._stacks = [(m.start, m.end) for m in maps if not m.executable]

    def _mapping(self, sp: int) -> tuple[int, int] | None:
        """The mapping that holds the stack pointer (None: none does)."""
        for start, end in self._stacks:
            if start <= sp < end:
                return start, end
        return None


def _data_mappings(pid: int) -> list[tuple[int, int]]:
    try:
        return [(m.start, m.end) for m in procfs.maps(pid) if not m.executable]
    except Exception:  # gone: no stack to copy
        return []
