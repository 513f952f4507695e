"""The DWARF of one module: the index of its functions and globals, its line table,
the variables in scope at a pc, and the entry points for their types (types.py), their
locations (locations.py) and the CFA (cfi.py).

Everything here works on *file* addresses (as in the ELF file); the backend adds
the load bias. Built once, before anything in the target is stopped.
"""

from __future__ import annotations

import bisect
import posixpath
import re
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

from elftools.dwarf.compileunit import CompileUnit
from elftools.dwarf.die import DIE
from elftools.dwarf.dwarf_expr import DWARFExprOp, DWARFExprParser
from elftools.dwarf.dwarfinfo import DWARFInfo
from elftools.dwarf.locationlists import LocationExpr, LocationParser
from elftools.dwarf.ranges import BaseAddressEntry
from elftools.elf.elffile import ELFFile

from sampler.debuginfo.aranges import Aranges
from sampler.debuginfo.cfi import CallFrames
from sampler.debuginfo.demangle import demangle, qualified
from sampler.debuginfo.dies import (
    Malformed,
    children,
    covers,
    descendants,
    end_of,
    file_names,
    name_of,
    origin,
    same_file,
)
from sampler.debuginfo.dwarfscan import CannotScan, referring, top_level
from sampler.debuginfo.elffile import MAX_SECTION
from sampler.debuginfo.linetable import END, Table, read_header
from sampler.debuginfo.linetable import decode as decode_lines
from sampler.debuginfo.locations import (
    REGISTERS,
    Computed,
    EntryValue,
    Frame,
    Location,
    OptimizedOut,
    as_address,
    as_value,
    entry_at,
    execute,
)
from sampler.debuginfo.types import Type, TypeReader
from sampler.debuginfo.untrusted import converting

GO_RUNTIME_TYPE = 0x2904
"""DW_AT_go_runtime_type: where a Go type's runtime descriptor is, as an offset into the
module's types section (moduledata.types), as Delve reads it."""


INDEXED = frozenset({"DW_TAG_subprogram", "DW_TAG_variable"})
"""The top DIEs a unit's index parses (its functions and globals); the others are passed over."""


@dataclass(frozen=True)
class Function:
    name: str
    low: int
    high: int
    die: DIE


@dataclass(frozen=True)
class Variable:
    name: str
    die: DIE
    type: Type



def _name_through(die: DIE) -> str | None:
    """A DIE's name, or its origin's: a clone's concrete DIE names its abstract one, whose
    name a C++ method keeps in its declaration (DW_AT_specification); at most four hops."""
    for _ in range(4):
        name = name_of(die)
        if name:
            return name
        following = origin(die, "DW_AT_abstract_origin") or origin(die, "DW_AT_specification")
        if following is None:
            return None
        die = following
    return None


MAX_INLINE_WALK = 64 << 20
"""Bytes of .debug_info sampler walks whole for a function's inlined copies (a few seconds)."""
MAX_INLINED = 256
"""Inlined copies listed for one name, at most (one more says there are too many)."""


class InlineWalkTooLarge(Exception):
    """The debug info is too large to walk whole for inlined copies."""


CALLEE_SAVED = (3, 6, 12, 13, 14, 15)
"""DWARF numbers of the registers a call keeps on x86-64 (rbx, rbp, r12-r15): what a caller's
frame is known by at its call."""
MAX_CALL_SITES = 4096
"""Return addresses whose call site is remembered (a hostile program has many)."""

MAX_INLINE_DEPTH = 64
"""Inlined calls within inlined calls followed at one pc."""
MAX_RANGES = 4096
"""Entries of one DIE's range list looked at."""
MAX_TAIL_CALLS = 4
"""Tail calls followed from one call site (gdb follows chains of any length; they are short)."""
MAX_TAIL_VISITS = 64
"""Functions looked at for one chain: past it, the chain is said to be ambiguous (a hostile or
huge web of tail calls would cost fan-out to the 4th)."""
MAX_NAMES_CACHED = 100_000
"""Qualified names of DIEs remembered."""
_SCOPES = ("DW_TAG_namespace", "DW_TAG_class_type", "DW_TAG_structure_type", "DW_TAG_union_type",
           "DW_TAG_enumeration_type")
"""The DIEs whose names qualify a function's (C++, Rust)."""
MAX_UNIT_RANGES = 1_000_000
"""Address ranges of compile units indexed (a 30 MB Go program has about 6,000)."""
MAX_FUNCTION_PIECES = 16
"""Pieces of one split function read (a hot part and a .cold one, seldom more)."""

_guarded = converting(Malformed, keep=(OptimizedOut,))
"""Debug information is input sampler does not control: whatever the parser raises on bad
bytes becomes Malformed, one clear message."""




UNPACKED_FLOOR = 64 << 20
UNPACKED_PER_BYTE = 32
"""A file's compressed debug sections may unpack to at most UNPACKED_PER_BYTE times its size, or
UNPACKED_FLOOR bytes when that is more: pyelftools holds every debug section whole, so what a
small file unpacks to is what sampler holds. Debian's 273 debug files of libc6-dbg and the
others installed here unpack to 13 times their size at most (most to 2-3 times), Go's
compressed DWARF to 3.5 times; a 1 MB file claiming a 1 GiB .debug_str (a zlib bomb) took
3.1 GB and 28 s before issue 32."""
UNPACK_CHUNK = 1 << 20


