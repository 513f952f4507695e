"""Compiler clones of a function, found by their symbols.

GCC and clang copy a function when they specialise it: ``f.isra.0`` (scalar replacement
of its parameters), ``f.constprop.0`` (a constant argument folded in), ``f.part.0`` (the
out-of-line part of a partly inlined function), ``f.llvm.123`` (clang, after LTO). Each
copy is an entry that calls reach: a breakpoint on ``f`` must be on every one. GCC's
``f.cold`` is no entry but the unlikely part of ``f`` moved away: never a breakpoint.
A C++ clone keeps its mangled name before the suffix: ``_ZN2rb4Ring4readEv.isra.0``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from sampler.debuginfo.demangle import demangle, last_component, qualified, signature

if TYPE_CHECKING:
    from sampler.debuginfo.modules import Module

SUFFIX = re.compile(r"(?:\.(?:isra|constprop|part|cold|lto_priv|localalias|llvm)(?:\.\d+)?)+$")
COLD = re.compile(r"\.cold(?:\.\d+)?$")
"""A function's cold part, split off: entered by a jump from the function, not by calls."""


def split(name: str) -> tuple[str, str] | None:
    """(the function's own symbol, the clone suffix) of a clone's symbol; None for others."""
    match = SUFFIX.search(name)
    if match is None or match.start() == 0:
        return None
    return name[:match.start()], match.group(0)


def shown(name: str) -> str:
    """A clone's symbol as a user reads it: C++ demangled, as gdb shows it."""
    parts = split(name)
    if parts is None or not parts[0].startswith("_Z"):
        return name
    text = demangle(parts[0])
    return f"{text} [clone {parts[1]}]" if text is not None else name


def clones_of(module: Module, wanted: str, bare: bool) -> dict[int, str]:
    """Every clone of the function ``wanted`` in the module's symbols that calls enter, by file
    address -> its symbol as shown. ``wanted`` as --at takes it: a C name, a C++ qualified name
    or signature, or with ``bare`` a last component."""
    query = " ".join(wanted.split())
    found: dict[int, str] = {}
    for name, symbol in module.function_symbols():
        parts = split(name)
        if parts is None or COLD.search(name) or not symbol.address:
            continue
        base = parts[0]
        if base.startswith("_Z"):
            text = demangle(base)
            if text is None:
                continue
            if "(" in query:
                hit = signature(text).replace(" ", "") == query.replace(" ", "")
            else:
                own = qualified(text)
                hit = own == query or (bare and "::" not in query and last_component(own) == query)
        else:
            hit = base == query
        if hit:
            found.setdefault(symbol.address, shown(name))
    return found
