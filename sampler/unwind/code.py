"""What is mapped at a pc, as the unwinder needs it: the module, its call frame information,
its Go function table, and the names, lines and inlined calls of its functions.

A process's executable mappings are read once (one read of /proc/PID/maps by the caller); each
module's tables are read when a pc first falls in it. The vDSO, which no file on disk holds, is
read from the process's memory (its image is a whole ELF file of a page or two).
"""

from __future__ import annotations

import bisect
import io
from collections.abc import Sequence
from dataclasses import dataclass

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from sampler.debuginfo.cfi import CallFrames
from sampler.debuginfo.demangle import demangle, qualified
from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.elffile import BadFile, Symbol
from sampler.debuginfo.gopclntab import BadTable, GoFunction, PcLineTable
from sampler.debuginfo.modules import Module
from sampler.process.reads import Read, UnreadableMemory

MAX_PLACES = 100_000
"""Named pcs remembered per module."""
MAX_VDSO = 64 << 10
"""Bytes of the vDSO image read (it is 8 KiB on x86-64 kernels)."""


@dataclass(frozen=True)
class Place:
    """What a pc is, in its module: the function and where in it, the file and line, and the
    functions inlined there (innermost first: name, the file and line each was called from)."""

    function: str | None
    offset: int | None
    file: str | None = None
    line: int | None = None
    inlined: tuple[tuple[str, str | None, int | None], ...] = ()


class Code:
    """One module's code: where it is loaded, how to unwind through it, how to name its pcs."""

    def __init__(self, name: str, bias: int, frames: CallFrames | None, go: PcLineTable | None,
                 symbols: list[tuple[int, int, str]], debug: Debug | None) -> None:
        self.name = name
        self.bias = bias
        self.frames = frames
        self.go = go
        self._starts = [start for start, _, _ in symbols]
        self._symbols = symbols
        self._debug = debug
        self._all_symbols: Sequence[tuple[str, Symbol]] = ()
        self._places: dict[int, Place] = {}
        self._by_name: dict[str, int] | None = None

    @classmethod
    def of_module(cls, module: Module) -> Code:
        """From a module sampler opened (the executable or a library)."""
        debug = _quietly_debug(module)
        frames = CallFrames(module.file.elf, debug.info if debug is not None else None)
        try:
            go = module.file.go_table()
        except (BadTable, BadFile):  # an older Go's table (before 1.18), or a damaged one: no Go table
            go = None
        symbols = module.function_symbols()
        code = cls(module.name, module.bias, frames, go, _sorted_symbols(symbols), debug)
        code._all_symbols = symbols
        return code

    @classmethod
    def of_vdso(cls, start: int, end: int, read: Read) -> Code | None:
        """The vDSO, from the process's memory (None when it cannot be read as ELF)."""
        try:
            image = read(start, min(end - start, MAX_VDSO))
            elf = ELFFile(io.BytesIO(image))
            symbols = []
            for section in elf.iter_sections():
                if isinstance(section, SymbolTableSection):
                    for symbol in section.iter_symbols():
                        if symbol["st_info"]["type"] == "STT_FUNC" and symbol["st_value"]:
                            symbols.append((symbol.name, symbol["st_value"], symbol["st_size"]))
            return cls("[vdso]", start, CallFrames(elf, None), None,
                       sorted((address, size, name) for name, address, size in symbols), None)
        except (UnreadableMemory, Exception):  # the process's bytes: anything may be wrong
            return None

    def function(self, pc: int) -> GoFunction | None:
        """The Go function at a file address, when the module has a Go table and it names pc."""
        if self.go is None:
            return None
        try:
            return self.go.function_at(pc)
        except BadTable:
            return None

    def call_target(self, returns: int) -> tuple[int | None, str | None]:
        """What the call returning to ``returns`` (a file address) called (DWARF's call site): its
        start in this module, or its name (a function of another module)."""
        if self._debug is None:
            return None, None
        try:
            return self._debug.call_target(returns, self._address_of)
        except Exception:  # hostile or damaged DWARF
            return None, None

    def tail_calls(self, start: int | None, name: str | None, callee: int) -> list[tuple[int, Place]]:
        """The functions between a call of ``start`` (or of the function ``name``, looked up here)
        and a frame at ``callee`` (file addresses) that left by a tail call, innermost first: (the
        address after each one's jump, its place), as gdb shows them (none without DWARF)."""
        if self._debug is None:
            return []
        if start is None and name is not None:
            start = self._address_of(name)
        function = self._function_start(callee)
        if start is None or function is None:
            return []
        try:
            chain = self._debug.tail_calls(start, function, self._address_of)
        except Exception:  # hostile or damaged DWARF: no frames added
            return []
        found = []
        for low, after in reversed(chain):
            place = self.place(after - 1)
            found.append((after, Place(place.function, after - low, place.file, place.line, place.inlined)))
        return found

    def _function_start(self, pc: int) -> int | None:
        at = bisect.bisect_right(self._starts, pc) - 1
        if at >= 0:
            start, size, _ = self._symbols[at]
            if pc < start + max(size, 1):
                return start
        return None

    def _address_of(self, name: str) -> int | None:
        """A function's address by any of its symbol names (aliases included)."""
        if self._by_name is None:
            self._by_name = {}
            for symbol_name, symbol in self._all_symbols:
                if symbol.address:  # (an undefined symbol is another module's)
                    self._by_name.setdefault(symbol_name.split("@")[0], int(symbol.address))
        return self._by_name.get(name)

    def starts_function(self, pc: int) -> bool:
        """A function's symbol starts at this file address (a call just landed there)."""
        at = bisect.bisect_left(self._starts, pc)
        return at < len(self._starts) and self._starts[at] == pc

    def place(self, pc: int) -> Place:
        """Name a file address: Go's table first, then the symbol table; file, line and inlined
        calls from DWARF (or Go's table). Each pc named once (a profile meets the same ones)."""
        found = self._places.get(pc)
        if found is None:
            if len(self._places) >= MAX_PLACES:
                self._places.clear()
            found = self._places[pc] = self._place(pc)
        return found

    def _place(self, pc: int) -> Place:
        go = self.function(pc)
        if go is not None:
            line = None
            try:
                line = self.go.line_at(go, pc) if self.go is not None else None
            except BadTable:
                pass
            file, number = line or (None, None)
            return Place(go.name, pc - go.entry, file, number, self._inlined(pc))
        at = bisect.bisect_right(self._starts, pc) - 1
        function = offset = None
        if at >= 0:
            start, size, name = self._symbols[at]
            if pc < start + max(size, 1):
                function, offset = name, pc - start
        if self._debug is None:
            return Place(function, offset)
        try:
            line = self._debug.line_at(pc)
            inlined = self._inlined(pc)
            if function is None or function.startswith("_R"):  # no symbol, or Rust's v0 names
                found = self._debug.function_at(pc, scan=False)
                if found is not None:
                    function, offset = self._debug.qualified_name(found.die) or found.name, pc - found.low
        except Exception:  # hostile or damaged DWARF: the symbol's name is enough
            return Place(function, offset)
        file, number = line or (None, None)
        return Place(function, offset, file, number, inlined)


    def _inlined(self, pc: int) -> tuple[tuple[str, str | None, int | None], ...]:
        """The calls inlined at a file address, from DWARF (none without it)."""
        if self._debug is None:
            return ()
        try:
            return tuple(self._debug.inlined_at(pc))
        except Exception:  # hostile or damaged DWARF: the function alone
            return ()


