"""--stop-when: a condition over the columns of a row, checked after each row is written."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sampler.errors import UsageError
from sampler.language import expr
from sampler.sample import Value

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.Mod: operator.mod, ast.LShift: operator.lshift, ast.RShift: operator.rshift,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_}
_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge}
_UNARY: dict[type, Callable[[Any], Any]] = {
    ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Invert: operator.invert, ast.Not: operator.not_}
NUMERIC_COLUMNS = ("seq", "elapsed_s", "pause_us", "wait_us", "late_us")


class _Unknown(Exception):
    """A column without a value in this row (its expression failed): the condition does not hold."""


class Condition:
    def __init__(self, text: str, columns: Sequence[str]) -> None:
        """``text`` in sampler's expression syntax (&&, ||, !, C operators) over ``columns``
        by name; UsageError naming what is wrong."""
        self.text = text
        self.tree = expr.parse(text).body
        known = (*columns, *NUMERIC_COLUMNS)
        called = expr.called(self.tree)
        self.columns = frozenset(expr.source_name(node.id) for node in ast.walk(self.tree)
                                 if isinstance(node, ast.Name) and id(node) not in called)
        """The columns it reads."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "startswith":
                continue
            if isinstance(node, ast.Name) and id(node) not in called and expr.source_name(node.id) not in known:
                raise UsageError(f"--stop-when {text!r}: no column {expr.source_name(node.id)!r}",
                                 f"it can use the columns {', '.join(known)}; name an expression with "
                                 "--expr NAME=EXPR to use it")
            if isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
                raise UsageError(f"--stop-when {text!r}: only column names, numbers, strings, operators "
                                 "and startswith(COLUMN, \"text\")",
                                 "sample the value with --expr NAME=EXPR and use NAME")

    def holds(self, row: Mapping[str, Value]) -> bool:
        try:
            return bool(self._eval(self.tree, row))
        except (_Unknown, TypeError, ZeroDivisionError, ValueError, OverflowError):
            return False

    def _eval(self, node: ast.AST, row: Mapping[str, Value]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            value = row.get(expr.source_name(node.id))
            if value is None or value == "":
                raise _Unknown(node.id)
            return value
        if isinstance(node, ast.BinOp):
            return _BINARY[type(node.op)](self._eval(node.left, row), self._eval(node.right, row))
        if isinstance(node, ast.UnaryOp):
            return _UNARY[type(node.op)](self._eval(node.operand, row))
        if isinstance(node, ast.BoolOp):
            if isinstance(node.op, ast.And):
                return all(self._eval(v, row) for v in node.values)
            return any(self._holds(v, row) for v in node.values)
        if isinstance(node, ast.Call):  # startswith(COLUMN, "text"), the one call a condition has
            whole, prefix = (self._eval(arg, row) for arg in node.args)
            return str(whole).startswith(str(prefix))
        if isinstance(node, ast.Compare):
            left = self._eval(node.left, row)
            for op, right_node in zip(node.ops, node.comparators):
                right = self._eval(right_node, row)
                if not _COMPARE[type(op)](left, right):
                    return False
                left = right
            return True
        raise TypeError(type(node).__name__)

    def _holds(self, node: ast.AST, row: Mapping[str, Value]) -> bool:
        try:
            return bool(self._eval(node, row))
        except _Unknown:
            return False
