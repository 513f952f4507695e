"""A fast walk over a compilation unit's DIEs: where its top-level entries are, and which
DIEs of a tag refer to given DIEs (a function's inlined copies).

pyelftools builds a Python object for every DIE it reads, and a unit without
DW_AT_sibling (Go writes none) can only be stepped over by reading every DIE inside it:
Go's ``runtime`` unit holds over 40,000. This walk only decodes abbreviation codes and
skips attribute values by their form, about ten times faster, so that the index of
functions and globals parses just the top-level DIEs.
"""

from __future__ import annotations

from typing import Any

from elftools.dwarf.enums import ENUM_DW_AT, ENUM_DW_FORM, ENUM_DW_TAG

from sampler.debuginfo.leb128 import uleb128

_FIXED = {
    "DW_FORM_addr": 8, "DW_FORM_data1": 1, "DW_FORM_ref1": 1, "DW_FORM_flag": 1, "DW_FORM_strx1": 1,
    "DW_FORM_addrx1": 1, "DW_FORM_data2": 2, "DW_FORM_ref2": 2, "DW_FORM_strx2": 2, "DW_FORM_addrx2": 2,
    "DW_FORM_strx3": 3, "DW_FORM_addrx3": 3, "DW_FORM_data4": 4, "DW_FORM_ref4": 4, "DW_FORM_strp": 4,
    "DW_FORM_line_strp": 4, "DW_FORM_sec_offset": 4, "DW_FORM_ref_addr": 4, "DW_FORM_strp_sup": 4,
    "DW_FORM_strx4": 4, "DW_FORM_addrx4": 4, "DW_FORM_ref_sup4": 4, "DW_FORM_data8": 8, "DW_FORM_ref8": 8,
    "DW_FORM_ref_sig8": 8, "DW_FORM_ref_sup8": 8, "DW_FORM_data16": 16,
    "DW_FORM_flag_present": 0, "DW_FORM_implicit_const": 0,
}
_LEB = {"DW_FORM_udata", "DW_FORM_sdata", "DW_FORM_ref_udata", "DW_FORM_strx", "DW_FORM_addrx",
        "DW_FORM_loclistx", "DW_FORM_rnglistx", "DW_FORM_GNU_addr_index", "DW_FORM_GNU_str_index"}
_BLOCK = {"DW_FORM_block1": 1, "DW_FORM_block2": 2, "DW_FORM_block4": 4}
STRING, LEB, BLOCK_LEB = -1, -2, -3


class CannotScan(Exception):
    """A form or layout this walk does not know: pyelftools' own walk is used instead."""


def top_level(cu: Any, data: bytes, strings: bytes | None = None) -> list[tuple[int, str, str | None]]:
    """(offset, tag, name) of the top DIE's children, in order; the name when it is written
    in place (DW_FORM_string, as Go does) or, given ``strings`` (.debug_str), by DW_FORM_strp;
    else None."""
    if cu["address_size"] != 8 or cu.structs.dwarf_format != 32:
        raise CannotScan("not 32-bit DWARF with 8-byte addresses")
    shapes = _shapes(cu)
    top = cu.get_top_DIE()
    if not top.has_children:
        return []
    end = cu.cu_offset + cu["unit_length"] + 4
    at = top.offset + top.size
    depth = 1
    found = []
    while depth > 0:
        if at >= end:
            raise CannotScan("a DIE runs past its unit")
        start = at
        code, at = uleb128(data, at)
        if code == 0:
            depth -= 1
            continue
        shape = shapes.get(code)
        if shape is None:
            raise CannotScan(f"abbreviation {code} is not in the unit's table")
        children, sizes, tag, name_at = shape
        name = None
        for index, size in enumerate(sizes):
            if index == name_at and depth == 1:  # DW_AT_name is in place or in .debug_str (_shapes)
                name = _string(data, at, "DW_FORM_string" if size == STRING else "DW_FORM_strp", strings)
            at = _skip(data, at, size)
        if depth == 1:
            found.append((start, tag, name))
        if children:
            depth += 1
    return found


