"""The DWARF expressions call frame information uses (DW_CFA_def_cfa_expression, DW_CFA_expression,
DW_CFA_val_expression): a small stack machine over the unwound registers and the target's memory.

What compilers and linkers emit there is a handful of operations: the PLT's CFA (``breg7 8;
breg16 0; lit15; and; lit11; ge; lit3; shl; plus``), glibc's signal trampoline (``breg7 160;
deref``), a realigned stack (``breg6 -8; deref``). The bytes are the module's, input like any
other: an operation not known here, a stack that underflows or a program past MAX_STEPS ends the
evaluation with BadExpression, never a wrong answer taken for a right one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from sampler.debuginfo.leb128 import sleb128, uleb128

MAX_STEPS = 256
"""Operations one expression may run (the longest emitted here have nine; a branch may loop)."""
MASK = (1 << 64) - 1


class BadExpression(Exception):
    """An expression this evaluator cannot run (or that the module got wrong)."""


_BINARY: dict[int, Callable[[int, int], int]] = {
    0x1A: lambda a, b: a & b,  # and
    0x1B: lambda a, b: (a // b) if b else _zero_division(),  # div
    0x1C: lambda a, b: a - b,  # minus
    0x1D: lambda a, b: (a % b) if b else _zero_division(),  # mod
    0x1E: lambda a, b: a * b,  # mul
    0x21: lambda a, b: a | b,  # or
    0x22: lambda a, b: a + b,  # plus
    0x24: lambda a, b: a << b if b < 64 else 0,  # shl
    0x25: lambda a, b: a >> b if b < 64 else 0,  # shr
    0x26: lambda a, b: _signed(a) >> min(b, 63),  # shra
    0x27: lambda a, b: a ^ b,  # xor
    0x29: lambda a, b: int(a == b),  # eq
    0x2A: lambda a, b: int(_signed(a) >= _signed(b)),  # ge
    0x2B: lambda a, b: int(_signed(a) > _signed(b)),  # gt
    0x2C: lambda a, b: int(_signed(a) <= _signed(b)),  # le
    0x2D: lambda a, b: int(_signed(a) < _signed(b)),  # lt
    0x2E: lambda a, b: int(a != b),  # ne
}


def _zero_division() -> int:
    raise BadExpression("a division by zero")


def _signed(value: int) -> int:
    return value - (1 << 64) if value & (1 << 63) else value


def evaluate(code: bytes, register: Callable[[int], int], read: Callable[[int, int], bytes],
             initial: int | None = None) -> int:
    """The value the expression leaves on top of its stack. ``register(n)`` gives DWARF register
    n (raising when it is not known), ``read(address, size)`` the target's bytes; ``initial`` is
    pushed first (the CFA, for a register's rule)."""
    try:
        return _evaluate(code, register, read, initial)
    except (IndexError, ValueError) as e:  # a number past the expression's end, or too long
        raise BadExpression(f"a damaged expression ({type(e).__name__})") from None


def _evaluate(code: bytes, register: Callable[[int], int], read: Callable[[int, int], bytes],
              initial: int | None) -> int:
    stack: list[int] = [] if initial is None else [initial & MASK]
    at, steps = 0, 0
    while at < len(code):
        steps += 1
        if steps > MAX_STEPS:
            raise BadExpression(f"over {MAX_STEPS} operations")
        op = code[at]
        at += 1
        if 0x30 <= op <= 0x4F:  # lit0..lit31
            stack.append(op - 0x30)
        elif 0x50 <= op <= 0x6F:  # reg0..reg31 (a register's value, as a location: the value)
            stack.append(register(op - 0x50) & MASK)
        elif 0x70 <= op <= 0x8F:  # breg0..breg31 OFFSET
            offset, at = sleb128(code, at, limit=10)
            stack.append((register(op - 0x70) + offset) & MASK)
        elif op == 0x92:  # bregx REG OFFSET
            number, at = uleb128(code, at, limit=5)
            offset, at = sleb128(code, at, limit=10)
            stack.append((register(number) + offset) & MASK)
        elif op in _CONSTANTS:
            size, signed = _CONSTANTS[op]
            if at + size > len(code):
                raise BadExpression("a constant past the expression's end")
            stack.append(int.from_bytes(code[at:at + size], "little", signed=signed) & MASK)
            at += size
        elif op == 0x10:  # constu
            value, at = uleb128(code, at, limit=10)
            stack.append(value & MASK)
        elif op == 0x11:  # consts
            value, at = sleb128(code, at, limit=10)
            stack.append(value & MASK)
        elif op == 0x06:  # deref
            _need(stack, 1)
            stack.append(struct.unpack("<Q", read(stack.pop(), 8))[0])
        elif op == 0x94:  # deref_size N
            _need(stack, 1)
            size = code[at] if at < len(code) else 0
            at += 1
            if not 1 <= size <= 8:
                raise BadExpression(f"a dereference of {size} bytes")
            stack.append(int.from_bytes(read(stack.pop(), size), "little"))
        elif op == 0x12:  # dup
            _need(stack, 1)
            stack.append(stack[-1])
        elif op == 0x13:  # drop
            _need(stack, 1)
            stack.pop()
        elif op == 0x14:  # over
            _need(stack, 2)
            stack.append(stack[-2])
        elif op == 0x16:  # swap
            _need(stack, 2)
            stack[-1], stack[-2] = stack[-2], stack[-1]
        elif op == 0x23:  # plus_uconst
            value, at = uleb128(code, at, limit=10)
            _need(stack, 1)
            stack.append((stack.pop() + value) & MASK)
        elif op in (0x19, 0x1F, 0x20):  # abs, neg, not
            _need(stack, 1)
            value = stack.pop()
            stack.append((abs(_signed(value)) if op == 0x19 else -value if op == 0x1F else ~value) & MASK)
        elif op in _BINARY:
            _need(stack, 2)
            b, a = stack.pop(), stack.pop()
            stack.append(_BINARY[op](a, b) & MASK)
        elif op in (0x2F, 0x28):  # skip, bra
            if at + 2 > len(code):
                raise BadExpression("a branch past the expression's end")
            offset = struct.unpack_from("<h", code, at)[0]
            at += 2
            if op == 0x28:
                _need(stack, 1)
            if op == 0x2F or stack.pop():
                at += offset
                if not 0 <= at <= len(code):
                    raise BadExpression("a branch out of the expression")
        elif op == 0x96:  # nop
            pass
        else:
            raise BadExpression(f"operation {op:#x} is not one call frame information uses")
    if not stack:
        raise BadExpression("an expression that leaves nothing")
    return stack[-1]


_CONSTANTS = {0x08: (1, False), 0x09: (1, True), 0x0A: (2, False), 0x0B: (2, True),
              0x0C: (4, False), 0x0D: (4, True), 0x0E: (8, False), 0x0F: (8, True)}
"""const1u .. const8s: (size, signed)."""


def _need(stack: list[int], count: int) -> None:
    if len(stack) < count:
        raise BadExpression("an operation with too few values on the stack")
