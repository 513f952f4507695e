"""C++ and Rust symbol names as their users write them: ``rb::Ring::read``, ``main::Ring::read``.

Demangling goes through the C++ runtime's own ``__cxa_demangle`` (libstdc++, with ctypes):
Itanium C++ names and Rust's legacy names are both in that form. Where libstdc++ is missing,
mangled names stay as they are. Rust's v0 names (``_R...``) are read by rustv0.py.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import re

from sampler.debuginfo.rustv0 import demangle_v0
from sampler.debuginfo.untrusted import free

_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
_CLONE = re.compile(r"( \[clone \.[^\]]*\])+$")
"""What the demangler adds for a compiler's copy of a function (``[clone .isra.0]``)."""
_QUALIFIERS = (" const", " volatile", " &&", " &")

_LOADED: list[ctypes.CDLL | None] = []


def _library() -> ctypes.CDLL | None:
    if not _LOADED:
        found: ctypes.CDLL | None
        try:
            found = ctypes.CDLL(ctypes.util.find_library("stdc++") or "libstdc++.so.6")
            found.__cxa_demangle.restype = ctypes.c_void_p
            found.__cxa_demangle.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p,
                                             ctypes.POINTER(ctypes.c_int)]
        except (OSError, AttributeError):
            found = None
        _LOADED.append(found)
    return _LOADED[0]


def demangle(name: str) -> str | None:
    """The demangled name, or None when NAME is not a mangled C++/Rust name."""
    if name.startswith("_R"):
        return demangle_v0(name)
    if not name.startswith("_Z"):
        return None
    library = _library()
    if library is None:
        return None
    status = ctypes.c_int()
    pointer = library.__cxa_demangle(name.encode(), None, None, ctypes.byref(status))
    if status.value != 0 or not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode("utf-8", "replace")
    finally:
        free(pointer)



def qualified(demangled: str) -> str:
    """``rb::Ring::read`` from ``rb::Ring::read(unsigned long*) const``; ``main::Ring::read``
    from ``main::Ring::read::h0123456789abcdef``; a template's return type dropped; Rust's escapes
    read (``main::{{closure}}``)."""
    if _RUST_HASH.search(demangled):
        return _rust_legacy(_RUST_HASH.sub("", demangled))
    name = _without_parameters(_CLONE.sub("", demangled))
    return _without_return_type(name)


_RUST_ESCAPES = {"$SP$": "@", "$BP$": "*", "$RF$": "&", "$LT$": "<", "$GT$": ">", "$LP$": "(", "$RP$": ")",
                 "$C$": ","}
_RUST_CODE = re.compile(r"\$u([0-9a-f]{2,6})\$")


def _rust_legacy(name: str) -> str:
    """rustc's legacy escapes in a demangled name undone, as rustc-demangle does: ``$LT$`` is
    ``<``, ``$u7b$`` is ``{``, ``..`` is ``::``, a leading ``_$`` is ``$``."""
    parts = []
    for part in name.split("::"):
        if part.startswith("_$"):
            part = part[1:]
        for escape, text in _RUST_ESCAPES.items():
            part = part.replace(escape, text)
        part = _RUST_CODE.sub(lambda m: chr(int(m.group(1), 16)) if int(m.group(1), 16) < 0x110000 else m.group(0),
                              part)
        parts.append(part.replace("..", "::"))
    return "::".join(parts)


def signature(demangled: str) -> str:
    """The name with its parameter list, without a Rust hash: what a user may give to pick
    one of several overloads."""
    name, qualifiers = _RUST_HASH.sub("", demangled), ""
    for suffix in _QUALIFIERS:
        if name.endswith(suffix):
            name, qualifiers = name.removesuffix(suffix), suffix + qualifiers
    return _without_return_type(name) + qualifiers


def last_component(name: str) -> str:
    depth, cut = 0, 0
    for i, c in enumerate(name):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif depth == 0 and name.startswith("::", i):
            cut = i + 2
    return name[cut:]


def _without_parameters(name: str) -> str:
    text = name
    for suffix in _QUALIFIERS:
        text = text.removesuffix(suffix)
    if not text.endswith(")"):
        return name
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        if text[i] == ")":
            depth += 1
        elif text[i] == "(":
            depth -= 1
            if depth == 0:
                return text[:i]
    return name


def _without_return_type(name: str) -> str:
    depth = 0
    cut = 0
    for i, c in enumerate(name):
        if c in "<(":
            depth += 1
        elif c in ">)":
            depth -= 1
        elif c == " " and depth == 0:
            cut = i + 1
    return name[cut:]
