"""Walking DWARF DIEs safely, and the small facts read off one: its name, its origin, the
addresses it covers, the line table's file names.

The walks refuse to go backwards or past their unit: a corrupted DW_AT_sibling or
unit length must not loop forever (debug info is input sampler does not control).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any

from elftools.dwarf.compileunit import CompileUnit
from elftools.dwarf.die import DIE


class Malformed(Exception):
    """The debug information cannot be read: truncated, corrupted, or a form we do not know."""


def children(die: DIE) -> Iterator[DIE]:
    """A DIE's children, like pyelftools' iter_children, but refusing to go backwards or
    past the unit: a corrupted DW_AT_sibling must not loop forever."""
    if not die.has_children:
        return
    cu = die.cu
    end = cu.cu_offset + cu["unit_length"] + cu.structs.initial_length_field_size()
    offset = die.offset + die.size
    while True:
        if not die.offset < offset < end:
            raise Malformed(f"a DIE at {offset:#x} is outside its unit")
        child = cu._get_cached_DIE(offset)  # the parse pyelftools itself uses
        child.set_parent(die)
        if child.is_null():
            return
        yield child
        if not child.has_children:
            following = offset + child.size
        elif "DW_AT_sibling" in child.attributes:
            sibling = child.attributes["DW_AT_sibling"]
            following = sibling.value if sibling.form == "DW_FORM_ref_addr" else sibling.value + cu.cu_offset
        else:
            following = child.offset + child.size
            for last in descendants(child):
                following = last.offset + last.size
        if following <= offset:
            raise Malformed(f"a DIE at {offset:#x} points back to {following:#x}")
        offset = following


def descendants(die: DIE) -> Iterator[DIE]:
    """All DIEs under a DIE in file order, its terminating null DIE last."""
    cu = die.cu
    end = cu.cu_offset + cu["unit_length"] + cu.structs.initial_length_field_size()
    offset = die.offset + die.size
    depth = 1
    while depth > 0:
        if not offset < end:
            raise Malformed(f"a DIE at {offset:#x} is outside its unit")
        child = cu._get_cached_DIE(offset)
        yield child
        offset += child.size
        if child.is_null():
            depth -= 1
        elif child.has_children:
            depth += 1


def name_of(die: DIE | None) -> str | None:
    if die is None:
        return None
    attr = die.attributes.get("DW_AT_name")
    if attr is None:
        return None
    value = attr.value
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def origin(die: DIE, attribute: str) -> DIE | None:
    return die.get_DIE_from_attribute(attribute) if attribute in die.attributes else None


def end_of(low: Any, high: Any) -> int:
    """Where a DIE's code ends: DW_AT_high_pc is an address, or (DWARF 4+) a length from low."""
    return int(high.value if high.form == "DW_FORM_addr" else low.value + high.value)


def covers(die: DIE, pc: int) -> bool:
    low = die.attributes.get("DW_AT_low_pc")
    high = die.attributes.get("DW_AT_high_pc")
    if low is not None and high is not None:
        return bool(low.value <= pc < end_of(low, high))
    return "DW_AT_ranges" in die.attributes  # ranges: be generous, innermost names win anyway


def file_names(program: Any, cu: CompileUnit) -> dict[int, str]:
    header = program.header
    version = header["version"]
    dirs = [d.decode() if isinstance(d, bytes) else str(d) for d in header.get("include_directory", [])]
    names: dict[int, str] = {}
    for index, entry in enumerate(header.get("file_entry", [])):
        file_name = entry.name.decode() if isinstance(entry.name, bytes) else str(entry.name)
        dir_index = entry.dir_index
        if version >= 5:
            directory = dirs[dir_index] if dir_index < len(dirs) else ""
            names[index] = posixpath.join(directory, file_name)
        else:
            directory = dirs[dir_index - 1] if 0 < dir_index <= len(dirs) else ""
            names[index + 1] = posixpath.join(directory, file_name)
    return names


def same_file(path: str, wanted: str) -> bool:
    return path == wanted or path.endswith("/" + wanted.lstrip("./"))
