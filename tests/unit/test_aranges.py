"""aranges.py: the same units as pyelftools gives, and a malformed set refused."""

from __future__ import annotations

import os
import struct

import pytest
from elftools.elf.elffile import ELFFile

from sampler.debuginfo.aranges import Aranges, BadAranges
from sampler.debuginfo.elffile import ElfFile


def one_set(unit: int, ranges: list[tuple[int, int]], version: int = 2) -> bytes:
    body = struct.pack("<HIBB", version, unit, 8, 0) + b"\0" * 4  # to 16 bytes from the set's start
    body += b"".join(struct.pack("<QQ", begin, size) for begin, size in ranges) + struct.pack("<QQ", 0, 0)
    return struct.pack("<I", len(body)) + body


def test_units_by_address():
    aranges = Aranges(one_set(0x10, [(0x1000, 0x100)]) + one_set(0x80, [(0x2000, 0x10), (0x3000, 0x8)]))
    assert aranges.unit_at(0x1000) == 0x10 and aranges.unit_at(0x10FF) == 0x10
    assert aranges.unit_at(0x1100) is None and aranges.unit_at(0xFFF) is None
    assert aranges.unit_at(0x3007) == 0x80 and aranges.unit_at(0x2010) is None


@pytest.mark.parametrize("data", [one_set(0, [(1, 1)], version=3), struct.pack("<I", 1 << 20) + b"\0" * 8,
                                  one_set(0, [(1, 1)])[:-20] + struct.pack("<I", 999)])
def test_a_malformed_set_is_refused(data: bytes):
    with pytest.raises((BadAranges, struct.error)):
        Aranges(data)


def test_libcs_debug_file_agrees_with_pyelftools():
    library = ElfFile("/lib/x86_64-linux-gnu/libc.so.6")
    try:
        build_id = (library.build_id or b"").hex()
    finally:
        library.close()
    libc = f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"
    if not os.path.exists(libc):
        if os.environ.get("CI"):
            pytest.fail("libc's debug file is missing: make setup installs libc6-dbg")
        pytest.skip("libc's debug file is missing (make setup installs libc6-dbg)")
    with open(libc, "rb") as f:
        dwarf = ELFFile(f).get_dwarf_info()
        ours, theirs = Aranges(dwarf.debug_aranges_sec.stream.getvalue()), dwarf.get_aranges()
        for entry in theirs.entries[::7]:
            for address in (entry.begin_addr, entry.begin_addr + entry.length - 1):
                assert ours.unit_at(address) == theirs.cu_offset_at_addr(address)
