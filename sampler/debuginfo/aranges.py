""".debug_aranges, read directly: which unit holds an address.

pyelftools parses the section through construct, 0.46 s for libc's 11,668 ranges (most of
the time to arm a libc function); this reads the same sets with struct. A malformed set
ends the reading (BadAranges): the caller walks the units instead, as without aranges."""

from __future__ import annotations

import bisect
import struct


class BadAranges(Exception):
    pass


class Aranges:
    def __init__(self, data: bytes) -> None:
        ranges: list[tuple[int, int, int]] = []
        at = 0
        while at + 4 <= len(data):
            (length,) = struct.unpack_from("<I", data, at)
            start = at
            if length == 0xFFFFFFFF:  # 64-bit DWARF
                if at + 12 > len(data):
                    raise BadAranges("a set's length is cut short")
                (length,) = struct.unpack_from("<Q", data, at + 4)
                header, offset_size = at + 12, 8
            else:
                header, offset_size = at + 4, 4
            end = header + length
            if length < 2 + offset_size + 2 or end > len(data):
                raise BadAranges(f"a set at {start:#x} claims {length} bytes past the section")
            (version,) = struct.unpack_from("<H", data, header)
            if version != 2:
                raise BadAranges(f"a set at {start:#x} has version {version}")
            unit = int.from_bytes(data[header + 2:header + 2 + offset_size], "little")
            address_size, segment_size = data[header + 2 + offset_size], data[header + 3 + offset_size]
            if address_size not in (4, 8) or segment_size != 0:
                raise BadAranges(f"a set at {start:#x} has addresses of {address_size} bytes")
            tuple_size = 2 * address_size
            first = header + 4 + offset_size
            first += (-(first - start)) % tuple_size  # the tuples start aligned to their size
            form = "<II" if address_size == 4 else "<QQ"
            for position in range(first, end - tuple_size + 1, tuple_size):
                begin, size = struct.unpack_from(form, data, position)
                if begin == 0 and size == 0:
                    break
                if size:
                    ranges.append((begin, begin + size, unit))
            at = end
        ranges.sort()
        self._begins = [begin for begin, _, _ in ranges]
        self._ranges = ranges

    def __bool__(self) -> bool:
        return bool(self._ranges)

    def unit_at(self, address: int) -> int | None:
        """The .debug_info offset of the unit whose range holds ``address``."""
        index = bisect.bisect_right(self._begins, address) - 1
        if index < 0:
            return None
        begin, end, unit = self._ranges[index]
        return unit if begin <= address < end else None
