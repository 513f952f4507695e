"""Go's runtime, read the way Delve reads it: the dynamic type of an interface.

An interface is two words: a type word (``runtime.eface._type``, or the ``itab`` whose
``_type`` is at +8 for ``runtime.iface``) and a data word. The type word points at a
runtime type descriptor inside the module's types section; Go's DWARF gives each type
that descriptor's offset in the section (DW_AT_go_runtime_type), so the offset leads to
the DWARF type. The data word is the value itself for pointer-shaped types (the
descriptor's kind has kindDirectIface) and a pointer to the value otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.types import Struct, Type
from sampler.process.reads import Read

KIND_OFFSET = 23
"""Offset of ``kind`` in runtime._type (Go 1.14 to 1.22)."""
KIND_DIRECT_IFACE = 1 << 5
KIND_MASK = 31
BASIC_KINDS = frozenset(range(1, 17)) | {24}
"""Go's kinds of bool, the integers, floats, complex numbers and string."""


@dataclass
class Dynamic:
    """The dynamic type of an interface value."""

    name: str
    kind: int
    """Go's reflect.Kind of the type."""
    direct: bool
    """The data word is the value (a pointer-shaped type), not a pointer to it."""
    build: Callable[[], Type] = field(repr=False)

    @cached_property
    def type(self) -> Type:
        return self.build()

    @property
    def basic(self) -> bool:
        return self.kind in BASIC_KINDS


class GoTypes:
    """Dynamic types of a Go program's interfaces, cached by descriptor address."""

    def __init__(self, debug: Debug, read: Read,
                 moduledata: Callable[[], tuple[Type, int] | None]) -> None:
        """``moduledata()``: the type and address of runtime.firstmoduledata."""
        self._debug = debug
        self._read = read
        self._moduledata = moduledata
        self._types_base: int | None = None
        self._known: dict[int, Dynamic | None] = {}

    def dynamic(self, descriptor: int) -> Dynamic | None:
        """The type whose runtime descriptor is at ``descriptor``; None when the DWARF
        does not have it."""
        if descriptor in self._known:
            return self._known[descriptor]
        base = self._base()
        found = None if base is None else self._debug.go_type(descriptor - base)
        result = None
        if found is not None:
            kind = self._read(descriptor + KIND_OFFSET, 1)[0]
            result = Dynamic(found[0], kind & KIND_MASK, bool(kind & KIND_DIRECT_IFACE), found[1])
        self._known[descriptor] = result
        return result

    def _base(self) -> int | None:
        if self._types_base is None:
            found = self._moduledata()
            if found is None or not isinstance(found[0], Struct):
                return None
            member = found[0].member("types")
            if member is None:
                return None
            at = found[1] + member[0] + member[1].offset
            self._types_base = int.from_bytes(self._read(at, 8), "little")
        return self._types_base
