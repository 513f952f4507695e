"""Where a variable lives at a stop: the location model and the DW_OP interpreter.

The interpreter knows no process: it takes the registers, a word reader and the CFA
through a ``Frame`` (as Delve's op.ExecuteStackProgram takes its registers and memory
reader), so it runs against a live stop, a recorded one or a test's dictionary alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Union

from elftools.dwarf.dwarf_expr import DWARFExprOp
from elftools.dwarf.locationlists import BaseAddressEntry as LocationBase
from elftools.dwarf.locationlists import LocationEntry

# DWARF register numbers on x86-64 -> names in struct user_regs_struct
REGISTERS = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
             "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")


class OptimizedOut(Exception):
    """The variable has no location at this address."""


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


Location = Union[InMemory, InRegister, Computed, InBytes]


@dataclass(frozen=True)
class Frame:
    """What location expressions need at a stop: registers and the CFA."""

    registers: dict[str, int]
    pc: int
    """File address of the stop."""
    cfa: Callable[[], int]
    read_word: Callable[[int], int]
    on_branch: Callable[[], None] | None = None
    """Told when a location's reads depend on the data (a parameter's value at entry, found
    through the return address's call site): no read plan can stand for it (plan.py)."""


EntryValue = Callable[[str, int], int]
"""A parameter's value at the function's entry, from its caller's call site: ("param", the
parameter DIE's unit offset: DW_OP_GNU_parameter_ref) or ("reg", a DWARF register number:
DW_OP_entry_value(DW_OP_regN))."""


def execute(ops: Sequence[DWARFExprOp], name: str, frame: Frame | None, bias: int,
            frame_base: Callable[[], int], entry_value: EntryValue | None = None) -> Location:
    """Run a location expression. ``bias`` is added to static addresses (DW_OP_addr);
    ``frame_base`` gives DW_AT_frame_base when DW_OP_fbreg needs it; ``frame`` None: a
    global, no registers; ``entry_value`` answers DW_OP_entry_value and
    DW_OP_GNU_parameter_ref (None: they are optimized out)."""
    stack: list[int] = []
    result: Location | None = None
    pieces: list[tuple[Location | None, int]] = []

    def register(number: int) -> int:
        if frame is None:
            raise OptimizedOut(f"{name} needs registers (is it a local?)")
        if not 0 <= number < len(REGISTERS) or REGISTERS[number] not in frame.registers:
            raise OptimizedOut(f"{name} is optimized out here (it needs a register the caller did not keep)")
        return frame.registers[REGISTERS[number]]

    for op in ops:
        kind = str(op.op_name)
        if kind == "DW_OP_addr":
            stack.append(op.args[0] + bias)
        elif kind.startswith("DW_OP_reg") and kind != "DW_OP_regx":
            result = InRegister(REGISTERS[int(kind.removeprefix("DW_OP_reg"))])
        elif kind == "DW_OP_regx":
            result = InRegister(REGISTERS[op.args[0]])
        elif kind.startswith("DW_OP_breg") and kind != "DW_OP_bregx":
            stack.append(register(int(kind.removeprefix("DW_OP_breg"))) + op.args[0])
        elif kind == "DW_OP_bregx":
            stack.append(register(op.args[0]) + op.args[1])
        elif kind == "DW_OP_fbreg":
            stack.append(frame_base() + op.args[0])
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
        elif kind in BINARY:
            b, a = stack.pop(), stack.pop()
            stack.append(BINARY[kind](a, b) & MASK)
        elif kind in UNARY:
            stack.append(UNARY[kind](stack.pop()) & MASK)
        elif kind == "DW_OP_dup":
            stack.append(stack[-1])
        elif kind == "DW_OP_drop":
            stack.pop()
        elif kind == "DW_OP_over":
            stack.append(stack[-2])
        elif kind == "DW_OP_pick":
            stack.append(stack[-1 - op.args[0]])
        elif kind == "DW_OP_swap":
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif kind == "DW_OP_rot":
            stack[-1], stack[-2], stack[-3] = stack[-2], stack[-3], stack[-1]
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
            inner = op.args[0] if op.args and isinstance(op.args[0], list) else []
            number = _register_number(inner[0]) if len(inner) == 1 else None
            if entry_value is None or frame is None or number is None:
                raise OptimizedOut(f"{name} is optimized out here (only its entry value is known)")
            stack.append(entry_value("reg", number))
        elif kind == "DW_OP_GNU_parameter_ref":
            if entry_value is None or frame is None:
                raise OptimizedOut(f"{name} is optimized out here (only its caller knows it)")
            stack.append(entry_value("param", int(op.args[0])))
        else:
            raise OptimizedOut(f"{name}: unsupported DWARF location operation {kind}")
    if pieces:
        return _joined(pieces, name, frame)
    if result is not None:
        return result
    if stack:
        return InMemory(stack.pop())
    raise OptimizedOut(f"{name} is optimized out here")


