"""DWARF: functions, globals, variables in scope, their types and locations, line table, CFA.

Everything here works on *file* addresses (as in the ELF file); the backend adds
the load bias. Built once, before anything in the target is stopped.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from elftools.dwarf.compileunit import CompileUnit
from elftools.dwarf.die import DIE
from elftools.dwarf.dwarf_expr import DWARFExprOp, DWARFExprParser
from elftools.dwarf.dwarfinfo import DWARFInfo
from elftools.dwarf.locationlists import BaseAddressEntry as LocationBase
from elftools.dwarf.locationlists import LocationEntry, LocationExpr, LocationParser
from elftools.dwarf.ranges import BaseAddressEntry
from elftools.elf.elffile import ELFFile

from sampler.debuginfo.cfi import CallFrames
from sampler.debuginfo.dwarfscan import CannotScan, top_level, top_level_offsets
from sampler.debuginfo.untrusted import converting

# DWARF register numbers on x86-64 -> names in struct user_regs_struct
REGISTERS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")


GO_RUNTIME_TYPE = 0x2904
"""DW_AT_go_runtime_type: where a Go type's runtime descriptor is, as an offset into the
module's types section (moduledata.types), as Delve reads it."""
GO_INTERFACES = ("runtime.iface", "runtime.eface")
"""What Go's DWARF says an interface is, once its named typedefs are followed."""


def is_interface(t: Type | None) -> bool:
    """A Go interface (iface or eface)."""
    return isinstance(t, Struct) and t.name in GO_INTERFACES


class OptimizedOut(Exception):
    """The variable has no location at this address."""


# -- types --------------------------------------------------------------------

@dataclass
class Type:
    name: str
    size: int


@dataclass
class Scalar(Type):
    kind: str = "signed"
    """signed, unsigned, float, bool or char."""


@dataclass
class Pointer(Type):
    target: Type | None = None


@dataclass
class Member:
    name: str
    offset: int
    type: Type


@dataclass
class Struct(Type):
    members: dict[str, Member] = field(default_factory=dict)
    bases: list[Member] = field(default_factory=list)
    """C++ base classes (DW_TAG_inheritance): their fields are this struct's too."""

    def member(self, name: str) -> tuple[int, Member] | None:
        """A field by name, searched in the bases too: (offset of its base, member)."""
        found = self.members.get(name)
        if found is not None:
            return 0, found
        for base in self.bases:
            if isinstance(base.type, Struct):
                inner = base.type.member(name)
                if inner is not None:
                    return base.offset + inner[0], inner[1]
        return None


@dataclass
class Array(Type):
    element: Type | None = None
    count: int | None = None


@dataclass
class Enum(Type):
    signed: bool = False
    names: dict[int, str] = field(default_factory=dict)


_ENCODINGS = {0x02: "bool", 0x04: "float", 0x05: "signed", 0x06: "signed", 0x07: "unsigned",
              0x08: "unsigned", 0x10: "unsigned"}
_CHAR_ENCODINGS = {0x06: "signed", 0x08: "unsigned"}


# -- locations ----------------------------------------------------------------

@dataclass(frozen=True)
class InMemory:
    address: int


@dataclass(frozen=True)
class InRegister:
    register: str


@dataclass(frozen=True)
class Computed:
    value: int


@dataclass(frozen=True)
class InBytes:
    """A value put together from pieces (DW_OP_piece): a Go string or interface passed in
    two registers, for instance."""

    data: bytes


Location = InMemory | InRegister | Computed | InBytes


@dataclass(frozen=True)
class Frame:
    """What location expressions need at a stop: registers and the CFA."""

    registers: dict[str, int]
    pc: int
    """File address of the stop."""
    cfa: Callable[[], int]
    read_word: Callable[[int], int]


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


class Malformed(Exception):
    """The debug information cannot be read: truncated, corrupted, or a form we do not know."""


_guarded = converting(Malformed, keep=(OptimizedOut,))
"""Debug information is input sampler does not control: whatever the parser raises on bad
bytes becomes Malformed, one clear message."""


