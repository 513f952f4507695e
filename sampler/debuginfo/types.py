"""The types sampler reads values as, and how DWARF's type DIEs become them.

The model (Type and its kinds) is what the evaluator and the field search know; the
conversion reads a type DIE once, following typedefs and qualifiers, and keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from elftools.dwarf.die import DIE

from sampler.debuginfo.dies import children, name_of, origin

GO_INTERFACES = ("runtime.iface", "runtime.eface")
"""What Go's DWARF says an interface is, once its named typedefs are followed."""


def is_interface(t: Type | None) -> bool:
    """A Go interface (iface or eface)."""
    return isinstance(t, Struct) and t.name in GO_INTERFACES


MAX_BASES = 64
"""How deep a chain of C++ base classes is followed (real ones are a few deep)."""


@dataclass
class Type:
    name: str
    size: int


@dataclass
class Scalar(Type):
    kind: str = "signed"
    """signed, unsigned, float, bool or char."""


@dataclass
class Pointer(Type):
    target: Type | None = None


@dataclass
class Member:
    name: str
    offset: int
    type: Type


@dataclass
class Struct(Type):
    members: dict[str, Member] = field(default_factory=dict)
    bases: list[Member] = field(default_factory=list)
    """C++ base classes (DW_TAG_inheritance): their fields are this struct's too."""

    def member(self, name: str) -> tuple[int, Member] | None:
        """A field by name, searched in the bases too: (offset of its base, member). Each
        base class is searched once however often it recurs (hostile DWARF can make a class
        inherit from itself, or each level list the next twice), and MAX_BASES at most."""
        seen: set[int] = set()
        todo: list[tuple[int, Struct]] = [(0, self)]
        while todo:
            offset, struct = todo.pop(0)
            found = struct.members.get(name)
            if found is not None:
                return offset, found
            for base in struct.bases:
                if isinstance(base.type, Struct) and id(base.type) not in seen and len(seen) < MAX_BASES:
                    seen.add(id(base.type))
                    todo.append((offset + base.offset, base.type))
        return None


@dataclass
class Array(Type):
    element: Type | None = None
    count: int | None = None


@dataclass
class Enum(Type):
    signed: bool = False
    names: dict[int, str] = field(default_factory=dict)


_ENCODINGS = {0x02: "bool", 0x04: "float", 0x05: "signed", 0x06: "signed", 0x07: "unsigned",
              0x08: "unsigned", 0x10: "unsigned"}
_CHAR_ENCODINGS = {0x06: "signed", 0x08: "unsigned"}


class TypeReader:
    """Type DIEs to types, each converted once (a list that points to itself included)."""

    def __init__(self) -> None:
        self._types: dict[int, Type] = {}
        self.go_types_unit: Any = None
        """The unit (CompileUnit or TypeUnit) with Go's types, once an interface was read."""

    def type_of(self, die: DIE) -> Type:
        ref = die if "DW_AT_type" in die.attributes else \
            origin(die, "DW_AT_abstract_origin") or origin(die, "DW_AT_specification")
        if ref is None or "DW_AT_type" not in ref.attributes:
            return Type("void", 0)
        return self.convert(ref.get_DIE_from_attribute("DW_AT_type"))

    def convert(self, die: DIE) -> Type:
        cached = self._types.get(die.offset)
        if cached is not None:
            return cached
        tag = die.tag
        name = name_of(die) or ""
        size = die.attributes["DW_AT_byte_size"].value if "DW_AT_byte_size" in die.attributes else 0
        if tag in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type",
                   "DW_TAG_restrict_type", "DW_TAG_atomic_type"):
            alias = self.type_of(die)
            self._types[die.offset] = alias
            return alias
        result: Type
        if tag == "DW_TAG_base_type":
            encoding = die.attributes["DW_AT_encoding"].value
            kind = _ENCODINGS.get(encoding, "unsigned")
            if "char" in name and encoding in _CHAR_ENCODINGS:
                kind = _CHAR_ENCODINGS[encoding]
            result = Scalar(name, size, kind)
        elif tag == "DW_TAG_pointer_type":
            pointer = Pointer(name or "pointer", size or 8)
            self._types[die.offset] = pointer  # before the target: lists point to themselves
            pointer.target = self.type_of(die)
            if not pointer.name or pointer.name == "pointer":
                pointer.name = f"{pointer.target.name}*"
            return pointer
        elif tag in ("DW_TAG_structure_type", "DW_TAG_union_type", "DW_TAG_class_type"):
            struct = Struct(name or "struct", size)
            self._types[die.offset] = struct
            if name in GO_INTERFACES:  # Go keeps its types in one unit: where interfaces are
                self.go_types_unit = die.cu
            for child in children(die):
                if child.tag not in ("DW_TAG_member", "DW_TAG_inheritance") \
                        or "DW_AT_declaration" in child.attributes:  # a C++ static member
                    continue
                offset = child.attributes.get("DW_AT_data_member_location")
                value = offset.value if offset is not None and isinstance(offset.value, int) else 0
                if child.tag == "DW_TAG_inheritance":
                    struct.bases.append(Member("", value, self.type_of(child)))
                elif name_of(child):
                    struct.members[name_of(child) or ""] = Member(name_of(child) or "", value, self.type_of(child))
            return struct
        elif tag == "DW_TAG_array_type":
            count = None
            for child in children(die):
                if child.tag == "DW_TAG_subrange_type":
                    if "DW_AT_count" in child.attributes:
                        count = child.attributes["DW_AT_count"].value
                    elif "DW_AT_upper_bound" in child.attributes:
                        count = child.attributes["DW_AT_upper_bound"].value + 1
                    break
            element = self.type_of(die)
            result = Array(name or f"{element.name}[]", size or element.size * (count or 0), element, count)
        elif tag == "DW_TAG_enumeration_type":
            names = {c.attributes["DW_AT_const_value"].value: name_of(c) or ""
                     for c in children(die) if c.tag == "DW_TAG_enumerator"}
            underlying = self.type_of(die)
            signed = (isinstance(underlying, Scalar) and underlying.kind == "signed") \
                or any(v < 0 for v in names)
            result = Enum(name or "enum", size or 4, signed, names)
        else:
            result = Type(name or str(tag).removeprefix("DW_TAG_"), size)
        self._types[die.offset] = result
        return result
