"""Types users think of as their value: C++ ``std::atomic<T>``, Rust ``AtomicU64``,
``Cell<T>``, ``UnsafeCell<T>`` read as the T inside; C++ ``std::string`` and Rust
``String``/``&str`` read as their text. Recognised by the DWARF type name, then by shape.
"""

from __future__ import annotations

import re

from sampler.debuginfo.types import Array, Pointer, Struct, Type

_WRAPPER = re.compile(r"^(std::)?(atomic|__atomic_base|__atomic_float)<"
                      r"|^(core::sync::atomic::)?Atomic[A-Z][A-Za-z0-9]*(<.*>)?$"
                      r"|^(core::cell::)?(Unsafe|SyncUnsafe)?Cell<")

MAX_TEXT = 4096
"""Bytes of a string's text put in a row."""


def unwrap(t: Type) -> tuple[int, Type] | None:
    """(offset, type) of the value a wrapper holds, or None when T is no wrapper."""
    if not isinstance(t, Struct) or not _WRAPPER.match(t.name):
        return None
    offset = 0
    inner: Type = t
    for _ in range(8):  # UnsafeCell<u64> in AtomicU64, __atomic_base in atomic, ...
        if not isinstance(inner, Struct):
            break
        fields = [m for m in (*inner.members.values(), *inner.bases) if m.type.size > 0]
        if len(fields) != 1:
            return None
        offset += fields[0].offset
        inner = fields[0].type
    return None if isinstance(inner, (Struct, Array)) else (offset, inner)


def text_fields(t: Type) -> tuple[int, int] | None:
    """(offset of the data pointer, offset of the length) of a string type, or None."""
    if not isinstance(t, Struct):
        return None
    name = t.name
    if name == "string" and {"str", "len"} <= set(t.members):  # Go
        return t.members["str"].offset, t.members["len"].offset
    if name.startswith(("basic_string<char,", "std::basic_string<char,", "std::__cxx11::basic_string<char,")) \
            or name in ("string", "std::string"):
        plus = t.member("_M_dataplus")
        length = t.member("_M_string_length")
        if plus is None or length is None or not isinstance(plus[1].type, Struct):
            return None
        pointer = plus[1].type.member("_M_p")
        if pointer is None:
            return None
        return plus[0] + plus[1].offset + pointer[0] + pointer[1].offset, length[0] + length[1].offset
    if name in ("&str", "&mut str", "*const str", "*mut str"):
        data, size = t.member("data_ptr"), t.member("length")
        if data is None or size is None:
            return None
        return data[0] + data[1].offset, size[0] + size[1].offset
    if name in ("String", "alloc::string::String"):
        vec = t.member("vec")
        if vec is None or not isinstance(vec[1].type, Struct):
            return None
        base = vec[0] + vec[1].offset
        size = vec[1].type.member("len")
        data_at = _first_pointer(vec[1].type)
        if size is None or data_at is None:
            return None
        return base + data_at, base + size[0] + size[1].offset
    return None


def _first_pointer(t: Struct, depth: int = 0) -> int | None:
    """Offset of the first pointer inside T, depth first (Vec's RawVec -> Unique -> NonNull)."""
    if depth > 8:
        return None
    for member in (*t.bases, *t.members.values()):
        if isinstance(member.type, Pointer):
            return member.offset
        if isinstance(member.type, Struct):
            inner = _first_pointer(member.type, depth + 1)
            if inner is not None:
                return member.offset + inner
    return None