def _skip(data: bytes, at: int, size: int) -> int:
    """Past one attribute value of the given shape (a size from _shapes)."""
    if size >= 0:
        return at + size
    if size == LEB:
        while data[at] & 0x80:
            at += 1
        return at + 1
    if size == STRING:
        return data.index(b"\0", at) + 1
    if size == BLOCK_LEB:
        length, at = uleb128(data, at)
        return at + length
    width = -10 - size  # a block with a fixed-size length: -10 - the length's size
    return at + width + int.from_bytes(data[at:at + width], "little")


_REFERENCE = {"DW_FORM_ref1": 1, "DW_FORM_ref2": 2, "DW_FORM_ref4": 4, "DW_FORM_ref8": 8, "DW_FORM_ref_addr": 4}


def referring(cu: Any, data: bytes, tag: str, attribute: str, targets: set[int],
              strings: bytes | None = None, named: str | None = None) -> tuple[list[int], list[int]]:
    """Every DIE of the unit (at any depth): the offsets of those of ``tag`` whose ``attribute``
    (a reference) points at one of ``targets`` (.debug_info offsets), and, given ``named``,
    the offsets of DW_TAG_subprogram DIEs marked DW_AT_inline whose DW_AT_name is ``named``
    (``strings``: .debug_str)."""
    if cu["address_size"] != 8 or cu.structs.dwarf_format != 32:
        raise CannotScan("not 32-bit DWARF with 8-byte addresses")
    shapes = _shapes(cu, attribute)
    inline_shapes = _shapes(cu, "DW_AT_inline") if named is not None else {}
    end = cu.cu_offset + cu["unit_length"] + 4
    at = int(cu.cu_die_offset)  # the unit's own DIE, walked too (not parsed by pyelftools: its
    depth = 0                   # abbreviation table's parse took most of the time)
    found: list[int] = []
    abstract: list[int] = []
    form_lists: dict[int, list[Any]] = {}
    first = True
    while depth > 0 or first:
        first = False
        if at >= end:
            raise CannotScan("a DIE runs past its unit")
        start = at
        code, at = uleb128(data, at)
        if code == 0:
            depth -= 1
            continue
        shape = shapes.get(code)
        if shape is None:
            raise CannotScan(f"abbreviation {code} is not in the unit's table")
        children, sizes, die_tag, wanted_at = shape
        forms = None
        if (die_tag == tag and wanted_at >= 0) or (named is not None and die_tag == "DW_TAG_subprogram"):
            forms = form_lists.get(code)
            if forms is None:
                forms = form_lists[code] = _forms(cu, code)
        name = None
        for index, size in enumerate(sizes):
            if forms is not None and die_tag == tag and index == wanted_at and forms[index] in _REFERENCE:
                value = int.from_bytes(data[at:at + _REFERENCE[forms[index]]], "little")
                if (value if forms[index] == "DW_FORM_ref_addr" else value + cu.cu_offset) in targets:
                    found.append(start)
            if forms is not None and die_tag == "DW_TAG_subprogram" and isinstance(forms[index], tuple):
                name = _string(data, at, forms[index][1], strings)
            at = _skip(data, at, size)
        if named is not None and name == named and inline_shapes.get(code, (0, 0, 0, -1))[3] >= 0:
            abstract.append(start)
        if children:
            depth += 1
    return found, abstract


def _string(data: bytes, at: int, form: str, strings: bytes | None) -> str | None:
    if form == "DW_FORM_string":
        return data[at:data.index(b"\0", at)].decode("utf-8", "replace")
    if form == "DW_FORM_strp" and strings is not None:
        offset = int.from_bytes(data[at:at + 4], "little")
        return strings[offset:strings.index(b"\0", offset)].decode("utf-8", "replace")
    return None


def _forms(cu: Any, code: int) -> list[Any]:
    """The forms of an abbreviation's attributes, in order; DW_AT_name's as (name, form)."""
    return [(name, form) if name == "DW_AT_name" else form for name, form in _specs(cu)[code][2]]


