"""C casts in expressions: ``(uint64_t *)(arg0 + 16)``, ``(int32_t)x``, ``(char *)p``.

Only the fixed-width and common C types are known; a cast reads, it never converts
anything in the target. The parser (expr.py) turns ``(T *) X`` into ``__cast_T_1__ @ X``:
``@`` has the precedence of a C cast's operand binding (above ``+``/``*``-level
operators' right side, below ``.``/``[]``/unary operators), and nothing a user types
produces it.
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "__cast_"

_BASE: dict[tuple[str, ...], tuple[int, str]] = {
    ("char",): (1, "signed"), ("signed", "char"): (1, "signed"), ("unsigned", "char"): (1, "unsigned"),
    ("short",): (2, "signed"), ("short", "int"): (2, "signed"), ("signed", "short"): (2, "signed"),
    ("unsigned", "short"): (2, "unsigned"), ("unsigned", "short", "int"): (2, "unsigned"),
    ("int",): (4, "signed"), ("signed",): (4, "signed"), ("signed", "int"): (4, "signed"),
    ("unsigned",): (4, "unsigned"), ("unsigned", "int"): (4, "unsigned"),
    ("long",): (8, "signed"), ("long", "int"): (8, "signed"), ("signed", "long"): (8, "signed"),
    ("unsigned", "long"): (8, "unsigned"), ("unsigned", "long", "int"): (8, "unsigned"),
    ("long", "long"): (8, "signed"), ("unsigned", "long", "long"): (8, "unsigned"),
    ("bool",): (1, "bool"), ("_Bool",): (1, "bool"), ("float",): (4, "float"), ("double",): (8, "float"),
    ("void",): (0, "void"),
    ("intptr_t",): (8, "signed"), ("uintptr_t",): (8, "unsigned"), ("size_t",): (8, "unsigned"),
    ("ssize_t",): (8, "signed"), ("ptrdiff_t",): (8, "signed"), ("off_t",): (8, "signed"),
    ("pid_t",): (4, "signed"),
}
for _bits in (8, 16, 32, 64):
    _BASE[(f"int{_bits}_t",)] = (_bits // 8, "signed")
    _BASE[(f"uint{_bits}_t",)] = (_bits // 8, "unsigned")

KNOWN = sorted({" ".join(words) for words in _BASE})
"""Every type a cast may name (with any number of ``*``)."""
_WORDS = {word for words in _BASE for word in words} | {"const", "volatile"}


@dataclass(frozen=True)
class Cast:
    base: str
    """The type's words, e.g. ``unsigned long``."""
    size: int
    kind: str
    """signed, unsigned, bool, float or void."""
    stars: int

    @property
    def name(self) -> str:
        return self.base + " " + "*" * self.stars if self.stars else self.base


def known_word(word: str) -> bool:
    return word in _WORDS


def lookup(words: list[str], stars: int) -> Cast | None:
    """The cast to these words (qualifiers ignored), or None when the type is unknown."""
    key = tuple(w for w in words if w not in ("const", "volatile"))
    found = _BASE.get(key)
    if found is None or (found[1] == "void" and stars == 0):
        return None
    return Cast(" ".join(key), found[0], found[1], stars)


def encode(cast: Cast) -> str:
    return f"{PREFIX}{cast.base.replace(' ', '_')}_{cast.stars}__"


def decode(name: str) -> Cast | None:
    if not (name.startswith(PREFIX) and name.endswith("__")):
        return None
    body, _, stars = name[len(PREFIX):-2].rpartition("_")
    if not stars.isdigit():
        return None
    return lookup([body], int(stars)) or lookup(body.split("_"), int(stars))