def check_sections(elf: ELFFile) -> None:
    """Malformed when a section claims more than its file holds or than MAX_SECTION, or the
    compressed debug sections claim to unpack to more than the file's budget (UNPACKED_FLOOR,
    UNPACKED_PER_BYTE), or one unpacks to more than it says (a zlib bomb): before pyelftools
    reads (and unpacks) every debug section whole. A hostile sh_size of 3 GiB on a sparse
    file took 6.3 GB of memory. The check unpacks a chunk at a time and keeps none of it."""
    stream = elf.stream
    end = stream.seek(0, 2)
    budget = max(UNPACKED_FLOOR, UNPACKED_PER_BYTE * end)
    compressed: list[tuple[str, int, int, int]] = []
    for section in elf.iter_sections():
        name = section.name
        if section["sh_type"] in ("SHT_NOBITS", "SHT_NULL"):
            continue
        size, offset = section["sh_size"], section["sh_offset"]
        if offset + size > end:
            raise Malformed(f"{name} claims {size} bytes at {offset:#x}, past the end of its file ({end} bytes)")
        if size > MAX_SECTION:
            raise Malformed(f"{name} is {size >> 20} MiB, over sampler's limit of {MAX_SECTION >> 20} MiB")
        if not name.startswith((".debug_", ".zdebug_")):
            continue
        if section["sh_flags"] & 0x800:  # SHF_COMPRESSED: Elf64_Chdr (24 bytes), ch_size the unpacked size
            stream.seek(offset + 8)
            claimed, start = int.from_bytes(stream.read(8), "little"), 24
        elif name.startswith(".zdebug_"):  # "ZLIB" and the unpacked size, big-endian
            stream.seek(offset + 4)
            claimed, start = int.from_bytes(stream.read(8), "big"), 12
        else:
            continue
        if claimed > MAX_SECTION:
            raise Malformed(f"{name} is {claimed >> 20} MiB unpacked, over sampler's limit of {MAX_SECTION >> 20} MiB")
        compressed.append((name, offset + start, size - start, claimed))
    total = sum(claimed for *_, claimed in compressed)
    if total > budget:
        raise Malformed(f"its compressed debug sections claim {total >> 20} MiB unpacked from a file of "
                        f"{end >> 10} KiB, over sampler's limit of {budget >> 20} MiB for it (a zlib bomb?)")
    for name, at, size, claimed in compressed:
        try:
            unpacked = _unpacked_size(stream, at, size, claimed + 1)
        except zlib.error as e:
            raise Malformed(f"{name} cannot be unpacked ({e})") from None
        if unpacked > claimed:
            raise Malformed(f"{name} unpacks to more than the {claimed} bytes it says (a zlib bomb?)")


def _unpacked_size(stream: Any, at: int, size: int, limit: int) -> int:
    """How many bytes the zlib stream of SIZE bytes at AT unpacks to, counted up to LIMIT (the
    output is thrown away a chunk at a time)."""
    stream.seek(at)
    unpacker = zlib.decompressobj()
    total, left = 0, size
    while total < limit:
        data = unpacker.unconsumed_tail
        if not data:
            if left <= 0:
                break
            data = stream.read(min(UNPACK_CHUNK, left))
            if not data:
                break
            left -= len(data)
        total += len(unpacker.decompress(data, min(UNPACK_CHUNK, limit - total)))
        if unpacker.eof:
            break
    return total


_READ: weakref.WeakKeyDictionary[ELFFile, DWARFInfo] = weakref.WeakKeyDictionary()
"""The DWARF of each file read so far: the modules of one file in several processes (loaded at
other addresses: elffile.open_shared gives them one ELFFile) share its parse."""


def _dwarf_of(elf: ELFFile) -> DWARFInfo:
    info = _READ.get(elf)
    if info is None:
        check_sections(elf)  # before pyelftools reads every debug section whole
        info = _READ[elf] = elf.get_dwarf_info()
    return info