def _quietly_debug(module: Module) -> Debug | None:
    """The module's DWARF from a file on disk (no debuginfod: a stack is wanted now), or None."""
    try:
        return module.debug(remote=False)
    except Exception:  # damaged DWARF: names from the symbol table only
        return None


def _sorted_symbols(symbols: Sequence[tuple[str, Symbol]]) -> list[tuple[int, int, str]]:
    """(start, size, name) by start; of aliases at one address the plainest name (fewest leading
    underscores, then shortest: ``clock_nanosleep`` over ``__clock_nanosleep``), C++ and Rust
    names demangled."""
    best: dict[int, tuple[int, str, int]] = {}
    for name, symbol in symbols:
        address, size = int(symbol.address), int(symbol.size)
        if not address:
            continue
        plain = name.split("@")[0]
        key = (len(plain) - len(plain.lstrip("_")), plain, size)
        if address not in best or (key[0], len(key[1])) < (best[address][0], len(best[address][1])):
            best[address] = key
    found = []
    for address, (_, name, size) in best.items():
        shown = demangle(name) if name.startswith(("_Z", "_R")) else None
        found.append((address, size, qualified(shown) if shown else name))
    found.sort()
    return found


class CodeMap:
    """The executable mappings of one process, each to its module's Code."""

    def __init__(self, ranges: list[tuple[int, int, Module | None, str]], read: Read) -> None:
        """``ranges``: (start, end, module or None, path) of each executable mapping."""
        self._ranges = sorted(ranges, key=lambda r: r[0])
        self._starts = [start for start, _, _, _ in self._ranges]
        self._read = read
        self._code: dict[int, Code | None] = {}

    @property
    def ranges(self) -> list[tuple[int, int, Module | None, str]]:
        return self._ranges

    def at(self, pc: int) -> Code | None:
        """The code mapped at a run-time pc, or None (nothing executable is mapped there)."""
        at = bisect.bisect_right(self._starts, pc) - 1
        if at < 0 or pc >= self._ranges[at][1]:
            return None
        start, end, module, path = self._ranges[at]
        key = id(module) if module is not None else start
        if key not in self._code:
            if module is not None:
                self._code[key] = Code.of_module(module)
            elif path == "[vdso]":
                self._code[key] = Code.of_vdso(start, end, self._read)
            else:
                self._code[key] = None
        return self._code[key]

    def name_at(self, pc: int) -> str | None:
        """The mapping's file name at pc even when its code cannot be read (``[anon]`` for JIT code)."""
        at = bisect.bisect_right(self._starts, pc) - 1
        if at < 0 or pc >= self._ranges[at][1]:
            return None
        path = self._ranges[at][3]
        return path.rsplit("/", 1)[-1] if path else "[anon]"
