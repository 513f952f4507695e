"""Call frame information: the canonical frame address (CFA) rule at an address.

A function's FDE is found through the loaded file's ``.eh_frame_hdr`` search table and
only that entry is parsed (libc's 3,700 entries take pyelftools over a second); files
without the table (or only ``.debug_frame``) are parsed whole, once.
"""

from __future__ import annotations

import bisect
import struct
from typing import Any

from elftools.dwarf.callframe import FDE, CallFrameInfo
from elftools.dwarf.dwarfinfo import DWARFInfo
from elftools.elf.elffile import ELFFile

_DATAREL_SDATA4 = 0x3B
"""The table encoding every GNU toolchain writes: 4-byte signed, relative to the header."""


class CallFrames:
    def __init__(self, loaded: ELFFile | None, debug: DWARFInfo | None) -> None:
        """``loaded``: the file the process maps (it has .eh_frame and .eh_frame_hdr);
        ``debug``: the DWARF, for .debug_frame (a separate debug file has no .eh_frame)."""
        self._loaded = loaded
        self._debug = debug
        self._table: tuple[list[int], list[int]] | None = None
        self._eh: CallFrameInfo | None = None
        self._eh_address = 0
        self._all: tuple[list[int], list[FDE]] | None = None

    def entry(self, pc: int) -> FDE | None:
        """The FDE that covers pc: through the search table, else from a full parse."""
        try:
            found = self._indexed(pc)
        except Exception:  # a corrupted table or entry: the full parse decides
            found = None
        return found if found is not None else self._parsed(pc)

    def function_range(self, pc: int) -> tuple[int, int] | None:
        """[start, end) of the function whose unwind entry covers pc."""
        fde = self.entry(pc)
        if fde is None:
            return None
        start = int(fde.header["initial_location"])
        return start, start + int(fde.header["address_range"])

    def rule(self, pc: int) -> tuple[int, int] | None:
        """(DWARF register number, offset) of the CFA rule at pc, or None."""
        fde = self.entry(pc)
        if fde is None:
            return None
        found = None
        for row in fde.get_decoded().table:
            if row["pc"] > pc:
                break
            found = row.get("cfa", found)
        if found is None or found.reg is None:
            return None
        return int(found.reg), int(found.offset)

    def _indexed(self, pc: int) -> FDE | None:
        if self._table is None:
            self._table = self._read_table()
        starts, entries = self._table
        at = bisect.bisect_right(starts, pc) - 1
        if at < 0 or self._eh is None:
            return None
        entry = self._eh._parse_entry_at(entries[at] - self._eh_address)  # one entry, not all
        if isinstance(entry, FDE) and _covers(entry, pc):
            return entry
        return None

    def _read_table(self) -> tuple[list[int], list[int]]:
        elf = self._loaded
        header = elf.get_section_by_name(".eh_frame_hdr") if elf is not None else None
        frames = elf.get_section_by_name(".eh_frame") if elf is not None else None
        if elf is None or header is None or frames is None or header["sh_type"] == "SHT_NOBITS":
            return [], []
        data = header.data()
        if len(data) < 12 or data[0] != 1 or data[3] != _DATAREL_SDATA4 or data[2] != 0x03:
            return [], []  # fde_count must be udata4 and the table datarel sdata4
        count = int.from_bytes(data[8:12], "little")
        table = data[12:12 + 8 * count]
        base = header["sh_addr"]
        pairs = [(base + start, base + fde) for start, fde in struct.iter_unpack("<ii", table)]
        info = elf.get_dwarf_info()
        if info.eh_frame_sec is None:
            return [], []
        self._eh = CallFrameInfo(stream=info.eh_frame_sec.stream, size=info.eh_frame_sec.size,
                                 address=info.eh_frame_sec.address, base_structs=info.structs,
                                 for_eh_frame=True)
        self._eh_address = frames["sh_addr"]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    def _parsed(self, pc: int) -> FDE | None:
        if self._all is None:
            entries: list[Any] = []
            if self._debug is not None and self._debug.has_CFI():
                entries += self._debug.CFI_entries()
            if self._loaded is not None and self._loaded.get_section_by_name(".eh_frame") is not None:
                info = self._loaded.get_dwarf_info()
                if info.has_EH_CFI():
                    entries += info.EH_CFI_entries()
            fdes = sorted((e for e in entries if isinstance(e, FDE)),
                          key=lambda e: int(e.header["initial_location"]))
            self._all = [int(f.header["initial_location"]) for f in fdes], fdes
        starts, fdes = self._all
        at = bisect.bisect_right(starts, pc) - 1
        return fdes[at] if at >= 0 and _covers(fdes[at], pc) else None


def _covers(fde: FDE, pc: int) -> bool:
    start = int(fde.header["initial_location"])
    return start <= pc < start + int(fde.header["address_range"])