class Debug:
    """The DWARF of one module, read lazily: a function is found through the address
    ranges of its compilation unit, and only the units a name or address needs are parsed
    (a full walk only when a name is not found otherwise)."""

    def __init__(self, elf: ELFFile, bias: int, cfi_elf: ELFFile | None = None) -> None:
        """``bias``: where the module is loaded in the process, less its file addresses
        (0 for a fixed-address executable); added to static addresses (DW_OP_addr).
        ``cfi_elf``: the loaded file, whose .eh_frame a separate debug file lacks."""
        self.info: DWARFInfo = _dwarf_of(elf)
        eh_frame = elf.get_section_by_name(".eh_frame")
        own = eh_frame is not None and eh_frame["sh_type"] != "SHT_NOBITS"
        self._frames = CallFrames(elf if own else cfi_elf, self.info)
        self._cfa_rules: dict[int, tuple[int, int]] = {}
        self._expr = DWARFExprParser(self.info.structs)
        self._locations = LocationParser(self.info.location_lists())
        self._reader = TypeReader()
        self.functions: dict[str, Function] = {}
        """Functions by name, of the units parsed so far (all of them after ``scan_all``)."""
        self.globals: dict[str, DIE] = {}
        """Global variables by name, of the units parsed so far."""
        self._unit_functions: dict[int, list[Function]] = {}
        self._units: Iterator[CompileUnit] = self.info.iter_CUs()
        self._scanned = False
        self._aranges: Any = None
        self._go_types: dict[int, int] | None = None
        self._info_bytes: bytes | None = None
        self._parsed_ops: dict[tuple[int, int], list[DWARFExprOp]] = {}
        self._call_sites: dict[int, DIE | None] = {}
        """Return address (file address) -> the call site DIE of that call, or None."""
        self._names: dict[str, list[int]] = {}
        self._name_units: Iterator[CompileUnit] = self.info.iter_CUs()
        self._strings: bytes | None = None
        self.bias = bias
        self._unit_ranges: tuple[list[int], list[tuple[int, int, int]]] | None = None
        self._qualified: dict[int, str | None] = {}
        self._scan_call_sites = True
        self._call_sites_unscanned: dict[int, DIE | None] = {}
        self._tail_chains: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self._lines: dict[int, Table | str] = {}
        """Per unit: its line table (linetable.py), for addresses to lines (stacks); or why it
        cannot be read (a damaged table is decoded once)."""
        self._line_sections: tuple[bytes, bytes, bytes] | None = None
        """.debug_line, .debug_line_str and .debug_str, once read."""

    # -- index ------------------------------------------------------------

    def _index_unit(self, cu: CompileUnit) -> list[Function]:
        known = self._unit_functions.get(cu.cu_offset)
        if known is not None:
            return known
        functions: list[Function] = []
        for die in self._top_level(cu, INDEXED):
            if die.tag == "DW_TAG_subprogram":
                for function in self._functions_of(die):
                    functions.append(function)
                    self.functions.setdefault(function.name, function)
            elif die.tag == "DW_TAG_variable" and "DW_AT_location" in die.attributes:
                name = name_of(die) or name_of(origin(die, "DW_AT_specification"))
                if name:
                    self.globals.setdefault(name, die)
        self._unit_functions[cu.cu_offset] = functions
        return functions

    def _info_data(self) -> bytes:
        """The whole .debug_info, as the fast walk reads it (kept once read)."""
        if self._info_bytes is None:
            section: Any = self.info.debug_info_sec
            self._info_bytes = bytes(section.stream.getvalue())
        return self._info_bytes

    def _top_level(self, cu: CompileUnit, tags: frozenset[str] | None = None) -> Iterator[DIE]:
        """The top DIE's children (``tags``: of those tags only, as the fast walk can tell), found by the fast
        walk (dwarfscan) and only they parsed; pyelftools' walk when the fast one cannot read the unit. (Every
        top DIE of libc's parsed to find its functions: 262,000, 28 of 41 s of a trace of _IO*.)"""
        top = cu.get_top_DIE()
        try:
            offsets = [offset for offset, tag, _ in top_level(cu, self._info_data()) if tags is None or tag in tags]
        except (CannotScan, AttributeError, IndexError, KeyError, ValueError):
            yield from children(top)
            return
        for offset in offsets:
            die = cu._get_cached_DIE(offset)
            die.set_parent(top)
            yield die

    def _scan_until(self, found: Callable[[], bool]) -> bool:
        """Parse further units until ``found()`` holds or none is left."""
        while not found():
            if self._scanned:
                return False
            unit = next(self._units, None)
            if unit is None:
                self._scanned = True
                return found()
            self._index_unit(unit)
        return True

    @_guarded
    def scan_all(self) -> None:
        self._scan_until(lambda: False)

    def _functions_of(self, die: DIE) -> list[Function]:
        """A subprogram's code: one Function, or one per piece of a function the compiler split
        (DW_AT_ranges: a hot part and a .cold one, as PGO builds such as Debian's python3.11 have),
        the piece with its entry first (its DW_AT_entry_pc, else the first range listed)."""
        single = self._function(die)
        if single is not None:
            return [single]
        if "DW_AT_ranges" not in die.attributes:
            return []
        name = _name_through(die)
        if not name:
            return []
        try:
            pieces = [(begin, end) for begin, end in self._ranges(die, MAX_FUNCTION_PIECES) if begin < end]
        except Exception:  # damaged ranges: the function is not known by address
            return []
        entry = die.attributes.get("DW_AT_entry_pc")  # (else the first range's start: DWARF 5, 2.18)
        first = entry.value if entry is not None and entry.form == "DW_FORM_addr" else \
            (pieces[0][0] if pieces else 0)
        pieces.sort(key=lambda piece: (not piece[0] <= first < piece[1], piece[0]))
        return [Function(name, begin, end, die) for begin, end in pieces]

    @staticmethod
    def _function(die: DIE) -> Function | None:
        low = die.attributes.get("DW_AT_low_pc")
        high = die.attributes.get("DW_AT_high_pc")
        if low is None or high is None:
            return None
        name = _name_through(die)
        if not name:
            return None
        return Function(name, low.value, end_of(low, high), die)

    def inlined(self, name: str, function: Function | None = None) -> list[Function]:
        """Every copy of the function the compiler inlined into its callers, as a Function whose
        low is the copy's entry (DW_AT_entry_pc, else its low pc) and whose DIE is the
        DW_TAG_inlined_subroutine (its parameters' locations are there). ``function``: its
        out-of-line code, whose abstract origin the copies refer to; without it, the abstract
        DIEs named ``name`` (its last component: C++ methods by their declaration's name are
        not found that way). Walks every DIE with the fast walk (dwarfscan), two passes at
        most; refused past MAX_INLINE_WALK bytes of .debug_info (InlineWalkTooLarge)."""
        size = self.info.debug_info_sec.size if self.info.debug_info_sec is not None else 0
        if size > MAX_INLINE_WALK:
            raise InlineWalkTooLarge(f"its .debug_info is {size >> 20} MiB, over the {MAX_INLINE_WALK >> 20} MiB "
                                     "sampler walks for inlined copies")
        return self._inlined(name, function)

    @_guarded
    def _inlined(self, name: str, function: Function | None) -> list[Function]:
        info = self._info_data()
        if self._strings is None:
            strings: Any = self.info.debug_str_sec
            self._strings = bytes(strings.stream.getvalue()) if strings is not None else b""
        targets: set[int] = set()
        abstract = origin(function.die, "DW_AT_abstract_origin") if function is not None else None
        units = list(self.info.iter_CUs())
        try:
            if abstract is not None:
                targets.add(abstract.offset)
            else:
                last = name.rsplit("::", 1)[-1]
                for cu in units:
                    targets.update(referring(cu, info, "", "DW_AT_abstract_origin", set(), self._strings, last)[1])
            copies = [(cu, offset) for cu in units if targets
                      for offset in referring(cu, info, "DW_TAG_inlined_subroutine", "DW_AT_abstract_origin",
                                              targets)[0]]
        except (CannotScan, AttributeError, IndexError, KeyError, ValueError) as e:
            raise Malformed(f"its DWARF cannot be walked for inlined copies ({e})") from None
        found: list[Function] = []
        for cu, offset in copies[:MAX_INLINED + 1]:
            die = cu._get_cached_DIE(offset)
            entry = die.attributes.get("DW_AT_entry_pc")
            low = die.attributes.get("DW_AT_low_pc")
            start = entry.value if entry is not None and entry.form == "DW_FORM_addr" else \
                (low.value + entry.value if entry is not None and low is not None else
                 low.value if low is not None else None)
            if start is None:
                continue
            high = die.attributes.get("DW_AT_high_pc")
            end = start + 1 if high is None or low is None else end_of(low, high)
            found.append(Function(name, start, max(end, start + 1), die))
        return found

    @_guarded
    def function_named(self, name: str) -> Function | None:
        self._scan_until(lambda: name in self.functions)
        return self.functions.get(name)

    @_guarded
    def function_at(self, pc: int, scan: bool = True) -> Function | None:
        """The function whose code holds pc (a file address). ``scan``: when the unit the
        address tables name has none, index every unit (a second or more for libc); without,
        trust them (an unwinder's question about assembly code, which has no function DIE)."""
        unit = self._unit_at(pc)
        if unit is None:
            unit = self._unit_by_ranges(pc)
        try:
            candidates = self._index_unit(unit) if unit is not None else None
        except Exception:  # aranges pointed at something that is not a unit: walk them all
            candidates = None
        if candidates is None or not any(f.low <= pc < f.high for f in candidates):
            if not scan:
                return None
            self._scan_until(lambda: False)
            candidates = [f for fs in self._unit_functions.values() for f in fs]
        for function in candidates:
            if function.low <= pc < function.high:
                return function
        return None

    def _unit_by_ranges(self, pc: int) -> CompileUnit | None:
        """Without .debug_aranges (Go writes none): the unit whose top DIE's ranges cover pc,
        from an index of every unit's ranges made once (reading only the top DIE of each). With
        them, None: what they do not cover has no unit (assembly, a library's own stubs)."""
        if self._aranges is None:
            self._unit_at(pc)  # (loads them)
        if self._aranges:
            return None
        if self._unit_ranges is None:
            self._unit_ranges = self._index_unit_ranges()
        starts, spans = self._unit_ranges
        at = bisect.bisect_right(starts, pc) - 1
        for candidate in range(at, max(at - 16, -1), -1):  # ranges of units do not nest: the nearest ones
            begin, end, offset = spans[candidate]
            if begin <= pc < end:
                return self.info.get_CU_at(offset)
        return None

    def _index_unit_ranges(self) -> tuple[list[int], list[tuple[int, int, int]]]:
        spans: list[tuple[int, int, int]] = []
        try:
            for cu in self.info.iter_CUs():
                top = cu.get_top_DIE()
                if "DW_AT_ranges" in top.attributes:
                    for begin, end in self._ranges(top, MAX_UNIT_RANGES):
                        spans.append((begin, end, cu.cu_offset))
                        if len(spans) > MAX_UNIT_RANGES:
                            break
                elif "DW_AT_low_pc" in top.attributes and "DW_AT_high_pc" in top.attributes:
                    low = top.attributes["DW_AT_low_pc"]
                    spans.append((low.value, end_of(low, top.attributes["DW_AT_high_pc"]), cu.cu_offset))
                if len(spans) > MAX_UNIT_RANGES:
                    break
        except Exception:  # unreadable ranges: what was read is the index
            pass
        spans.sort()
        return [begin for begin, _, _ in spans], spans

    def _unit_at(self, pc: int) -> CompileUnit | None:
        """The unit .debug_aranges gives for pc; None without (or with broken) aranges,
        and the caller walks the units instead."""
        try:
            if self._aranges is None:
                section = self.info.debug_aranges_sec
                stream = section.stream if section is not None else None
                data = stream.getvalue() if stream is not None and hasattr(stream, "getvalue") else None
                if data is not None:
                    self._aranges = Aranges(data) or False
                else:
                    self._aranges = self.info.get_aranges() or False
            if self._aranges is False:
                return None
            if isinstance(self._aranges, Aranges):
                offset = self._aranges.unit_at(pc)
            else:
                offset = self._aranges.cu_offset_at_addr(pc) if self._aranges.entries else None
            return None if offset is None else self.info.get_CU_at(offset)
        except Exception:  # corrupted aranges: not worth losing the DWARF for
            self._aranges = False
            return None

    @_guarded
    def has_global(self, name: str) -> bool:
        """A global of that name, or (Go) a package-qualified global under it."""
        prefix = name + "."
        if self._names_until(lambda: name in self._names or any(g.startswith(prefix) for g in self._names)) \
                and (name in self._names or any(g.startswith(prefix) for g in self._names)):
            return True
        return self._scan_until(lambda: name in self.globals
                                or any(g.startswith(prefix) for g in self.globals))

    # -- lines --------------------------------------------------------------

    def _rows(self, units: Iterable[CompileUnit]) -> Iterator[tuple[str, Any]]:
        for cu in units:
            program = self.info.line_program_for_CU(cu)
            if program is None:
                continue
            files = file_names(program, cu)
            for entry in program.get_entries():
                if entry.state is not None:
                    yield files.get(entry.state.file, ""), entry.state

    @_guarded
    def line_at(self, pc: int) -> tuple[str, int] | None:
        """FILE, LINE of a file address, from its unit's line table (decoded once per unit)."""
        unit = self._unit_at(pc) or self._unit_by_ranges(pc)
        if unit is None:
            return None
        return self._unit_lines(unit).place(pc)

    def _unit_lines(self, unit: CompileUnit) -> Table:
        """The unit's line table (decoded once); Malformed when it cannot be read."""
        table = self._lines.get(unit.cu_offset)
        if table is None:
            table = self._lines[unit.cu_offset] = self._line_table(unit)
        if isinstance(table, str):
            raise Malformed(table)
        return table

    def _line_table(self, unit: CompileUnit) -> Table | str:
        """The unit's line table, decoded from the bytes (linetable.py: pyelftools took 10 us a
        row, 4 s for a Rust program's std), or why it cannot be."""
        offset = self._stmt_list(unit)
        if offset is None:
            return Table([], [], [], {})
        try:
            return decode_lines(*self._line_data(offset))
        except Malformed as e:
            return str(e)

    def functions_of(self, function: Function) -> list[Function]:
        """Every piece of a function (one, or a split function's hot and cold parts)."""
        return self._functions_of(function.die) or [function]

    def declared_at(self, die: DIE) -> tuple[str, int] | None:
        """(file, line) a DIE says it is declared at (DW_AT_decl_file and DW_AT_decl_line)."""
        file, line = die.attributes.get("DW_AT_decl_file"), die.attributes.get("DW_AT_decl_line")
        if file is None or line is None:
            return None
        name = self._file_names(cast(CompileUnit, die.cu)).get(int(file.value))
        return (name, int(line.value)) if name else None

    def line_starts(self, die: DIE, file: str, line: int, low: int, high: int) -> list[int]:
        """Where the code of FILE:LINE starts in [low, high) of ``die``'s unit: the address of each
        row of that line whose row before is of another line (a block the compiler copied has one
        start in each copy)."""
        unit = cast(CompileUnit, die.cu)
        table = self._lines.get(unit.cu_offset)
        if table is None:
            table = self._lines[unit.cu_offset] = self._line_table(unit)
        if not isinstance(table, Table):
            return []
        wanted = {index for index, name in table.names.items() if same_file(name, file)}
        found = []
        previous: tuple[int, int] | None = None
        for address, index, number in zip(table.addresses, table.files, table.lines):
            here = (index, number)
            if low <= address < high and index in wanted and number == line and previous != here:
                found.append(address)
            previous = here
        return found

    def _file_names(self, unit: CompileUnit) -> dict[int, str]:
        """The unit's file names by index (DW_AT_call_file, DW_AT_decl_file): its line table's, or
        its header's alone."""
        table = self._lines.get(unit.cu_offset)
        if isinstance(table, Table):
            return table.names
        offset = self._stmt_list(unit)
        return {} if offset is None else read_header(*self._line_data(offset)).names

    @staticmethod
    def _stmt_list(unit: CompileUnit) -> int | None:
        attribute = unit.get_top_DIE().attributes.get("DW_AT_stmt_list")
        return attribute.value if attribute is not None and isinstance(attribute.value, int) else None

    def _line_data(self, offset: int) -> tuple[bytes, int, bytes, bytes]:
        """What linetable.decode and read_header take for the unit at ``offset`` in .debug_line."""
        if self._line_sections is None:
            sections: list[Any] = [self.info.debug_line_sec, self.info.debug_line_str_sec, self.info.debug_str_sec]
            line, line_strings, strings = (bytes(s.stream.getvalue()) if s is not None else b"" for s in sections)
            self._line_sections = line, line_strings, strings
        line, line_strings, strings = self._line_sections
        return line, offset, line_strings, strings

    @_guarded
    def inlined_at(self, pc: int) -> list[tuple[str, str | None, int | None]]:
        """The functions inlined at pc, innermost first: (name, the FILE and LINE it was called from
        in the function around it) for each DW_TAG_inlined_subroutine that covers pc."""
        function = self.function_at(pc, scan=False)
        if function is None:
            return []
        found: list[tuple[str, str | None, int | None]] = []
        die: DIE | None = function.die
        files: dict[int, str] | None = None
        while die is not None and len(found) < MAX_INLINE_DEPTH:
            inner = None
            for child in children(die):
                if child.tag in ("DW_TAG_inlined_subroutine", "DW_TAG_lexical_block") and self._covers(child, pc):
                    inner = child
                    break
            if inner is not None and inner.tag == "DW_TAG_inlined_subroutine":
                if files is None:
                    files = self._file_names(cast(CompileUnit, inner.cu))
                call_file = inner.attributes.get("DW_AT_call_file")
                call_line = inner.attributes.get("DW_AT_call_line")
                found.append((self.qualified_name(inner) or "??",
                              files.get(call_file.value) if call_file is not None else None,
                              call_line.value if call_line is not None else None))
            die = inner
        return found[::-1]

    def qualified_name(self, die: DIE) -> str | None:
        """A function's name as gdb prints it: from its linkage name, demangled, else its name
        under its namespaces and classes (``std::thread::functions::sleep``); through an inlined
        copy's or a clone's origin and a method's declaration."""
        cached = self._qualified.get(die.offset)
        if cached is not None or die.offset in self._qualified:
            return cached
        found: str | None = None
        current: DIE | None = die
        named: DIE | None = None
        for _ in range(4):
            if current is None:
                break
            for attribute in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name"):
                value = current.attributes.get(attribute)
                text = value.value.decode("utf-8", "replace") if value is not None and isinstance(value.value, bytes) \
                    else None
                demangled = demangle(text) if text else None
                if demangled is not None:
                    found = qualified(demangled)
                    break
            if found is not None:
                break
            if named is None and name_of(current):
                named = current
            current = origin(current, "DW_AT_abstract_origin") or origin(current, "DW_AT_specification")
        if found is None and named is not None:
            found = self._scoped(named)
        if len(self._qualified) > MAX_NAMES_CACHED:
            self._qualified.clear()
        self._qualified[die.offset] = found
        return found

    def _scoped(self, die: DIE) -> str | None:
        """The name under its enclosing namespaces and types."""
        parts = [name_of(die) or "??"]
        parent = die.get_parent()
        for _ in range(MAX_INLINE_DEPTH):
            if parent is None or parent.tag not in _SCOPES:
                break
            name = name_of(parent)
            if name is None and parent.tag != "DW_TAG_namespace":
                break  # a type without a name (a C++ lambda's): gdb names the function alone
            parts.append(name or "(anonymous namespace)")
            parent = parent.get_parent()
        return "::".join(reversed(parts))

    def _covers(self, die: DIE, pc: int) -> bool:
        """The DIE's code holds pc: its low and high pc, or each entry of its DW_AT_ranges."""
        if "DW_AT_ranges" not in die.attributes:
            return "DW_AT_low_pc" in die.attributes and covers(die, pc)
        return any(begin <= pc < end for begin, end in self._ranges(die))

    def _ranges(self, die: DIE, limit: int = MAX_RANGES) -> Iterator[tuple[int, int]]:
        """[begin, end) of each entry of a DIE's DW_AT_ranges (``limit`` at most), file addresses."""
        ranges = die.attributes["DW_AT_ranges"]
        lists = self.info.range_lists()
        if lists is None or ranges.form == "DW_FORM_rnglistx":
            return
        top = die.cu.get_top_DIE()
        base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
        for entry in lists.get_range_list_at_offset(ranges.value, cu=cast(CompileUnit, die.cu))[:limit]:
            if isinstance(entry, BaseAddressEntry):
                base = entry.base_address
                continue
            begin, end = entry.begin_offset, entry.end_offset
            if not getattr(entry, "is_absolute", False):
                begin, end = begin + base, end + base
            yield begin, end

    @_guarded
    def line_address(self, file: str, line: int, sure: bool = False) -> int | None:
        """Lowest statement address for FILE:LINE (file matched by its trailing path).
        ``sure``: only when the line tables name the file as a string of its own (a quick
        first look over many modules; a linker can keep the name only inside a longer one)."""
        best: int | None = None
        if not self._names_file(file, sure):
            return None
        for cu in self.info.iter_CUs():
            program = self.info.line_program_for_CU(cu)
            if program is None:
                continue
            wanted = {index for index, path in file_names(program, cu).items() if same_file(path, file)}
            if not wanted:  # the header's file table says: no row of this unit is of that file (libc's
                continue  # 2,000 units' rows took 15 s to decode)
            for entry in program.get_entries():
                state = entry.state
                if state is not None and state.line == line and state.is_stmt and not state.end_sequence \
                        and state.file in wanted:
                    best = state.address if best is None else min(best, state.address)
        return best

    def _names_file(self, file: str, sure: bool) -> bool:
        """Whether the file's name is among the strings of the line tables at all: a unit's
        header needs its top DIE, and libc's 2,065 took 16 s to parse for a file it lacks.
        A false yes costs that walk; a no is certain (every file name is a string of
        .debug_line, or of .debug_line_str or .debug_str under DWARF 5)."""
        name = posixpath.basename(file).encode()
        whole = re.compile(rb"(?:^|[\0/])" + re.escape(name) + rb"\0")  # a string of its own, or a path's end
        for section, inline in ((self.info.debug_line_sec, True), (self.info.debug_line_str_sec, False),
                                (self.info.debug_str_sec, False)):
            if section is None:
                continue
            stream = section.stream
            data = stream.getvalue() if hasattr(stream, "getvalue") else None
            if data is None:
                return True  # not in memory: no quick answer
            # in .debug_line (DWARF 4) a name follows a number's last byte, any byte: only its end is
            # sure; the string sections merge a name into the end of a longer one (ld: myring.c
            # holds ring.c), so a name at a string's end is a maybe, for the second look
            if (name + b"\0" in data) if inline or not sure else whole.search(data):
                return True
        return False

    @_guarded
    def after_prologue(self, function: Function) -> int:
        """Where a function breakpoint goes: prologue_end if marked, else the second line."""
        table = self._unit_lines(function.die.cu)  # type: ignore[arg-type]
        low, high = (bisect.bisect_left(table.addresses, a) for a in (function.low, function.high))
        rows = sorted((table.addresses[i], table.lines[i], table.addresses[i] in table.prologue_ends)
                      for i in range(low, high) if table.files[i] != END)
        for address, _, prologue_end in rows:
            if prologue_end:
                return int(address)
        if rows:
            first_line = rows[0][1]
            for address, line, _ in rows:
                if address > function.low and line != first_line:
                    return int(address)
        return function.low

    # -- variables and types ---------------------------------------------------

    @_guarded
    def variables(self, function: Function, pc: int) -> dict[str, Variable]:
        """Parameters and locals in scope at pc (innermost block wins)."""
        found: dict[str, Variable] = {}

        def visit(die: DIE) -> None:
            for child in children(die):
                if child.tag in ("DW_TAG_formal_parameter", "DW_TAG_variable"):
                    name = name_of(child) or name_of(origin(child, "DW_AT_abstract_origin"))
                    if name and ("DW_AT_location" in child.attributes or name not in found):
                        found[name] = Variable(name, child, self.type_of(child))  # no location: optimized out
                elif child.tag == "DW_TAG_lexical_block" and covers(child, pc):
                    visit(child)

        visit(function.die)
        return found

    @_guarded
    def global_names(self) -> list[str]:
        """Every top-level variable's name (a walk of all the units, once)."""
        names = set(self._names_until(lambda: False))
        if not names:  # the fast walk could not read the units: the slow one
            self.scan_all()
        return sorted(names | set(self.globals))

    @_guarded
    def global_variable(self, name: str) -> Variable | None:
        if name not in self.globals:
            self._from_name_index(name)
        self._scan_until(lambda: name in self.globals)
        die = self.globals.get(name)
        return None if die is None else Variable(name, die, self.type_of(die))

    def _from_name_index(self, name: str) -> None:
        """Put the global ``name`` into self.globals through the index of names (a fast
        walk of the units, up to the one that has it), parsing only its DIE."""
        for offset in self._names_until(lambda: name in self._names).get(name, ()):
            die = self.info.get_DIE_from_refaddr(offset)
            if "DW_AT_location" in die.attributes:
                self.globals.setdefault(name, die)
                return

    def _names_until(self, found: Callable[[], bool]) -> dict[str, list[int]]:
        """Top-level variables by name (offsets of their DIEs), from the fast walk of more
        units until ``found()``; what is known when the fast walk cannot read a unit (the
        slow walk then decides)."""
        try:
            info = self._info_data()
            if self._strings is None:
                strings: Any = self.info.debug_str_sec
                self._strings = bytes(strings.stream.getvalue()) if strings is not None else b""
            while not found():
                cu = next(self._name_units, None)
                if cu is None:
                    break
                for offset, tag, name in top_level(cu, info, self._strings):
                    if tag == "DW_TAG_variable" and name:
                        self._names.setdefault(name, []).append(offset)
        except (CannotScan, AttributeError, IndexError, KeyError, ValueError):
            self._name_units = iter(())
        return self._names

    @_guarded
    def type_of(self, die: DIE) -> Type:
        """The type of a variable's (or a type's) DIE."""
        return self._reader.type_of(die)

    @_guarded
    def go_type(self, offset: int) -> tuple[str, Callable[[], Type]] | None:
        """The Go type whose runtime descriptor is at ``offset`` in moduledata.types (the
        dynamic type of an interface): its name, and how to build the type (only when a
        field is read: a type like *net/http.response reaches hundreds of others). The first
        call reads the top DIEs of the unit that holds Go's types (a few tenths of a second
        on a 10 MB binary)."""
        if self._go_types is None:
            self._go_types = {}
            if self._reader.go_types_unit is not None:
                for die in self._top_level(self._reader.go_types_unit):
                    attr = die.attributes.get(GO_RUNTIME_TYPE)  # type: ignore[call-overload]
                    if attr is not None and isinstance(attr.value, int):
                        self._go_types.setdefault(attr.value, die.offset)
        at = self._go_types.get(offset)
        if at is None:
            return None
        die = self.info.get_DIE_from_refaddr(at)
        return name_of(die) or "?", _guarded(lambda: self._reader.convert(die))

    # -- locations ----------------------------------------------------------------

    @_guarded
    def location(self, variable: Variable, frame: Frame | None, function: Function | None) -> Location:
        """Where a variable lives at this stop (frame None: a global, no registers)."""
        attr = variable.die.attributes.get("DW_AT_location")
        if attr is None:
            constant = variable.die.attributes.get("DW_AT_const_value")
            if constant is not None and isinstance(constant.value, int):  # a clone's constant argument
                return Computed(constant.value)
            raise OptimizedOut(f"{variable.name} is optimized out")
        key = (variable.die.offset, frame.pc if frame is not None else -1)
        ops = self._parsed_ops.get(key)
        if ops is None:
            if attr.form in ("DW_FORM_exprloc", "DW_FORM_block1", "DW_FORM_block2", "DW_FORM_block4",
                             "DW_FORM_block"):
                ops = list(self._expr.parse_expr(attr.value))
            else:
                if frame is None:
                    raise OptimizedOut(f"{variable.name} has no fixed address")
                ops = self._ops_at(attr, variable.die, frame.pc, variable.name)
            self._parsed_ops[key] = ops  # a breakpoint's pc is hit again and again
        unit = variable.die.cu.cu_offset
        return self._evaluate(ops, variable.name, frame, function,
                              None if frame is None else lambda kind, arg: self._entry_value(
                                  kind, arg, unit, variable.name, frame))

    def _ops_at(self, attr: Any, die: DIE, pc: int, name: str) -> list[DWARFExprOp]:
        parsed = self._locations.parse_from_attribute(attr, die.cu["version"], die=die)
        if isinstance(parsed, LocationExpr):
            return list(self._expr.parse_expr(parsed.loc_expr))
        base = die.cu.get_top_DIE().attributes.get("DW_AT_low_pc")
        expression = entry_at(parsed, base.value if base is not None else 0, pc)
        if expression is None:
            raise OptimizedOut(f"{name} is optimized out here")
        return list(self._expr.parse_expr(expression))

    def _evaluate(self, ops: list[DWARFExprOp], name: str, frame: Frame | None,
                  function: Function | None, entry_value: EntryValue | None = None) -> Location:
        return execute(ops, name, frame, self.bias, lambda: self._frame_base(name, frame, function), entry_value)

    # -- values at entry, from the caller's call site ------------------------------

    def _entry_value(self, kind: str, arg: int, unit: int, name: str, frame: Frame) -> int:
        """A parameter's value when the function was entered, as gdb reads ``x@entry``: the
        return address names the caller's call site (DW_TAG_call_site), whose parameter
        entry says how the caller computed the value (DW_AT_call_value), evaluated in the
        caller's frame: the registers a call keeps (rbx, rbp, r12-r15, as the callee's unwind
        rules give them back) and its stack. One level: a value the caller itself only had at
        its own entry stays optimized out."""
        if frame.on_branch is not None:
            frame.on_branch()  # which call site depends on the return address: no fixed plan
        cfa = frame.cfa()
        returns = frame.read_word(cfa - 8) - self.bias
        site = self._call_site(returns)
        if site is None:
            raise OptimizedOut(f"{name} is optimized out here (its caller at {returns + self.bias:#x} has no call "
                               "site entry saying what it passed)")
        for parameter in children(site):
            if parameter.tag not in ("DW_TAG_call_site_parameter", "DW_TAG_GNU_call_site_parameter"):
                continue
            if kind == "param":
                target = origin(parameter, "DW_AT_call_parameter") or origin(parameter, "DW_AT_abstract_origin")
                if target is None or target.offset != unit + arg:
                    continue
            else:
                where = parameter.attributes.get("DW_AT_location")
                if where is None or not isinstance(where.value, (list, bytes)):
                    continue
                ops = list(self._expr.parse_expr(where.value))
                if len(ops) != 1 or ops[0].op_name not in (f"DW_OP_reg{arg}", "DW_OP_regx") or \
                        (ops[0].op_name == "DW_OP_regx" and ops[0].args[0] != arg):
                    continue
            value = parameter.attributes.get("DW_AT_call_value") or \
                parameter.attributes.get("DW_AT_GNU_call_site_value")
            if value is None:
                continue
            caller = self._caller_frame(frame, cfa, returns)
            function = self.function_at(returns - 1)
            computed = self._evaluate(list(self._expr.parse_expr(value.value)), name, caller, function)
            return as_value(computed, name, caller)
        raise OptimizedOut(f"{name} is optimized out here (its caller's call site does not say what it passed)")

    def _call_site(self, returns: int) -> DIE | None:
        """The call site DIE whose call returns to ``returns`` (a file address), in the function
        that holds it; found once per return address."""
        if returns in self._call_sites:
            return self._call_sites[returns]
        if not self._scan_call_sites and returns in self._call_sites_unscanned:
            return self._call_sites_unscanned[returns]
        found = None
        function = self.function_at(returns - 1, scan=self._scan_call_sites)
        if function is not None:
            for die in descendants(function.die):
                if die.tag in ("DW_TAG_call_site", "DW_TAG_GNU_call_site"):
                    at = die.attributes.get("DW_AT_call_return_pc") or die.attributes.get("DW_AT_low_pc")
                    if at is not None and at.value == returns:
                        found = die
                        break
        if len(self._call_sites) < MAX_CALL_SITES and (found is not None or self._scan_call_sites):
            self._call_sites[returns] = found
        elif len(self._call_sites_unscanned) < MAX_CALL_SITES:
            self._call_sites_unscanned[returns] = found  # (not found without the scan: maybe found with it)
        return found

    @_guarded
    def call_target(self, returns: int, address_of: Callable[[str], int | None]) -> tuple[int | None, str | None]:
        """What the call that returns to ``returns`` (a file address) called: (where it starts in
        this module, or None; its name, for a function of another module); (None, None) when the
        call site is not described (an indirect call)."""
        self._scan_call_sites = False  # (an unwinder's question: no scan of every unit for it)
        try:
            site = self._call_site(returns)
        finally:
            self._scan_call_sites = True
        return self._called(site, address_of) if site is not None else (None, None)

    @_guarded
    def tail_calls(self, start: int, callee: int, address_of: Callable[[str], int | None]) -> list[tuple[int, int]]:
        """How the function at ``start`` (a file address) reached ``callee`` by tail calls
        (DW_AT_call_tail_call: gdb's tailcall frames): [(each function's start, the address after
        its jump)], the outermost first; [] when the chain is not the only one (gdb's rule: never a
        guess) or there is none."""
        if start == callee:
            return []
        key = (start, callee)
        if key in self._tail_chains:
            return self._tail_chains[key]
        chains: list[list[tuple[int, int]]] = []
        visited = [0]

        def follow(start: int, chain: list[tuple[int, int]]) -> None:
            visited[0] += 1
            if len(chains) > 1 or len(chain) >= MAX_TAIL_CALLS or visited[0] > MAX_TAIL_VISITS:
                return
            function = self.function_at(start, scan=False)
            if function is None or function.low != start:
                return
            for die in descendants(function.die):
                if die.tag not in ("DW_TAG_call_site", "DW_TAG_GNU_call_site") or not (
                        "DW_AT_call_tail_call" in die.attributes or "DW_AT_GNU_tail_call" in die.attributes):
                    continue
                at = die.attributes.get("DW_AT_call_return_pc") or die.attributes.get("DW_AT_low_pc")
                target = self._called(die, address_of)[0]
                if at is None or target is None or any(target == low for low, _ in chain):
                    continue
                step = [*chain, (start, int(at.value))]
                if target == callee:
                    chains.append(step)
                else:
                    follow(target, step)

        follow(start, [])
        found = chains[0] if len(chains) == 1 and visited[0] <= MAX_TAIL_VISITS else []  # (too many: ambiguous)
        if len(self._tail_chains) >= MAX_CALL_SITES:
            self._tail_chains.clear()
        self._tail_chains[key] = found
        return found

    def _called(self, site: DIE, address_of: Callable[[str], int | None]) -> tuple[int | None, str | None]:
        """Where the function a call site calls starts (file address: its definition's low pc,
        else its name through the module's symbols), and its name."""
        target = origin(site, "DW_AT_call_origin") or origin(site, "DW_AT_abstract_origin")
        name = None
        for _ in range(4):
            if target is None:
                break
            low = target.attributes.get("DW_AT_low_pc")
            if low is not None:
                return int(low.value), name
            for attribute in ("DW_AT_linkage_name", "DW_AT_MIPS_linkage_name", "DW_AT_name"):
                value = target.attributes.get(attribute)
                if value is not None and isinstance(value.value, bytes):
                    text = value.value.decode("utf-8", "replace")
                    name = name or text
                    found = address_of(text)
                    if found is not None:
                        return found, text
            target = origin(target, "DW_AT_specification") or origin(target, "DW_AT_abstract_origin")
        return None, name

    def _caller_frame(self, frame: Frame, cfa: int, returns: int) -> Frame:
        """The caller's registers at the call, as far as they are known: at the callee's first
        instruction, all of them (nothing of the callee has run); past it, those a call keeps
        (from their save slots once the callee saved them); and rsp (the CFA)."""
        function = self.function_at(frame.pc)
        if function is not None and function.low == frame.pc:
            registers = {name: value for name, value in frame.registers.items() if name not in ("rsp", "rip")}
            registers["rsp"] = cfa
            return Frame(registers, returns, cfa=lambda: self.cfa(returns, registers), read_word=frame.read_word)
        saved = self._frames.saved(frame.pc)
        registers = {}
        for number in CALLEE_SAVED:
            name = REGISTERS[number]
            if number in saved:
                registers[name] = frame.read_word(cfa + saved[number])
            elif name in frame.registers:
                registers[name] = frame.registers[name]
        registers["rsp"] = cfa
        return Frame(registers, returns, cfa=lambda: self.cfa(returns, registers), read_word=frame.read_word)

    def _frame_base(self, name: str, frame: Frame | None, function: Function | None) -> int:
        if frame is None or function is None:
            raise OptimizedOut(f"{name} needs a frame")
        holder: DIE | None = function.die
        for _ in range(64):  # an inlined copy's frame base is its enclosing function's
            if holder is None or holder.tag == "DW_TAG_subprogram":
                break
            holder = holder.get_parent()
        attr = holder.attributes.get("DW_AT_frame_base") if holder is not None else None
        if attr is None:
            raise OptimizedOut(f"{name}: the function has no frame base")
        ops = list(self._expr.parse_expr(attr.value))
        if any(op.op_name == "DW_OP_fbreg" for op in ops):  # a frame base defined by itself
            raise OptimizedOut(f"{name}: the function's frame base refers to itself")
        return as_address(self._evaluate(ops, name, frame, None), name, frame)

    # -- call frame information --------------------------------------------------

    @_guarded
    def cfa_rule(self, pc: int) -> tuple[int, int] | None:
        """(DWARF register number, offset) of the CFA rule at pc (file address), or None."""
        rule = self._cfa_rules.get(pc)
        if rule is None:
            rule = self._cfa_rules[pc] = self._frames.rule(pc) or (-1, 0)
        return None if rule[0] < 0 else rule

    @_guarded
    def cfa(self, pc: int, registers: dict[str, int]) -> int:
        """The canonical frame address at pc (file address), from .eh_frame or .debug_frame."""
        rule = self._cfa_rules.get(pc)
        if rule is None:
            rule = self._cfa_rules[pc] = self._frames.rule(pc) or (-1, 0)
        if rule[0] < 0 or rule[0] >= len(REGISTERS):
            raise OptimizedOut(f"no call frame information for {pc:#x}")
        return registers[REGISTERS[rule[0]]] + rule[1]