_SHAPES: dict[tuple[int, int, str], dict[int, tuple[bool, list[int], str, int]]] = {}
"""The shapes of the abbreviation tables already decoded (pyelftools' parse of them is most
of a walk's time), by (the DWARF's identity, the table's offset, the attribute looked for)."""


def _shapes(cu: Any, find: str = "DW_AT_name") -> dict[int, tuple[bool, list[int], str, int]]:
    key = (id(cu.dwarfinfo), int(cu["debug_abbrev_offset"]), find)
    known = _SHAPES.get(key)
    if known is None:
        if len(_SHAPES) > 20_000:
            _SHAPES.clear()
        known = _SHAPES[key] = _decoded_shapes(cu, find)
    return known


_TAGS = {value: name for name, value in ENUM_DW_TAG.items()}
_ATTRIBUTES = {value: name for name, value in ENUM_DW_AT.items()}
_FORMS = {value: name for name, value in ENUM_DW_FORM.items()}
_SPECS: dict[tuple[int, int], dict[int, tuple[str, bool, list[tuple[str, str]]]]] = {}
_ABBREV_BYTES: dict[int, bytes] = {}


def _specs(cu: Any) -> dict[int, tuple[str, bool, list[tuple[str, str]]]]:
    """The unit's abbreviation table, read straight from .debug_abbrev (pyelftools' parse of
    libc's 2,063 tables took seconds): code -> (tag, has children, [(attribute, form)])."""
    info = cu.dwarfinfo
    offset = int(cu["debug_abbrev_offset"])
    key = (id(info), offset)
    known = _SPECS.get(key)
    if known is not None:
        return known
    data = _ABBREV_BYTES.get(id(info))
    if data is None:
        data = _ABBREV_BYTES[id(info)] = bytes(info.debug_abbrev_sec.stream.getvalue())
    table: dict[int, tuple[str, bool, list[tuple[str, str]]]] = {}
    at = offset
    while True:
        if at >= len(data):
            raise CannotScan("an abbreviation table runs past its section")
        code, at = uleb128(data, at)
        if code == 0:
            break
        tag, at = uleb128(data, at)
        children = data[at] != 0
        at += 1
        specs = []
        while True:
            attribute, at = uleb128(data, at)
            form, at = uleb128(data, at)
            if attribute == 0 and form == 0:
                break
            if form == 0x21:  # DW_FORM_implicit_const: its value is here, not in the DIE
                while data[at] & 0x80:
                    at += 1
                at += 1
            specs.append((_ATTRIBUTES.get(attribute, f"DW_AT_{attribute:#x}"), _FORMS.get(form, f"form {form:#x}")))
        table[code] = (_TAGS.get(tag, f"DW_TAG_{tag:#x}"), children, specs)
    if len(_SPECS) > 20_000:
        _SPECS.clear()
    _SPECS[key] = table
    return table


def _decoded_shapes(cu: Any, find: str) -> dict[int, tuple[bool, list[int], str, int]]:
    """Per abbreviation code: (has children, how to skip each attribute, tag, which
    attribute is ``find`` (-1: none; DW_AT_name only in a string form))."""
    shapes = {}
    for code, (tag, children, specs) in _specs(cu).items():
        sizes: list[int] = []
        name_at = -1
        for name, form in specs:
            if name == find and (find != "DW_AT_name" or form in ("DW_FORM_string", "DW_FORM_strp")):
                name_at = len(sizes)
            if form in _FIXED:
                size = _FIXED[form]
                if form == "DW_FORM_ref_addr" and cu["version"] == 2:
                    size = 8
                sizes.append(size)
            elif form in _LEB:
                sizes.append(LEB)
            elif form == "DW_FORM_string":
                sizes.append(STRING)
            elif form in ("DW_FORM_block", "DW_FORM_exprloc"):
                sizes.append(BLOCK_LEB)
            elif form in _BLOCK:
                sizes.append(-10 - _BLOCK[form])
            else:
                raise CannotScan(f"form {form}")
        shapes[code] = (children, sizes, tag, name_at)
    return shapes
