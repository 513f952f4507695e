"""`py:` expressions: a Python value of a CPython process, by the path a Python programmer writes.

    py:NAME(.NAME | [INTEGER] | ["KEY"] | ['KEY'])*     the value
    len(py:...)                                         its length

The first names are a module of sys.modules (the longest dotted prefix that is one: ``py:app.state``
is module ``app.state`` when it is loaded, else attribute ``state`` of module ``app``); then
attributes and items. At a Python probe (``--at py:FUNCTION``) the first name may be the frame's
argument or local. Nothing else: no operators, no calls (sampler only reads).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from sampler.errors import ExpressionError

PREFIX = "py:"
_LEN = re.compile(r"^len\(\s*(py:.*?)\s*\)$", re.S)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_KEY = re.compile(r"\[\s*(-?\d+|\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')\s*\]")
MAX_STEPS = 32


@dataclass(frozen=True)
class PyPath:
    names: tuple[str, ...]
    """The leading dotted names (a module, then attributes)."""
    steps: tuple[tuple[str, str | int], ...]
    """After them: ("attr", name) and ("item", key)."""
    length: bool = False

    def __str__(self) -> str:
        text = PREFIX + ".".join(self.names) + "".join(
            f".{value}" if kind == "attr" else f"[{value!r}]" for kind, value in self.steps)
        return f"len({text})" if self.length else text


def is_python(text: str) -> bool:
    stripped = text.strip()
    return stripped.startswith(PREFIX) or bool(_LEN.match(stripped))


def parse(text: str) -> PyPath:
    """The path of a py: expression; ExpressionError saying what is wrong."""
    stripped = text.strip()
    length = False
    found = _LEN.match(stripped)
    if found is not None:
        stripped, length = found.group(1), True
    if not stripped.startswith(PREFIX):
        raise ExpressionError(f"{text!r}: a py: expression is py:NAME.NAME[KEY]... or len(py:...)")
    rest = stripped[len(PREFIX):]
    names: list[str] = []
    steps: list[tuple[str, str | int]] = []
    at = 0
    expect_name = True
    while at < len(rest):
        if expect_name:
            match = _IDENT.match(rest, at)
            if match is None:
                raise ExpressionError(f"{text!r}: a name was expected at {rest[at:at + 10]!r}",
                                      "e.g. --expr 'q=py:app.queue.maxsize' or --expr 'n=len(py:app.jobs)'")
            if steps:
                steps.append(("attr", match.group()))
            else:
                names.append(match.group())
            at = match.end()
            expect_name = False
            continue
        if rest[at] == ".":
            at += 1
            expect_name = True
            continue
        match = _KEY.match(rest, at)
        if match is None:
            raise ExpressionError(f"{text!r}: '.NAME' or '[KEY]' was expected at {rest[at:at + 10]!r}",
                                  "a py: expression reads; it has no operators or calls")
        try:
            key = ast.literal_eval(match.group(1))
        except (SyntaxError, ValueError) as e:
            raise ExpressionError(f"{text!r}: the key {match.group(1)[:40]} cannot be read ({e})",
                                  "a key is \"text\", 'text' or an integer") from None
        if isinstance(key, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in key):
            raise ExpressionError(f"{text!r}: a key with a lone surrogate is no str a program can hold as a key",
                                  "give the key's characters")
        steps.append(("item", key))
        at = match.end()
    if expect_name or not names:
        raise ExpressionError(f"{text!r}: it ends where a name was expected")
    if len(names) + len(steps) > MAX_STEPS:
        raise ExpressionError(f"{text!r}: more than {MAX_STEPS} steps")
    return PyPath(tuple(names), tuple(steps), length)
