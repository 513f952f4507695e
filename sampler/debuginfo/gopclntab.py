"""Go's own function table, ``.gopclntab``: every Go binary keeps it, stripped or not
(``-ldflags='-s -w'`` removes .symtab and DWARF, never this), since the runtime needs it
to unwind and to print stack traces. It maps every function to its entry and each pc to
its file and line, in the format of Go's ``debug/gosym`` (Go 1.18 and later).
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from sampler.debuginfo.leb128 import uleb128
from sampler.debuginfo.untrusted import converting

MAGICS = {0xFFFFFFF0: "1.18", 0xFFFFFFF1: "1.20"}
"""The table's first word, by the Go version that introduced that layout."""


MAX_RUNS_AT = 100_001
"""Runs one table of one function may have (a function has a few hundred)."""
MAX_RUNS = 2_000_000
"""The pc-table entries one FILE:LINE search may decode, about 5 s (measured: the generated
30 MB Go program of bench-attach, 44,264 functions, decodes 140,000 in 0.37 s; a hostile table
sharing one 100,000-entry table among 20,000 functions would have taken 45 min)."""


class BadTable(Exception):
    """The table is not one sampler can read (an older Go, or damaged)."""


_guarded = converting(BadTable)


@dataclass(frozen=True)
class GoFunction:
    name: str
    entry: int
    """File address of its first instruction."""
    end: int
    offset: int
    """Where its _func record is in the table."""


class PcLineTable:
    """One binary's .gopclntab."""

    @_guarded
    def __init__(self, data: bytes, text_start: int) -> None:
        """``text_start``: the .text section's address, for tables that do not record it."""
        magic = struct.unpack_from("<I", data, 0)[0]
        if magic not in MAGICS or data[4:6] != b"\0\0" or data[7] != 8:
            raise BadTable(f"a Go function table of an unknown layout (magic {magic:#x}): "
                           "sampler reads those of Go 1.18 and later")
        self.data = data
        self.quantum = data[6]
        self.has_start_line = MAGICS[magic] == "1.20"
        (self.nfunc, _nfiles, start, self.funcnames, self.cutab, self.filetab, self.pctab,
         self.pcln) = struct.unpack_from("<8Q", data, 8)
        self.text_start = start or text_start
        self._functions: list[GoFunction] | None = None
        self._entries: list[int] | None = None
        self._budget = MAX_RUNS

    @_guarded
    def functions(self) -> list[GoFunction]:
        """Every function, by entry."""
        if self._functions is None:
            if not 0 < self.nfunc <= len(self.data) // 8:
                raise BadTable(f"a Go function table that claims {self.nfunc} functions")
            table = struct.unpack_from(f"<{2 * self.nfunc + 2}I", self.data, self.pcln)
            found = []
            for i in range(self.nfunc):
                entry, record, end = table[2 * i], table[2 * i + 1], table[2 * i + 2]
                offset = self.pcln + record
                name_at = self.funcnames + struct.unpack_from("<i", self.data, offset + 4)[0]
                name = self.data[name_at:self.data.index(b"\0", name_at)].decode("utf-8", "replace")
                found.append(GoFunction(name, self.text_start + entry, self.text_start + end, offset))
            self._functions = found
        return self._functions

    def function_at(self, pc: int) -> GoFunction | None:
        """The function whose code holds pc (a file address), or None."""
        functions = self.functions()
        if self._entries is None:
            self._entries = [function.entry for function in functions]
        at = bisect.bisect_right(self._entries, pc) - 1
        return functions[at] if at >= 0 and pc < functions[at].end else None

    @_guarded
    def sp_delta(self, function: GoFunction, pc: int) -> int | None:
        """How far below the stack pointer at entry the stack pointer is at pc (pcsp): the return
        address is at sp + delta."""
        return self._value_at(function, struct.unpack_from("<I", self.data, function.offset + 16)[0], pc)

    @_guarded
    def line_at(self, function: GoFunction, pc: int) -> tuple[str, int] | None:
        """FILE, LINE of pc (pcfile, pcln)."""
        pcfile, pcln, cu = (struct.unpack_from("<I", self.data, function.offset + at)[0] for at in (20, 24, 32))
        index, line = self._value_at(function, pcfile, pc), self._value_at(function, pcln, pc)
        if index is None or line is None:
            return None
        return self._file_name(cu, index), line

    @_guarded
    def flags(self, function: GoFunction) -> int:
        """The function's flag byte: TOPFRAME (1, the outermost frame of a stack: goexit, mstart,
        rt0_go), SPWRITE (2, it writes the stack pointer: a traceback cannot go through it)."""
        return self.data[function.offset + (41 if self.has_start_line else 37)]

    def _value_at(self, function: GoFunction, table: int, pc: int) -> int | None:
        """The value a pc-value table gives at pc, decoding only up to it."""
        if not function.entry <= pc < function.end:
            return None
        for low, high, value in self._runs(function, table, MAX_RUNS_AT):
            if low <= pc < high:
                return value
        return None

    def function_named(self, name: str) -> GoFunction | None:
        for function in self.functions():
            if function.name == name:
                return function
        return None

    @_guarded
    def line_address(self, file: str, line: int, same_file: Callable[[str, str], bool]) -> int | None:
        """The lowest address of FILE:LINE, preferring a function written in that file over
        one that only has the line inlined. ``same_file(path, wanted)`` compares names."""
        best: tuple[int, int] | None = None
        self._budget = MAX_RUNS
        for function in self.functions():
            pcfile, pcln, cu = (struct.unpack_from("<I", self.data, function.offset + at)[0]
                                for at in (20, 24, 32))
            files = self._values(function, pcfile)
            if not files:
                continue
            names = {index: self._file_name(cu, index) for _, _, index in files}
            wanted = {index for index, path in names.items() if same_file(path, file)}
            if not wanted:
                continue
            home = 0 if files[0][2] in wanted else 1
            for low, _high, value in self._values(function, pcln):
                if value == line and any(f_low <= low < f_high and index in wanted
                                         for f_low, f_high, index in files):
                    if best is None or (home, low) < best:
                        best = (home, low)
                    break
        return None if best is None else best[1]

    def _file_name(self, cu: int, index: int) -> str:
        offset = struct.unpack_from("<I", self.data, self.cutab + 4 * (cu + index))[0]
        at = self.filetab + offset
        return self.data[at:self.data.index(b"\0", at)].decode("utf-8", "replace")

    def _values(self, function: GoFunction, table: int) -> list[tuple[int, int, int]]:
        """A pc-value table of a function: (low, high, value) for each run of pcs; the search's
        budget (MAX_RUNS) shared by every table it decodes."""
        runs = []
        for run in self._runs(function, table, MAX_RUNS_AT):
            runs.append(run)
            self._budget -= 1
            if self._budget < 0:
                raise BadTable(f"searching it takes over {MAX_RUNS} pc-table entries: a hostile table?")
        return runs

    def _runs(self, function: GoFunction, table: int, limit: int) -> Iterator[tuple[int, int, int]]:
        """The runs of a pc-value table, (low, high, value), to the function's end (``limit`` at most)."""
        if table == 0:
            return
        data, at = self.data, self.pctab + table
        pc, value, first = function.entry, -1, True
        for _ in range(limit):
            delta, at = uleb128(data, at, limit=5)
            if delta == 0 and not first:
                return
            first = False
            value += ~(delta >> 1) if delta & 1 else delta >> 1
            step, at = uleb128(data, at, limit=5)
            high = pc + step * self.quantum
            yield pc, high, value
            pc = high
            if pc >= function.end:
                return