class Debug:
    """The DWARF of one module, read lazily: a function is found through the address
    ranges of its compilation unit, and only the units a name or address needs are parsed
    (a full walk only when a name is not found otherwise)."""

    def __init__(self, elf: ELFFile, bias: int, cfi_elf: ELFFile | None = None) -> None:
        """``bias``: where the module is loaded in the process, less its file addresses
        (0 for a fixed-address executable); added to static addresses (DW_OP_addr).
        ``cfi_elf``: the loaded file, whose .eh_frame a separate debug file lacks."""
        self.info: DWARFInfo = elf.get_dwarf_info()
        eh_frame = elf.get_section_by_name(".eh_frame")
        own = eh_frame is not None and eh_frame["sh_type"] != "SHT_NOBITS"
        self._frames = CallFrames(elf if own else cfi_elf, self.info)
        self._cfa_rules: dict[int, tuple[int, int]] = {}
        self._expr = DWARFExprParser(self.info.structs)
        self._locations = LocationParser(self.info.location_lists())
        self._types: dict[int, Type] = {}
        self.functions: dict[str, Function] = {}
        """Functions by name, of the units parsed so far (all of them after ``scan_all``)."""
        self.globals: dict[str, DIE] = {}
        """Global variables by name, of the units parsed so far."""
        self._unit_functions: dict[int, list[Function]] = {}
        self._units: Iterator[CompileUnit] = self.info.iter_CUs()
        self._scanned = False
        self._aranges: Any = None
        self._go_types_unit: Any = None  # the unit (CompileUnit or TypeUnit) with Go's types
        self._go_types: dict[int, int] | None = None
        self._info_bytes: bytes | None = None
        self._parsed_ops: dict[tuple[int, int], list[DWARFExprOp]] = {}
        self._names: dict[str, list[int]] = {}
        self._name_units: Iterator[CompileUnit] = self.info.iter_CUs()
        self._strings: bytes | None = None
        self.bias = bias

    # -- index ------------------------------------------------------------

    def _index_unit(self, cu: CompileUnit) -> list[Function]:
        known = self._unit_functions.get(cu.cu_offset)
        if known is not None:
            return known
        functions: list[Function] = []
        for die in self._top_level(cu):
            if die.tag == "DW_TAG_subprogram":
                function = self._function(die)
                if function is not None:
                    functions.append(function)
                    self.functions.setdefault(function.name, function)
            elif die.tag == "DW_TAG_variable" and "DW_AT_location" in die.attributes:
                name = _name(die) or _name(_origin(die, "DW_AT_specification"))
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

    def _top_level(self, cu: CompileUnit) -> Iterator[DIE]:
        """The top DIE's children, found by the fast walk (dwarfscan) and only they parsed;
        pyelftools' walk when the fast one cannot read the unit."""
        top = cu.get_top_DIE()
        try:
            offsets = top_level_offsets(cu, self._info_data())
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

    @staticmethod
    def _function(die: DIE) -> Function | None:
        low = die.attributes.get("DW_AT_low_pc")
        high = die.attributes.get("DW_AT_high_pc")
        name = _name(die) or _name(_origin(die, "DW_AT_abstract_origin")) \
            or _name(_origin(die, "DW_AT_specification"))
        if low is None or high is None or not name:
            return None
        end = high.value if high.form == "DW_FORM_addr" else low.value + high.value
        return Function(name, low.value, end, die)

    @_guarded
    def function_named(self, name: str) -> Function | None:
        self._scan_until(lambda: name in self.functions)
        return self.functions.get(name)

    @_guarded
    def function_at(self, pc: int) -> Function | None:
        unit = self._unit_at(pc)
        if unit is None:
            unit = self._unit_by_ranges(pc)
        try:
            candidates = self._index_unit(unit) if unit is not None else None
        except Exception:  # aranges pointed at something that is not a unit: walk them all
            candidates = None
        if candidates is None or not any(f.low <= pc < f.high for f in candidates):
            self._scan_until(lambda: False)
            candidates = [f for fs in self._unit_functions.values() for f in fs]
        for function in candidates:
            if function.low <= pc < function.high:
                return function
        return None

    def _unit_by_ranges(self, pc: int) -> CompileUnit | None:
        """Without .debug_aranges (Go writes none): the unit whose top DIE's ranges cover pc,
        reading only the top DIE of each unit."""
        try:
            lists = self.info.range_lists()
            for cu in self.info.iter_CUs():
                top = cu.get_top_DIE()
                if "DW_AT_ranges" in top.attributes and lists is not None:
                    base = top.attributes["DW_AT_low_pc"].value if "DW_AT_low_pc" in top.attributes else 0
                    for entry in lists.get_range_list_at_offset(top.attributes["DW_AT_ranges"].value, cu=cu):
                        if isinstance(entry, BaseAddressEntry):
                            base = entry.base_address
                            continue
                        begin, end = entry.begin_offset, entry.end_offset
                        if not getattr(entry, "is_absolute", False):
                            begin, end = begin + base, end + base
                        if begin <= pc < end:
                            return cu
                elif _covers(top, pc) and "DW_AT_low_pc" in top.attributes:
                    return cu
        except Exception:  # unreadable ranges: the caller walks every unit
            return None
        return None

    def _unit_at(self, pc: int) -> CompileUnit | None:
        """The unit .debug_aranges gives for pc; None without (or with broken) aranges,
        and the caller walks the units instead."""
        try:
            if self._aranges is None:
                self._aranges = self.info.get_aranges() or False
            if self._aranges is False or not self._aranges.entries:
                return None
            offset = self._aranges.cu_offset_at_addr(pc)
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
            files = _file_names(program, cu)
            for entry in program.get_entries():
                if entry.state is not None:
                    yield files.get(entry.state.file, ""), entry.state

    @_guarded
    def line_address(self, file: str, line: int) -> int | None:
        """Lowest statement address for FILE:LINE (file matched by its trailing path)."""
        best: int | None = None
        for path, state in self._rows(self.info.iter_CUs()):
            if state.line == line and state.is_stmt and not state.end_sequence and same_file(path, file):
                best = state.address if best is None else min(best, state.address)
        return best

    @_guarded
    def after_prologue(self, function: Function) -> int:
        """Where a function breakpoint goes: prologue_end if marked, else the second line."""
        rows = sorted((s.address, s.line, s.prologue_end) for _, s in self._rows([function.die.cu])  # type: ignore[list-item]
                      if function.low <= s.address < function.high and not s.end_sequence)
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
                    name = _name(child) or _name(_origin(child, "DW_AT_abstract_origin"))
                    if name and ("DW_AT_location" in child.attributes or name not in found):
                        found[name] = Variable(name, child, self.type_of(child))  # no location: optimized out
                elif child.tag == "DW_TAG_lexical_block" and _covers(child, pc):
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
        ref = die if "DW_AT_type" in die.attributes else \
            _origin(die, "DW_AT_abstract_origin") or _origin(die, "DW_AT_specification")
        if ref is None or "DW_AT_type" not in ref.attributes:
            return Type("void", 0)
        return self._type(ref.get_DIE_from_attribute("DW_AT_type"))

    def _type(self, die: DIE) -> Type:
        cached = self._types.get(die.offset)
        if cached is not None:
            return cached
        tag = die.tag
        name = _name(die) or ""
        size = die.attributes["DW_AT_byte_size"].value if "DW_AT_byte_size" in die.attributes else 0
        if tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                   "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
            alias = self.type_of(die)
            self._types[die.offset] = alias
            return alias
        result: Type
        if tag == "DW_TAG_base_type":
            encoding = die.attributes["DW_AT_encoding"].value
            kind = _ENCODINGS.get(encoding, "unsigned")
            if "char" in name and encoding in _CHAR_ENCODINGS:
                kind = _CHAR_ENCODINGS[encoding]
            result = Scalar(name, size, kind)
        elif tag == "DW_TAG_pointer_type":
            pointer = Pointer(name or "pointer", size or 8)
            self._types[die.offset] = pointer  # before the target: lists point to themselves
            pointer.target = self.type_of(die)
            if not pointer.name or pointer.name == "pointer":
                pointer.name = f"{pointer.target.name}*"
            return pointer
        elif tag in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"):
            struct = Struct(name or "struct", size)
            self._types[die.offset] = struct
            if name in GO_INTERFACES:  # Go keeps its types in one unit: where interfaces are
                self._go_types_unit = die.cu
            for child in children(die):
                if child.tag not in ("DW_TAG_member", "DW_TAG_inheritance") \
                        or "DW_AT_declaration" in child.attributes:  # a C++ static member
                    continue
                offset = child.attributes.get("DW_AT_data_member_location")
                value = offset.value if offset is not None and isinstance(offset.value, int) else 0
                if child.tag == "DW_TAG_inheritance":
                    struct.bases.append(Member("", value, self.type_of(child)))
                elif _name(child):
                    struct.members[_name(child) or ""] = Member(_name(child) or "", value, self.type_of(child))
            return struct
        elif tag == "DW_TAG_array_type":
            count = None
            for child in children(die):
                if child.tag == "DW_TAG_subrange_type":
                    if "DW_AT_count" in child.attributes:
                        count = child.attributes["DW_AT_count"].value
                    elif "DW_AT_upper_bound" in child.attributes:
                        count = child.attributes["DW_AT_upper_bound"].value + 1
                    break
            element = self.type_of(die)
            result = Array(name or f"{element.name}[]", size or element.size * (count or 0), element, count)
        elif tag == "DW_TAG_enumeration_type":
            names = {c.attributes["DW_AT_const_value"].value: _name(c) or ""
                     for c in children(die) if c.tag == "DW_TAG_enumerator"}
            underlying = self.type_of(die)
            signed = (isinstance(underlying, Scalar) and underlying.kind == "signed") \
                or any(v < 0 for v in names)
            result = Enum(name or "enum", size or 4, signed, names)
        else:
            result = Type(name or str(tag).removeprefix("DW_TAG_"), size)
        self._types[die.offset] = result
        return result

    @_guarded
    def go_type(self, offset: int) -> tuple[str, Callable[[], Type]] | None:
        """The Go type whose runtime descriptor is at ``offset`` in moduledata.types (the
        dynamic type of an interface): its name, and how to build the type (only when a
        field is read: a type like *net/http.response reaches hundreds of others). The first
        call reads the top DIEs of the unit that holds Go's types (a few tenths of a second
        on a 10 MB binary)."""
        if self._go_types is None:
            self._go_types = {}
            if self._go_types_unit is not None:
                for die in self._top_level(self._go_types_unit):
                    attr = die.attributes.get(GO_RUNTIME_TYPE)  # type: ignore[call-overload]
                    if attr is not None and isinstance(attr.value, int):
                        self._go_types.setdefault(attr.value, die.offset)
        at = self._go_types.get(offset)
        if at is None:
            return None
        die = self.info.get_DIE_from_refaddr(at)
        return _name(die) or "?", _guarded(lambda: self._type(die))

    # -- locations ----------------------------------------------------------------

    @_guarded
    def location(self, variable: Variable, frame: Frame | None, function: Function | None) -> Location:
        """Where a variable lives at this stop (frame None: a global, no registers)."""
        attr = variable.die.attributes.get("DW_AT_location")
        if attr is None:
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
                ops = self._ops_at(attr, variable.die, frame.pc)
            self._parsed_ops[key] = ops  # a breakpoint's pc is hit again and again
        return self._evaluate(ops, variable.name, frame, function)

    def _ops_at(self, attr: Any, die: DIE, pc: int) -> list[DWARFExprOp]:
        parsed = self._locations.parse_from_attribute(attr, die.cu["version"], die=die)
        if isinstance(parsed, LocationExpr):
            return list(self._expr.parse_expr(parsed.loc_expr))
        base = die.cu.get_top_DIE().attributes.get("DW_AT_low_pc")
        base_address = base.value if base is not None else 0
        for entry in parsed:
            if isinstance(entry, LocationBase):
                base_address = entry.base_address
                continue
            if not isinstance(entry, LocationEntry):
                continue
            begin, end = entry.begin_offset, entry.end_offset
            if not getattr(entry, "is_absolute", False):
                begin, end = begin + base_address, end + base_address
            if begin <= pc < end:
                return list(self._expr.parse_expr(entry.loc_expr))
        raise OptimizedOut(f"{_name(die)} is optimized out here")

    def _evaluate(self, ops: list[DWARFExprOp], name: str, frame: Frame | None,
                  function: Function | None) -> Location:
        stack: list[int] = []
        result: Location | None = None
        pieces: list[tuple[Location | None, int]] = []

        def register(number: int) -> int:
            if frame is None:
                raise OptimizedOut(f"{name} needs registers (is it a local?)")
            return frame.registers[REGISTERS[number]]

        for op in ops:
            kind = str(op.op_name)
            if kind == "DW_OP_addr":
                stack.append(op.args[0] + self.bias)
            elif kind.startswith("DW_OP_reg") and kind != "DW_OP_regx":
                result = InRegister(REGISTERS[int(kind.removeprefix("DW_OP_reg"))])
            elif kind == "DW_OP_regx":
                result = InRegister(REGISTERS[op.args[0]])
            elif kind.startswith("DW_OP_breg") and kind != "DW_OP_bregx":
                stack.append(register(int(kind.removeprefix("DW_OP_breg"))) + op.args[0])
            elif kind == "DW_OP_bregx":
                stack.append(register(op.args[0]) + op.args[1])
            elif kind == "DW_OP_fbreg":
                stack.append(self._frame_base(name, frame, function) + op.args[0])
            elif kind == "DW_OP_call_frame_cfa":
                if frame is None:
                    raise OptimizedOut(f"{name} needs a frame")
                stack.append(frame.cfa())
            elif kind.startswith("DW_OP_lit"):
                stack.append(int(kind.removeprefix("DW_OP_lit")))
            elif kind.startswith("DW_OP_const"):
                stack.append(op.args[0])
            elif kind == "DW_OP_plus_uconst":
                stack.append(stack.pop() + op.args[0])
            elif kind in ("DW_OP_plus", "DW_OP_minus"):
                b, a = stack.pop(), stack.pop()
                stack.append(a + b if kind == "DW_OP_plus" else a - b)
            elif kind == "DW_OP_deref":
                if frame is None:
                    raise OptimizedOut(f"{name}: cannot dereference without a stop")
                stack.append(frame.read_word(stack.pop()))
            elif kind == "DW_OP_stack_value":
                result = Computed(stack.pop())
            elif kind == "DW_OP_piece":
                if result is None and stack:
                    result = InMemory(stack.pop())
                pieces.append((result, op.args[0]))
                result = None
            elif kind in ("DW_OP_entry_value", "DW_OP_GNU_entry_value"):
                raise OptimizedOut(f"{name} is optimized out here (only its entry value is known)")
            else:
                raise OptimizedOut(f"{name}: unsupported DWARF location operation {kind}")
        if pieces:
            return _joined(pieces, name, frame)
        if result is not None:
            return result
        if stack:
            return InMemory(stack.pop())
        raise OptimizedOut(f"{name} is optimized out here")

    def _frame_base(self, name: str, frame: Frame | None, function: Function | None) -> int:
        if frame is None or function is None:
            raise OptimizedOut(f"{name} needs a frame")
        attr = function.die.attributes.get("DW_AT_frame_base")
        if attr is None:
            raise OptimizedOut(f"{name}: the function has no frame base")
        ops = list(self._expr.parse_expr(attr.value))
        if any(op.op_name == "DW_OP_fbreg" for op in ops):  # a frame base defined by itself
            raise OptimizedOut(f"{name}: the function's frame base refers to itself")
        location = self._evaluate(ops, name, frame, None)
        if isinstance(location, InRegister):
            return frame.registers[location.register]
        if isinstance(location, InMemory):
            return location.address
        if isinstance(location, InBytes):
            raise OptimizedOut(f"{name}: the function's frame base is made of pieces")
        return location.value

    # -- call frame information --------------------------------------------------

    @_guarded
    def cfa(self, pc: int, registers: dict[str, int]) -> int:
        """The canonical frame address at pc (file address), from .eh_frame or .debug_frame."""
        rule = self._cfa_rules.get(pc)
        if rule is None:
            rule = self._cfa_rules[pc] = self._frames.rule(pc) or (-1, 0)
        if rule[0] < 0 or rule[0] >= len(REGISTERS):
            raise OptimizedOut(f"no call frame information for {pc:#x}")
        return registers[REGISTERS[rule[0]]] + rule[1]