MASK = (1 << 64) - 1
"""The DWARF stack holds address-sized (64-bit) values."""


def _signed(value: int) -> int:
    return value - (1 << 64) if value >> 63 & 1 else value


def _divided(a: int, b: int) -> int:
    if b == 0:
        raise OptimizedOut("a location expression divides by zero")
    quotient = abs(_signed(a)) // abs(_signed(b))
    return quotient if (_signed(a) < 0) == (_signed(b) < 0) else -quotient


def _modulo(a: int, b: int) -> int:
    if b == 0:
        raise OptimizedOut("a location expression divides by zero")
    return (a & MASK) % (b & MASK)


BINARY: dict[str, Callable[[int, int], int]] = {
    "DW_OP_plus": lambda a, b: a + b, "DW_OP_minus": lambda a, b: a - b, "DW_OP_mul": lambda a, b: a * b,
    "DW_OP_and": lambda a, b: a & b, "DW_OP_or": lambda a, b: a | b, "DW_OP_xor": lambda a, b: a ^ b,
    "DW_OP_shl": lambda a, b: a << b if b < 64 else 0, "DW_OP_shr": lambda a, b: (a & MASK) >> b if b < 64 else 0,
    "DW_OP_shra": lambda a, b: _signed(a) >> min(b, 63), "DW_OP_div": _divided, "DW_OP_mod": _modulo,
    "DW_OP_eq": lambda a, b: int(a == b), "DW_OP_ne": lambda a, b: int(a != b),
    "DW_OP_lt": lambda a, b: int(_signed(a) < _signed(b)), "DW_OP_gt": lambda a, b: int(_signed(a) > _signed(b)),
    "DW_OP_le": lambda a, b: int(_signed(a) <= _signed(b)), "DW_OP_ge": lambda a, b: int(_signed(a) >= _signed(b)),
}
"""DWARF's two-operand stack operations (the second from the top is the left operand)."""
UNARY: dict[str, Callable[[int], int]] = {
    "DW_OP_neg": lambda a: -_signed(a), "DW_OP_not": lambda a: ~a, "DW_OP_abs": lambda a: abs(_signed(a)),
}


def _register_number(op: DWARFExprOp) -> int | None:
    """N of DW_OP_regN or DW_OP_regx N; None for any other operation."""
    kind = str(op.op_name)
    if kind == "DW_OP_regx":
        return int(op.args[0])
    if kind.startswith("DW_OP_reg") and kind.removeprefix("DW_OP_reg").isdigit():
        return int(kind.removeprefix("DW_OP_reg"))
    return None


def as_value(location: Location, name: str, frame: Frame) -> int:
    """What a DWARF expression that computes a value (a call site's DW_AT_call_value) gave."""
    if isinstance(location, InRegister):
        return frame.registers[location.register] if location.register in frame.registers else \
            _optimized_value(name)
    if isinstance(location, InMemory):
        return location.address
    if isinstance(location, Computed):
        return location.value
    raise OptimizedOut(f"{name}: a value in pieces at its call site is not supported")


def _optimized_value(name: str) -> int:
    raise OptimizedOut(f"{name} is optimized out here (its caller's register is not known)")


def as_address(location: Location, name: str, frame: Frame) -> int:
    """A location as the address it stands for (a frame base)."""
    if isinstance(location, InRegister):
        return frame.registers[location.register]
    if isinstance(location, InMemory):
        return location.address
    if isinstance(location, InBytes):
        raise OptimizedOut(f"{name}: the function's frame base is made of pieces")
    return location.value


def entry_at(entries: Iterable[Any], base_address: int, pc: int) -> Any | None:
    """The expression of the location-list entry that covers pc (None: none does).
    ``base_address``: the unit's low pc, until a base-address entry changes it."""
    for entry in entries:
        if isinstance(entry, LocationBase):
            base_address = entry.base_address
            continue
        if not isinstance(entry, LocationEntry):
            continue
        begin, end = entry.begin_offset, entry.end_offset
        if not getattr(entry, "is_absolute", False):
            begin, end = begin + base_address, end + base_address
        if begin <= pc < end:
            return entry.loc_expr
    return None


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

