"""A fast walk over a compilation unit's DIEs: where its top-level entries are.

pyelftools builds a Python object for every DIE it reads, and a unit without
DW_AT_sibling (Go writes none) can only be stepped over by reading every DIE inside it:
Go's ``runtime`` unit holds over 40,000. This walk only decodes abbreviation codes and
skips attribute values by their form, about ten times faster, so that the index of
functions and globals parses just the top-level DIEs.
"""

from __future__ import annotations

from typing import Any

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


def top_level_offsets(cu: Any, data: bytes) -> list[int]:
    """Offsets of the top DIE's children, in order. ``data``: the whole .debug_info."""
    return [offset for offset, _, _ in top_level(cu, data)]


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
            if index == name_at and depth == 1:
                if size == STRING:
                    name = data[at:data.index(b"\0", at)].decode("utf-8", "replace")
                elif size == 4 and strings is not None:
                    offset = int.from_bytes(data[at:at + 4], "little")
                    name = strings[offset:strings.index(b"\0", offset)].decode("utf-8", "replace")
            if size >= 0:
                at += size
            elif size == LEB:
                while data[at] & 0x80:
                    at += 1
                at += 1
            elif size == STRING:
                at = data.index(b"\0", at) + 1
            elif size == BLOCK_LEB:
                length, at = uleb128(data, at)
                at += length
            else:  # a block with a fixed-size length: -10 - the length's size
                width = -10 - size
                at += width + int.from_bytes(data[at:at + width], "little")
        if depth == 1:
            found.append((start, tag, name))
        if children:
            depth += 1
    return found


def _shapes(cu: Any) -> dict[int, tuple[bool, list[int], str, int]]:
    """Per abbreviation code: (has children, how to skip each attribute, tag, which
    attribute is DW_AT_name (-1: none))."""
    shapes = {}
    table = cu.get_abbrev_table()
    for code in table._abbrev_map:
        decl = table.get_abbrev(code)
        sizes: list[int] = []
        name_at = -1
        for name, form in decl.iter_attr_specs():
            if name == "DW_AT_name" and form in ("DW_FORM_string", "DW_FORM_strp"):
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
        shapes[code] = (decl.has_children(), sizes, decl["tag"], name_at)
    return shapes