def children(die: DIE) -> Iterator[DIE]:
    """A DIE's children, like pyelftools' iter_children, but refusing to go backwards or
    past the unit: a corrupted DW_AT_sibling must not loop forever."""
    if not die.has_children:
        return
    cu = die.cu
    end = cu.cu_offset + cu["unit_length"] + cu.structs.initial_length_field_size()
    offset = die.offset + die.size
    while True:
        if not die.offset < offset < end:
            raise Malformed(f"a DIE at {offset:#x} is outside its unit")
        child = cu._get_cached_DIE(offset)  # the parse pyelftools itself uses
        child.set_parent(die)
        if child.is_null():
            return
        yield child
        if not child.has_children:
            following = offset + child.size
        elif "DW_AT_sibling" in child.attributes:
            sibling = child.attributes["DW_AT_sibling"]
            following = sibling.value if sibling.form == "DW_FORM_ref_addr" else sibling.value + cu.cu_offset
        else:
            following = child.offset + child.size
            for last in _descendants(child):
                following = last.offset + last.size
        if following <= offset:
            raise Malformed(f"a DIE at {offset:#x} points back to {following:#x}")
        offset = following


def _descendants(die: DIE) -> Iterator[DIE]:
    """All DIEs under a DIE in file order, its terminating null DIE last."""
    cu = die.cu
    end = cu.cu_offset + cu["unit_length"] + cu.structs.initial_length_field_size()
    offset = die.offset + die.size
    depth = 1
    while depth > 0:
        if not offset < end:
            raise Malformed(f"a DIE at {offset:#x} is outside its unit")
        child = cu._get_cached_DIE(offset)
        yield child
        offset += child.size
        if child.is_null():
            depth -= 1
        elif child.has_children:
            depth += 1


