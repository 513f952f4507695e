"""Go: is a goroutine parked with a return into the bytes a jump would take? (in-process probes)

Go's asynchronous preemption (SIGURG) stops a goroutine wherever it is safe to, pushes the pc it
interrupted onto the goroutine's own stack and parks it; it may run again much later, on any
thread, and return there. A jump written over bytes that such a goroutine returns into the middle
of runs half an instruction when it does: burst-go died so (a fault at the site + 4, the tail of
the jump's rel32 run as code). No thread shows it (the goroutine is not on one), so the stacks of
the goroutines that are not running are looked at, from runtime.allgs (unwind/goroutines.py), for
a word inside the bytes: any is taken to be such a return (a stale word too: the jump waits).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import numpy as np

from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.modules import Modules
from sampler.evaluation.reads import Read, UnreadableMemory
from sampler.unwind import goroutines

SCAN = 256 << 10
"""Bytes of a goroutine's stack looked at, from its saved stack pointer up, at most."""


class Parked:
    """The goroutines of one Go program, looked at for returns into a range."""

    def __init__(self, modules: Modules, read: Read) -> None:
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

    def inside(self, start: int, end: int) -> str:
        """Why not: a goroutine keeps a word in (start, end) on its stack, or they cannot be read;
        '' when none does. Called with every thread held (no goroutine moves meanwhile)."""
        if self.reader is None:
            return self.why_not
        layout = self.reader.layout
        try:
            raws, complete = self.reader.snapshot()
        except UnreadableMemory as e:
            return f"its goroutines cannot be read ({e})"
        if not complete:
            return "it has more goroutines than are read in time"
        for g, raw in raws:
            low, high = struct.unpack_from("<QQ", raw, 0)  # g.stack
            sp = _field(raw, layout.sched_sp)
            base = sp if low <= sp < high else low
            if not low <= base < high:
                continue
            size = min(high - base, SCAN) // 8 * 8
            try:
                words = np.frombuffer(self.read(base, size), "<u8")
            except UnreadableMemory:
                continue
            if bool(((words > start) & (words < end)).any()):
                return (f"goroutine g {g:#x} keeps a word inside the bytes at {start:#x} on its stack (a return "
                        "there of Go's preemption?)")
        return ""


def _field(raw: bytes, at: tuple[int, int] | None) -> int:
    if at is None:
        return 0
    offset, size = at
    return int.from_bytes(raw[offset:offset + size], "little")


Check = Callable[[int, int], str]
