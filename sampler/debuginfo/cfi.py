"""Call frame information: the canonical frame address (CFA) rule at an address.

A function's FDE is found through the loaded file's ``.eh_frame_hdr`` search table, or
through an index of ``.debug_frame`` read from the entries' headers alone (Go writes only
that), and only that entry is parsed (libc's 3,700 entries take pyelftools over a
second, a 10 MB Go server's 7,000 half a second); anything else is parsed whole, once.
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
        self._debug_table: tuple[list[int], list[int]] | None = None
        self._debug_frames: CallFrameInfo | None = None
        self._decoded: dict[int, Any] = {}
        """Decoded tables by FDE start: an unwinder asks the same functions again and again."""

    def entry(self, pc: int, parse_all: bool = True) -> FDE | None:
        """The FDE that covers pc: through the search table, else from a full parse. Without
        ``parse_all``, a pc the search tables do not cover has no entry (an unwinder's question
        about code without unwind information: node's 99 MB took 38 s to parse whole for it)."""
        try:
            found = self._indexed(pc) or self._debug_indexed(pc)
        except Exception:  # a corrupted table or entry: the full parse decides
            found = None
        indexed = bool((self._table and self._table[0]) or (self._debug_table and self._debug_table[0]))
        if found is None and not parse_all and indexed:
            return None
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

    def row(self, pc: int) -> tuple[dict[Any, Any], int, bool] | None:
        """The unwind row at pc: pyelftools' decoded row (``"cfa"``: a CFARule, each DWARF
        register number: a RegisterRule), the CIE's return address column, and whether the entry
        is a signal frame's (augmentation "S": glibc's __restore_rt); None when no entry covers
        pc. Decoded once per entry."""
        fde = self.entry(pc, parse_all=False)
        if fde is None:
            return None
        start = int(fde.header["initial_location"])
        decoded = self._decoded.get(start)
        if decoded is None:
            if len(self._decoded) > 4096:
                self._decoded.clear()
            decoded = self._decoded[start] = fde.get_decoded()
        found = None
        for row in decoded.table:
            if row["pc"] > pc:
                break
            found = row
        if found is None:
            return None
        cie = fde.cie
        if cie is None:
            return None
        signal = b"S" in bytes(cie.header.get("augmentation") or b"")
        return found, int(cie.header.get("return_address_register", 16)), signal

    def saved(self, pc: int) -> dict[int, int]:
        """Registers the function has saved by pc: DWARF register number -> offset from the CFA
        of the slot that holds the caller's value."""
        fde = self.entry(pc)
        if fde is None:
            return {}
        found: dict[int, int] = {}
        for row in fde.get_decoded().table:
            if row["pc"] > pc:
                break
            found = {int(reg): int(rule.arg) for reg, rule in row.items()
                     if isinstance(reg, int) and getattr(rule, "type", None) == "OFFSET"}
        return found

    def _indexed(self, pc: int) -> FDE | None:
        if self._table is None:
            self._table = self._read_table()
        return _one_entry(self._eh, self._table, pc, self._eh_address)

    def _debug_indexed(self, pc: int) -> FDE | None:
        """Through an index of .debug_frame's FDEs, made from their headers alone."""
        if self._debug_table is None:
            self._debug_table = self._read_debug_frame()
        return _one_entry(self._debug_frames, self._debug_table, pc, 0)

    def _read_debug_frame(self) -> tuple[list[int], list[int]]:
        """(initial location, entry offset) of every FDE of .debug_frame (32-bit DWARF, 8-byte
        addresses: what Go and GCC write on x86-64), sorted."""
        info = self._debug
        section = info.debug_frame_sec if info is not None else None
        if info is None or section is None or info.config.default_address_size != 8:
            return [], []
        stream = section.stream
        stream.seek(0)
        data = stream.read(section.size)
        found = []
        at = 0
        while at + 4 <= len(data):
            length = int.from_bytes(data[at:at + 4], "little")
            if length == 0xFFFFFFFF or length < 4:
                return [], []  # 64-bit DWARF or damage: the full parse decides
            cie_id = int.from_bytes(data[at + 4:at + 8], "little")
            if cie_id != 0xFFFFFFFF and length >= 20:
                found.append((int.from_bytes(data[at + 8:at + 16], "little"), at))
            at += 4 + length
        found.sort()
        self._debug_frames = CallFrameInfo(stream=stream, size=section.size, address=section.address,
                                           base_structs=info.structs, for_eh_frame=False)
        return [start for start, _ in found], [offset for _, offset in found]

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


def _one_entry(frames: CallFrameInfo | None, table: tuple[list[int], list[int]], pc: int,
               section_address: int) -> FDE | None:
    """The FDE covering pc through an index (starts, where each entry is), parsing only it."""
    starts, entries = table
    at = bisect.bisect_right(starts, pc) - 1
    if at < 0 or frames is None:
        return None
    entry = frames._parse_entry_at(entries[at] - section_address)
    return entry if isinstance(entry, FDE) and _covers(entry, pc) else None


def _covers(fde: FDE, pc: int) -> bool:
    start = int(fde.header["initial_location"])
    return start <= pc < start + int(fde.header["address_range"])