def _joined(pieces: list[tuple[Location | None, int]], name: str, frame: Frame | None) -> Location:
    """The value of a composite location: one piece is where the value starts (a scalar
    fits in it); several are read now and joined."""
    first = pieces[0][0]
    if len(pieces) == 1 or frame is None:
        return first if first is not None else _optimized(name)
    data = b""
    for where, size in pieces:
        if where is None:
            raise OptimizedOut(f"{name} is partly optimized out here")
        if isinstance(where, InRegister):
            word = frame.registers[where.register]
        elif isinstance(where, Computed):
            word = where.value
        elif isinstance(where, InMemory) and size <= 8:
            word = frame.read_word(where.address)
        else:
            raise OptimizedOut(f"{name}: a piece of {size} bytes in {where} is not supported")
        data += (word & (1 << 64) - 1).to_bytes(8, "little")[:size]
    return InBytes(data)


def _optimized(name: str) -> Location:
    raise OptimizedOut(f"{name} is optimized out here")


def _name(die: DIE | None) -> str | None:
    if die is None:
        return None
    attr = die.attributes.get("DW_AT_name")
    if attr is None:
        return None
    value = attr.value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _origin(die: DIE, attribute: str) -> DIE | None:
    return die.get_DIE_from_attribute(attribute) if attribute in die.attributes else None


