"""LEB128, the variable-length integers of DWARF and of Go's pc tables."""

from __future__ import annotations


def uleb128(data: bytes, at: int, limit: int = 10) -> tuple[int, int]:
    """(value, offset after it) of the number at ``at``; ValueError past ``limit`` bytes
    (10 hold any 64-bit value), IndexError past the data."""
    result = shift = 0
    for _ in range(limit):
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, at
        shift += 7
    raise ValueError(f"a variable-length number longer than {limit} bytes")


def sleb128(data: bytes, at: int, limit: int = 10) -> tuple[int, int]:
    """As uleb128, for a signed number (two's complement, sign-extended from its last byte)."""
    result = shift = 0
    for _ in range(limit):
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            if byte & 0x40:
                result -= 1 << shift
            return result, at
    raise ValueError(f"a variable-length number longer than {limit} bytes")
