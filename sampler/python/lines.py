"""A code object's line at an instruction: CPython's three line tables, decoded as the interpreter
decodes them (Objects/lnotab_notes.txt for 3.8-3.10, Objects/locations.md for 3.11 and later).

The tables come from the target's memory: every read stays inside the bytes given, and a table
that ends early gives the line found so far.
"""

from __future__ import annotations

from collections.abc import Iterator


def line_at(version: tuple[int, int], table: bytes, first_line: int, offset: int) -> int:
    """The line of the instruction at byte ``offset`` of the code (-1: the table says none)."""
    if offset < 0:
        return first_line  # (not started: its first instruction is still to come)
    unit = offset // 2 if version >= (3, 11) else offset
    for start, end, line in ranges(version, table, first_line):
        if start <= unit < end:
            return line
    return -1


def last_line(version: tuple[int, int], table: bytes, first_line: int) -> int:
    """The largest line any instruction of the code has (its first line when the table gives none)."""
    return max((line for _, _, line in ranges(version, table, first_line)), default=first_line)


def ranges(version: tuple[int, int], table: bytes, first_line: int) -> Iterator[tuple[int, int, int]]:
    """(start, end, line) of each run of the code with one line: bytes (3.8-3.10) or code units (3.11
    and later); line -1: none."""
    if version < (3, 10):
        return _lnotab(table, first_line)
    if version < (3, 11):
        return _linetable_310(table, first_line)
    return _locations(table, first_line)


def _lnotab(table: bytes, line: int) -> Iterator[tuple[int, int, int]]:
    """3.8-3.9's co_lnotab: (address increment, signed line increment) byte pairs; the last line runs
    to the code's end."""
    address = 0
    for i in range(0, len(table) - 1, 2):
        following = address + table[i]
        if following > address:
            yield address, following, line
        address = following
        step = table[i + 1]
        line += step - 256 if step >= 128 else step
    yield address, 1 << 62, line


def _linetable_310(table: bytes, line: int) -> Iterator[tuple[int, int, int]]:
    """3.10's co_linetable: (bytes covered, signed line delta, -128: no line) pairs, each a range."""
    end = 0
    for i in range(0, len(table) - 1, 2):
        start, end = end, end + table[i]
        step = table[i + 1]
        step = step - 256 if step >= 128 else step
        current = -1 if step == -128 else line + step
        if step != -128:
            line += step
        yield start, end, current


def _varint(table: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while at < len(table):
        byte = table[at]
        at += 1
        value |= (byte & 63) << shift
        shift += 6
        if not byte & 64 or shift > 60:
            break
    return value, at


def _svarint(table: bytes, at: int) -> tuple[int, int]:
    value, at = _varint(table, at)
    return (-(value >> 1) if value & 1 else value >> 1), at


def _locations(table: bytes, line: int) -> Iterator[tuple[int, int, int]]:
    """3.11+'s location table: entries of (code, length in code units), then the code's data."""
    at = 0
    start = 0
    while at < len(table):
        head = table[at]
        at += 1
        code = (head >> 3) & 15
        end = start + (head & 7) + 1
        current = line
        if code == 15:  # no location
            current = -1
        elif code == 14:  # long form: line delta, end line, columns
            delta, at = _svarint(table, at)
            line += delta
            current = line
            for _ in range(3):
                _, at = _varint(table, at)
        elif code == 13:  # no columns
            delta, at = _svarint(table, at)
            line += delta
            current = line
        elif code in (10, 11, 12):  # one line, two column bytes
            line += code - 10
            current = line
            at += 2
        else:  # short form: same line, one column byte
            at += 1
        yield start, end, current
        start = end
        while at < len(table) and not table[at] & 128:
            at += 1  # (a damaged entry: on to the next head byte)