def _covers(die: DIE, pc: int) -> bool:
    low = die.attributes.get("DW_AT_low_pc")
    high = die.attributes.get("DW_AT_high_pc")
    if low is not None and high is not None:
        end = high.value if high.form == "DW_FORM_addr" else low.value + high.value
        return bool(low.value <= pc < end)
    return "DW_AT_ranges" in die.attributes  # ranges: be generous, innermost names win anyway


def _file_names(program: Any, cu: CompileUnit) -> dict[int, str]:
    header = program.header
    version = header["version"]
    dirs = [d.decode() if isinstance(d, bytes) else str(d) for d in header.get("include_directory", [])]
    names: dict[int, str] = {}
    for index, entry in enumerate(header.get("file_entry", [])):
        file_name = entry.name.decode() if isinstance(entry.name, bytes) else str(entry.name)
        dir_index = entry.dir_index
        if version >= 5:
            directory = dirs[dir_index] if dir_index < len(dirs) else ""
            names[index] = posixpath.join(directory, file_name)
        else:
            directory = dirs[dir_index - 1] if 0 < dir_index <= len(dirs) else ""
            names[index + 1] = posixpath.join(directory, file_name)
    return names


def same_file(path: str, wanted: str) -> bool:
    return path == wanted or path.endswith("/" + wanted.lstrip("./"))
