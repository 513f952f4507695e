"""A reading probe's expressions evaluated over thousands of records at once (numpy), where they can
be: an integer made of the record's own bytes (a register, a field the probe read) by + - * & | ^,
unary minus and integer literals. ``sampler trace --at F --expr 'delta=b->w-b->r' --hist delta``
then keeps up with the probe instead of evaluating each record in Python (100 us a record).

A column is learnt from one record by the evaluator itself: each leaf (a name, a field, an element)
evaluated there says its width and sign, and the read it made says where its bytes are in the
record; each operator's width and sign are the evaluator's at that record. Then it is checked: its
values at up to CHECKED records must equal the evaluator's, else the expression is evaluated one
record at a time, as any other. A record where a read the column uses failed (a bad pointer) is
evaluated alone too (its row says why).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
from typing import Union

import numpy as np

from sampler.debuginfo.locations import InMemory, InRegister
from sampler.evaluation.evaluate import Evaluator, Num, Object
from sampler.inprocess.reads import REGISTERS, Layout
from sampler.language.expr import REGISTER_PREFIX, register_name

CHECKED = 16
"""Records whose values a learnt column must give as the evaluator does (spread over the batch)."""
OPS: dict[type, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
    ast.BitAnd: np.bitwise_and, ast.BitOr: np.bitwise_or, ast.BitXor: np.bitwise_xor,
}
WIDTHS = (1, 2, 4, 8)
Evaluators = Callable[[int, "list[tuple[int, int]] | None"], Evaluator]
"""The evaluator of record number N (reading the record's bytes), noting its reads in the list given."""


@dataclass(frozen=True)
class Load:
    offset: int
    """Where its bytes are in a record."""
    size: int
    signed: bool
    result: int = 0
    """The offset of the probe's result of the read holding them (0: a register's bytes)."""
    expected: int = 0
    """The size that result says the read succeeded with."""


@dataclass(frozen=True)
class Const:
    value: int


@dataclass(frozen=True)
class Op:
    op: type
    left: Column
    right: Column
    bits: int
    signed: bool


@dataclass(frozen=True)
class Neg:
    operand: Column
    bits: int
    signed: bool


Column = Union[Load, Const, Op, Neg]  # (3.9: no X | Y at run time)


class NotAColumn(Exception):
    pass


def learn(tree: ast.Expression, layout: Layout, records: np.ndarray, evaluators: Evaluators,
          values: Callable[[int], object]) -> Column | None:
    """The column of ``tree`` over ``records`` (evaluators(n, read): record n's evaluator; values(n):
    its value as a row shows it), or None where the expression is not one or the check fails."""
    if not len(records):
        return None
    raw = as_bytes(records, layout)
    try:
        column = _learn(tree.body, layout, raw, evaluators)
        got, ok = evaluate(column, raw)
    except Exception:  # NotAColumn, or the evaluator's own error at record 0: rows one at a time say it
        return None
    rows = sorted(set(np.linspace(0, len(records) - 1, min(CHECKED, len(records))).astype(int).tolist()))
    for row in rows:
        if bool(ok[row]) and values(row) != int(got[row]):
            return None
    return column


def as_bytes(records: np.ndarray, layout: Layout) -> np.ndarray:
    """The records as rows of bytes."""
    return np.ascontiguousarray(records).view(np.uint8).reshape(len(records), layout.record)


def evaluate(column: Column, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The column's values (int64 or uint64) at each record, and where they hold (every read made)."""
    if isinstance(column, Const):
        return np.full(len(raw), column.value & (1 << 64) - 1, dtype=np.uint64), np.ones(len(raw), bool)
    if isinstance(column, Load):
        kind = "i" if column.signed else "u"
        data = np.ascontiguousarray(raw[:, column.offset:column.offset + column.size])
        values = data.view(f"<{kind}{column.size}").ravel().astype(np.int64 if column.signed else np.uint64)
        ok = np.ones(len(raw), bool)
        if column.result:
            result = np.ascontiguousarray(raw[:, column.result:column.result + 8]).view("<i8").ravel()
            ok = result == column.expected
        return values, ok
    if isinstance(column, Neg):
        values, ok = evaluate(column.operand, raw)
        return _wrap(np.negative(values.astype(np.uint64)), column.bits, column.signed), ok
    left, left_ok = evaluate(column.left, raw)
    right, right_ok = evaluate(column.right, raw)
    with np.errstate(over="ignore"):
        out = OPS[column.op](left.astype(np.uint64), right.astype(np.uint64))
    return _wrap(out, column.bits, column.signed), left_ok & right_ok


def _wrap(values: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """Two's complement ``values`` (uint64) cut to ``bits`` and read as signed or not, as the
    evaluator's _wrap does."""
    if bits < 64:
        values = values & np.uint64((1 << bits) - 1)
        if signed:
            wide = values.astype(np.int64)
            return np.where(wide >= 1 << (bits - 1), wide - (1 << bits), wide)
        return values
    return values.view(np.int64) if signed else values


def _learn(node: ast.AST, layout: Layout, raw: np.ndarray, evaluators: Evaluators) -> Column:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return Const(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        num = _number(node, raw, evaluators, [])
        return Neg(_learn(node.operand, layout, raw, evaluators), num.bits, num.signed)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        num = _number(node, raw, evaluators, [])
        if not num.bits:
            raise NotAColumn("untyped arithmetic")
        return Op(type(node.op), _learn(node.left, layout, raw, evaluators),
                  _learn(node.right, layout, raw, evaluators), num.bits, num.signed)
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp, ast.Constant)):
        raise NotAColumn("an operation not made over a column")
    if isinstance(node, ast.Name) and node.id.startswith(REGISTER_PREFIX):  # $rdi: all of it, unsigned
        name = register_name(node.id)
        if name not in REGISTERS:
            raise NotAColumn("a register the record does not hold")
        return Load(32 + 8 * REGISTERS.index(name), 8, False)
    reads: list[tuple[int, int]] = []
    evaluator = evaluators(0, reads)
    operand = evaluator.operand(node)
    num = evaluator.number(node)
    size = num.bits // 8
    if size not in WIDTHS or num.is_bool or num.is_address or not isinstance(num.value, int):
        raise NotAColumn("not a plain integer")
    if isinstance(operand, Object) and isinstance(operand.location, InRegister):
        if operand.location.register not in REGISTERS:
            raise NotAColumn("a register the record does not hold")
        return Load(32 + 8 * REGISTERS.index(operand.location.register), size, num.signed)
    if isinstance(operand, Object) and isinstance(operand.location, InMemory) and reads:
        return _in_a_read(reads[-1], size, num, layout, raw)
    raise NotAColumn("neither a register nor a read")


def _number(node: ast.AST, raw: np.ndarray, evaluators: Evaluators, reads: list[tuple[int, int]]) -> Num:
    """What the evaluator makes of ``node`` at record 0."""
    return evaluators(0, reads).number(node)


def _in_a_read(last: tuple[int, int], size: int, num: Num, layout: Layout, raw: np.ndarray) -> Load:
    """A leaf whose bytes are the last read it made: where they lie in the record."""
    address, read_size = last
    if read_size != size:
        raise NotAColumn("a number not read whole")
    load = at_address(address, size, num.signed, layout, raw)
    if load is None:
        raise NotAColumn("not in a read the probe makes")
    data = bytes(raw[0][load.offset:load.offset + size])
    if int.from_bytes(data, "little", signed=num.signed) != num.value:
        raise NotAColumn("its bytes are not its value")
    return load


def at_address(address: int, size: int, signed: bool, layout: Layout, raw: np.ndarray) -> Load | None:
    """The bytes at ``address`` in the first record, as a column (None: no read of the probe holds them)."""
    record = raw[0]
    for read in layout.reads:
        start = int(record[read.at:read.at + 8].view("<u8")[0])
        if start <= address and address + size <= start + read.size:
            return Load(read.at + 16 + (address - start), size, signed, read.at + 8, read.size)
    return None


