"""Go: is a goroutine parked with a return into the bytes a jump would take? (in-process probes)

Go's asynchronous preemption (SIGURG) stops a goroutine wherever it is safe to, pushes the pc it
interrupted onto the goroutine's own stack (asyncPreempt's frame) and parks it; it may run again
much later, on any thread, and return there. A jump written over bytes that such a goroutine
returns into the middle of runs half an instruction when it does: burst-go died so (a fault at the
site + 4, the tail of the jump's rel32 run as code). No thread shows it (the goroutine is not on
one), so every goroutine that is not on a thread is unwound from where it stopped (runtime.allgs,
unwind/goroutines.py: Go's own tables, not a scan of stale words, which found "returns" that never
came), and so is each held thread (the goroutine it runs may be inside asyncPreempt): a frame whose
pc lies inside the bytes, past their first, keeps the jump out for now.
"""

from __future__ import annotations

from typing import Any

from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.modules import Modules
from sampler.process.reads import Read, UnreadableMemory
from sampler.target import procfs
from sampler.unwind import goroutines
from sampler.unwind.code import CodeMap
from sampler.unwind.frames import Stack
from sampler.unwind.walk import RBP, RIP, RSP, unwind

DEPTH = 64
"""Frames of a stack looked at (an interrupted frame is within the first few above asyncPreempt)."""


class Parked:
    """The goroutines of one Go program, looked at for returns into a range."""

    def __init__(self, pid: int, modules: Modules, read: Read) -> None:
        self.pid = pid
        self.modules = modules
        self.read = read
        self.reader: goroutines.Reader | None = None
        self.why_not = ""
        debug = modules.main.debug(remote=False)
        if debug is None:
            self.why_not = "the program has no DWARF: where its goroutines stopped cannot be read"
            return
        main = modules.main

        def address_of(name: str) -> int | None:
            symbol = main.object_symbol(name)
            return symbol.address + main.bias if symbol is not None else None
        try:
            self.reader = goroutines.Reader(debug, address_of, read)
        except (ValueError, UnreadableMemory, Malformed) as e:
            self.why_not = f"its goroutines cannot be read ({e})"

    def inside(self, start: int, end: int, threads: list[Any] | None = None) -> str:
        """Why not: a goroutine (or a held thread, by its registers ``threads``) would return into
        (start, end), or the goroutines cannot be read; '' when none would. Called with every thread
        held (no goroutine moves meanwhile)."""
        if self.reader is None:
            return self.why_not
        code = self._code()
        for registers in threads or []:
            stack = unwind({RIP: int(registers.rip), RSP: int(registers.rsp), RBP: int(registers.rbp)}, code,
                           self.read, DEPTH)
            if _returns_into(stack, start, end):
                return f"a held thread's goroutine would return to {start:#x} + {_into(stack, start, end)}"
        try:
            raws, complete = self.reader.snapshot()
            parked = [(g, raw) for g, raw in raws
                      if self.reader.status(raw) not in (goroutines.RUNNING, goroutines.SYSCALL)]
            found, complete = self.reader.goroutines(code, {}, DEPTH, parked, complete)
        except UnreadableMemory as e:
            return f"its goroutines cannot be read ({e})"
        if not complete:
            return "it has more goroutines than are read in time"
        for goroutine in found:
            if goroutine.stack is not None and _returns_into(goroutine.stack, start, end):
                return (f"goroutine {goroutine.goid} is parked with a return to {start:#x} + "
                        f"{_into(goroutine.stack, start, end)} (Go's preemption)")
        return ""

    def _code(self) -> CodeMap:
        maps = procfs.maps(self.pid)
        by_path = {module.path: module for module in self.modules.everything()}
        return CodeMap([(m.start, m.end, by_path.get(m.path), m.path) for m in maps if m.executable], self.read)


def _returns_into(stack: Stack, start: int, end: int) -> bool:
    return any(start < frame.pc < end for frame in stack.frames[1:])


def _into(stack: Stack, start: int, end: int) -> int:
    return next(frame.pc - start for frame in stack.frames[1:] if start < frame.pc < end)
