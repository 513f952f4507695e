"""linetable.py: the same file and line as pyelftools gives, for real units (C with DWARF 5,
Rust with DWARF 4, Go with DWARF 2, libc's debug file) and for programs assembled here; and
damaged bytes give Malformed (or a table), never another error, never a hang."""

from __future__ import annotations

import bisect
import io
import os
import random
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from elftools.common.utils import struct_parse
from elftools.dwarf.lineprogram import LineProgram
from elftools.dwarf.structs import DWARFStructs
from elftools.elf.elffile import ELFFile

from sampler.debuginfo.dies import Malformed, file_names
from sampler.debuginfo.elffile import ElfFile
from sampler.debuginfo.linetable import END, MAX_ENTRIES, Table, decode, read_header

ROOT = Path(__file__).parents[2]
DATA = Path(__file__).parent / "data"


# -- programs assembled here -------------------------------------------------------

LINE_BASE, LINE_RANGE, OPCODE_BASE = -5, 14, 13
LENGTHS = bytes([0, 1, 1, 1, 1, 0, 0, 0, 1, 0, 0, 1])
"""The standard opcodes' operand counts, as gcc writes them."""


def uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def sleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        out.append(byte | (0 if done else 0x80))
        if done:
            return bytes(out)


def set_address(address: int, size: int = 8) -> bytes:
    return b"\0" + uleb(1 + size) + b"\x02" + address.to_bytes(size, "little")


END_SEQUENCE = b"\0\x01\x01"
COPY = b"\x01"
CONST_ADD_PC = b"\x08"


def special(address: int, line: int, line_base: int = LINE_BASE, line_range: int = LINE_RANGE,
            opcode_base: int = OPCODE_BASE) -> bytes:
    opcode = (line - line_base) + line_range * address + opcode_base
    assert opcode_base <= opcode <= 255 and 0 <= line - line_base < line_range
    return bytes([opcode])


def advance_line(delta: int) -> bytes:
    return b"\x03" + sleb(delta)


def advance_pc(delta: int) -> bytes:
    return b"\x02" + uleb(delta)


def fixed_advance_pc(delta: int) -> bytes:
    return b"\x09" + struct.pack("<H", delta)


def set_file(index: int) -> bytes:
    return b"\x04" + uleb(index)


def unit(program: bytes, version: int = 4, directories: tuple[bytes, ...] = (b"/src", b"include"),
         files: tuple[tuple[bytes, int], ...] = ((b"main.c", 1), (b"ring.h", 2), (b"plain.c", 0)),
         minimum_length: int = 1, maximum_operations: int = 1, line_base: int = LINE_BASE,
         line_range: int = LINE_RANGE, opcode_base: int = OPCODE_BASE, lengths: bytes = LENGTHS,
         v5_tables: bytes = b"", dwarf64: bool = False) -> bytes:
    """A line table unit (versions 2-4 with the old tables; 5 with ``v5_tables`` as written)."""
    fields = struct.pack("<B", minimum_length)
    if version >= 4:
        fields += struct.pack("<B", maximum_operations)
    fields += struct.pack("<BbBB", 1, line_base, line_range, opcode_base) + lengths[:opcode_base - 1]
    if version >= 5:
        fields += v5_tables
    else:
        fields += b"".join(d + b"\0" for d in directories) + b"\0"
        fields += b"".join(name + b"\0" + uleb(directory) + b"\0\0" for name, directory in files) + b"\0"
    offset_form = "<Q" if dwarf64 else "<I"
    body = struct.pack("<H", version) + (b"\x08\x00" if version >= 5 else b"")
    body += struct.pack(offset_form, len(fields)) + fields + program
    if dwarf64:
        return struct.pack("<IQ", 0xFFFFFFFF, len(body)) + body
    return struct.pack("<I", len(body)) + body


def pyelftools_rows(data: bytes, version: int = 4, address_size: int = 8) -> list[tuple[int, int | None, int | None]]:
    """(address, file, line) of each row pyelftools decodes from an assembled unit at 0 (file and
    line None at a sequence's end), sorted by address as dwarf.py sorts them."""
    offset = 0
    structs = DWARFStructs(little_endian=True, dwarf_format=32, address_size=address_size, dwarf_version=version)
    stream = io.BytesIO(data)
    header = struct_parse(structs.Dwarf_lineprog_header, stream, offset)
    end = offset + header["unit_length"] + 4
    program = LineProgram(header, stream, structs, stream.tell(), end)
    rows: list[tuple[int, int | None, int | None]] = [
        (e.state.address, None, None) if e.state.end_sequence else (e.state.address, e.state.file, e.state.line)
        for e in program.get_entries() if e.state is not None]
    rows.sort(key=lambda row: row[0])
    return rows


def ours(table: Table) -> list[tuple[int, int | None, int | None]]:
    return [(address, None, None) if file == END else (address, file, line)
            for address, file, line in zip(table.addresses, table.files, table.lines)]


# two sequences, the second at lower addresses than the first
SEQUENCES = (
    set_address(0x2000) + advance_line(9) + COPY  # 0x2000 line 10
    + special(3, 2)  # 0x2003 line 12
    + CONST_ADD_PC + special(0, 1)  # const_add_pc: (255 - 13) // 14 = 17 -> 0x2014 line 13
    + fixed_advance_pc(0x100) + advance_line(-7) + COPY  # 0x2114 line 6
    + set_file(2) + advance_pc(300) + special(1, -5)  # 0x2241 line 1 in ring.h
    + advance_line(-1000) + advance_line(1003) + special(2, 0)  # 0x2243 line 4
    + advance_pc(0x10) + END_SEQUENCE  # 0x2253 end
    + set_address(0x1000) + set_file(3) + special(0, 4)  # 0x1000 line 5 in plain.c
    + special(0, 1) + special(0x10, 0)  # 0x1000 line 6 (the same address: the later row counts), 0x1010
    + advance_pc(8) + END_SEQUENCE)  # 0x1018 end

EXPECTED = [(0x1000, 3, 5), (0x1000, 3, 6), (0x1010, 3, 6), (0x1018, None, None),
            (0x2000, 1, 10), (0x2003, 1, 12), (0x2014, 1, 13), (0x2114, 1, 6), (0x2241, 2, 1), (0x2243, 2, 4),
            (0x2253, None, None)]


def test_an_assembled_program_gives_the_rows_pyelftools_gives():
    data = unit(SEQUENCES)
    table = decode(data, 0)
    assert ours(table) == EXPECTED == pyelftools_rows(data)
    assert table.names == {1: "/src/main.c", 2: "include/ring.h", 3: "plain.c"}


def test_places_between_rows():
    table = decode(unit(SEQUENCES), 0)
    assert table.place(0xFFF) is None
    assert table.place(0x1000) == ("plain.c", 6)
    assert table.place(0x100F) == ("plain.c", 6)
    assert table.place(0x1017) == ("plain.c", 6)
    assert table.place(0x1018) is None and table.place(0x1FFF) is None  # between the sequences
    assert table.place(0x2002) == ("/src/main.c", 10)
    assert table.place(0x2242) == ("include/ring.h", 1)
    assert table.place(0x2252) == ("include/ring.h", 4)
    assert table.place(0x2253) is None and table.place(1 << 40) is None
    assert table.row(0x2013) == (1, 12)


def test_a_later_table_at_an_offset_and_the_sections_other_units():
    first, second = unit(SEQUENCES), unit(set_address(0x5000) + special(4, 0) + END_SEQUENCE)
    data = first + second + b"\xff" * 7  # what follows a unit is not read
    assert ours(decode(data, len(first))) == [(0x5004, 1, 1), (0x5004, None, None)]


@pytest.mark.parametrize("version", [2, 3])
def test_older_versions(version: int):
    # DWARF 2 defines 9 standard opcodes: with opcode_base 10, 10 is the first special opcode
    program = set_address(0x400000, 4) + bytes([10]) + special(1, 3, opcode_base=10) + CONST_ADD_PC \
        + COPY + END_SEQUENCE
    data = unit(program, version=version, opcode_base=10)
    table = decode(data, 0)
    assert ours(table) == pyelftools_rows(data, version=version, address_size=4)
    assert ours(table) == [(0x400000, 1, -4), (0x400001, 1, -1), (0x400012, 1, -1), (0x400012, None, None)]


def test_instructions_of_several_operations():
    # VLIW: the address advances by whole instructions of 2 operations, 4 bytes each
    program = set_address(0x100) + special(3, 1) + special(1, 1) + special(1, 1) + END_SEQUENCE
    data = unit(program, minimum_length=4, maximum_operations=2)
    assert ours(decode(data, 0)) == pyelftools_rows(data) == [
        (0x104, 1, 2), (0x108, 1, 3), (0x108, 1, 4), (0x108, None, None)]


def test_opcodes_of_a_later_standard_and_vendors_are_skipped():
    # opcode 13 with two operands (the header says so), an unknown extended opcode, set_discriminator
    program = set_address(0x10) + b"\x0d" + uleb(1 << 20) + uleb(5) + b"\0\x04\x80\x01\x02\x03" \
        + b"\0\x02\x04\x07" + b"\x0c\x01" + special(1, 1, opcode_base=14) + END_SEQUENCE
    data = unit(program, opcode_base=14, lengths=LENGTHS + b"\x02")
    assert ours(decode(data, 0)) == [(0x11, 1, 2), (0x11, None, None)]


def test_a_file_the_program_defines_is_skipped():
    define = b"\x03" + b"gen.c\0" + uleb(2) + b"\0\0"  # DW_LNE_define_file: name, directory, time, size
    program = b"\0" + uleb(len(define)) + define + set_file(4) + set_address(0x30) + COPY + advance_pc(4) \
        + END_SEQUENCE
    table = decode(unit(program), 0)
    assert 4 not in table.names and table.place(0x30) == ("", 1)


def v5_tables(offset_size: int = 4) -> tuple[bytes, bytes, bytes]:
    """DWARF 5's directory and file tables in most of the forms gcc, clang and others write:
    (the tables, .debug_line_str, .debug_str)."""
    line_strings = b"junk\0/build\0main.c\0"
    strings = b"x\0util.h\0"
    offset = "<I" if offset_size == 4 else "<Q"
    # directories: DW_LNCT_path as line_strp; three: "/build", "junk", "k"
    tables = bytes([1]) + uleb(1) + uleb(0x1F)
    tables += uleb(3) + struct.pack(offset, 5) + struct.pack(offset, 0) + struct.pack(offset, 3)
    # files: path (string), directory index (udata), MD5 (data16), size (data4), a vendor's block,
    # timestamp (data2); three
    tables += bytes([6]) + uleb(1) + uleb(0x08) + uleb(2) + uleb(0x0F) + uleb(5) + uleb(0x1E) + uleb(4) + uleb(0x06)
    tables += uleb(0x2001) + uleb(0x09) + uleb(3) + uleb(0x05)
    tables += uleb(3)
    tables += b"a.c\0" + uleb(0) + b"\x11" * 16 + b"\0\0\0\0" + uleb(2) + b"\xaa\xbb" + b"\0\0"
    tables += b"/abs/b.c\0" + uleb(2) + b"\0" * 16 + b"\0\0\0\0" + uleb(0) + b"\0\0"
    tables += b"c.c\0" + uleb(1) + b"\0" * 16 + b"\0\0\0\0" + uleb(1) + b"\x01" + b"\0\0"
    return tables, line_strings, strings


def test_dwarf_5_names_in_its_forms():
    tables, line_strings, strings = v5_tables()
    program = set_address(0x10) + set_file(0) + COPY + set_file(2) + special(1, 1) + advance_pc(1) + END_SEQUENCE
    table = decode(unit(program, version=5, v5_tables=tables), 0, line_strings, strings)
    assert table.names == {0: "/build/a.c", 1: "/abs/b.c", 2: "junk/c.c"}
    assert table.place(0x10) == ("/build/a.c", 1) and table.place(0x11) == ("junk/c.c", 2)


def test_names_from_debug_str_and_64_bit_dwarf():
    _, line_strings, strings = v5_tables()
    tables = bytes([1]) + uleb(1) + uleb(0x1F) + uleb(1) + struct.pack("<Q", 5)  # directory "/build"
    tables += bytes([2]) + uleb(1) + uleb(0x0E) + uleb(2) + uleb(0x0B)  # path (strp), directory (data1)
    tables += uleb(1) + struct.pack("<Q", 2) + b"\0"
    data = unit(set_address(0x10) + set_file(0) + COPY + advance_pc(1) + END_SEQUENCE, version=5, v5_tables=tables,
                dwarf64=True)
    assert decode(data, 0, line_strings, strings).place(0x10) == ("/build/util.h", 1)
    assert read_header(data, 0, line_strings, strings).names == {0: "/build/util.h"}


# -- real units --------------------------------------------------------------------


def libc_debug_file() -> str:
    library = ElfFile("/lib/x86_64-linux-gnu/libc.so.6")
    try:
        build_id = (library.build_id or b"").hex()
    finally:
        library.close()
    return f"/usr/lib/debug/.build-id/{build_id[:2]}/{build_id[2:]}.debug"


REAL = {
    "stacks (C, DWARF 5)": lambda: str(ROOT / "targets/bin/stacks"),
    "stacks-rust (DWARF 4)": lambda: str(ROOT / "targets/bin/stacks-rust"),
    "ringbuf-go (DWARF 2, compressed)": lambda: str(ROOT / "targets/bin/ringbuf-go"),
    "libc's debug file (DWARF 5, compressed)": libc_debug_file,
    "tiny-O0 (DWARF 5)": lambda: str(DATA / "tiny-O0"),
    "tiny-O2 (DWARF 4)": lambda: str(DATA / "tiny-O2"),
}


def section(info: Any, name: str) -> bytes:
    found = getattr(info, name)
    return bytes(found.stream.getvalue()) if found is not None else b""


@pytest.fixture(params=list(REAL))
def dwarf(request: pytest.FixtureRequest) -> Iterator[Any]:
    path = REAL[request.param]()
    if not os.path.exists(path):
        why = f"{path} is missing (make setup builds the targets and installs libc6-dbg)"
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    with open(path, "rb") as f:
        yield ELFFile(f).get_dwarf_info()


def units(line: bytes, line_strings: bytes, strings: bytes) -> list[int]:
    """The offsets of the three units with the longest line programs and of up to a dozen others,
    spread over .debug_line (walked unit after unit: libc's 2,000 units' top DIEs take seconds)."""
    found = []
    offset = 0
    while offset < len(line):
        header = read_header(line, offset, line_strings, strings)
        found.append((header.end - header.start, offset))
        offset = header.end
    largest = sorted(found)[-3:]
    others = [unit for unit in found if unit not in largest]
    return [offset for _, offset in largest + others[::max(1, len(others) // 12)][:12]]


def test_real_units_give_the_lines_pyelftools_gives(dwarf: Any):
    line, line_strings, strings = (section(dwarf, name) for name in
                                   ("debug_line_sec", "debug_line_str_sec", "debug_str_sec"))
    structs = next(dwarf.iter_CUs()).structs  # (what line_program_for_CU passes: every unit's are alike)
    checked = 0
    for offset in units(line, line_strings, strings):
        program = dwarf._parse_line_program_at_offset(offset, structs)
        names = file_names(program, None)
        theirs = [(e.state.address, None if e.state.end_sequence else (names.get(e.state.file, ""), e.state.line))
                  for e in program.get_entries() if e.state is not None]
        theirs.sort(key=lambda row: row[0])  # (stable, as Debug.line_at sorts them)
        addresses = [address for address, _ in theirs]
        table = decode(line, offset, line_strings, strings)
        assert table.addresses == addresses
        assert table.prologue_ends == {e.state.address for e in program.get_entries()
                                       if e.state is not None and e.state.prologue_end and not e.state.end_sequence}
        assert {index: name for index, name in table.names.items() if index in names} == names
        between = [(a + b) // 2 for a, b in zip(addresses, addresses[1:])]
        for address in {*addresses, *(a - 1 for a in addresses), *(a + 1 for a in addresses), *between}:
            at = bisect.bisect_right(addresses, address) - 1
            assert table.place(address) == (theirs[at][1] if at >= 0 else None), hex(address)
        checked += len(addresses)
    assert checked > 0


# -- damaged input ------------------------------------------------------------------


@pytest.mark.parametrize("data", [
    b"", b"\x10\0\0", struct.pack("<I", 100) + b"\x04\0",  # cut short; a length past the section
    struct.pack("<I", 0xFFFFFFF5) + b"\0" * 16,  # a reserved length
    unit(b"", version=1), unit(b"", version=6),
    unit(b"", line_range=0), unit(b"", opcode_base=0), unit(b"", maximum_operations=0),
    unit(b"")[:-3] + b"\xff\xff\xff",  # the file table runs into the program
    unit(b"\0\x09\x02\0\0"),  # set_address past the program's end
    unit(b"\0\x03\x02\0\0\0"[:4]),  # an extended opcode longer than what is left
    unit(b"\0\x00"),  # an extended opcode of no bytes
    unit(set_address(1, 12)),  # an address of 12 bytes
    unit(b"\x02\x80\x80"), unit(b"\x03\xff"), unit(b"\x09\x01"),  # operands cut short
    unit(b"\x02" + b"\x80" * 11 + b"\x01"),  # a number longer than 64 bits
    unit(b"\x0d", opcode_base=14, lengths=LENGTHS + b"\x03"),  # operands the header counts, missing
])
def test_malformed_units_are_refused(data: bytes):
    with pytest.raises(Malformed):
        decode(data, 0)


@pytest.mark.parametrize("offset", [-1, 5, 1 << 40])
def test_an_offset_outside_the_section_is_refused(offset: int):
    with pytest.raises(Malformed):
        decode(unit(b""), offset)


def test_header_header_length_past_the_unit():
    data = bytearray(unit(b""))
    data[6:10] = struct.pack("<I", 1000)
    with pytest.raises(Malformed, match="header"):
        decode(bytes(data), 0)


NO_FILES = bytes([1]) + uleb(1) + uleb(0x08) + uleb(0)
"""A file table of no entries."""


def v5_with(directories: bytes) -> bytes:
    return unit(set_address(0x10) + COPY, version=5, v5_tables=directories + NO_FILES)


def test_a_dwarf_5_table_of_directories_alone():
    table = decode(v5_with(bytes([1]) + uleb(1) + uleb(0x1F) + uleb(1) + struct.pack("<I", 1)), 0, b"abc\0")
    assert table.names == {} and table.place(0x10) == ("", 1)


@pytest.mark.parametrize("tables, line_strings", [
    (bytes([1]) + uleb(1) + uleb(0x1F) + uleb(1) + struct.pack("<I", 99), b"abc\0"),  # a string past the section
    (bytes([1]) + uleb(1) + uleb(0x1F) + uleb(1) + struct.pack("<I", 1), b"abc"),  # a string without its end
    (bytes([1]) + uleb(1) + uleb(0x1A) + uleb(1) + uleb(0), b""),  # strx: a form not read
    (bytes([0]) + uleb(MAX_ENTRIES + 1), b""),  # too many entries (of no bytes each)
    (bytes([1]) + uleb(1) + uleb(0x08) + uleb(1 << 62), b""),  # entries claimed past any header
    (bytes([1]) + uleb(2) + uleb(0x08) + uleb(1) + b"x\0", b""),  # a directory index as a string
    (bytes([1]) + uleb(1) + uleb(0x0B) + uleb(1) + b"\x01", b""),  # a path as a number
])
def test_malformed_dwarf_5_tables_are_refused(tables: bytes, line_strings: bytes):
    with pytest.raises(Malformed):
        decode(v5_with(tables), 0, line_strings)


def test_names_are_bounded():
    long = b"d" * 4000 + b"\0"
    many = bytes([1]) + uleb(1) + uleb(0x1F) + uleb(5000) + struct.pack("<I", 0) * 5000  # 5000 x 4000 bytes
    with pytest.raises(Malformed, match="bytes of paths"):
        decode(v5_with(many), 0, long)
    with pytest.raises(Malformed, match="4096 bytes"):
        decode(v5_with(bytes([1]) + uleb(1) + uleb(0x1F) + uleb(1) + struct.pack("<I", 0)), 0, b"d" * 5000 + b"\0")
    with pytest.raises(Malformed, match="bytes of paths"):  # before DWARF 5: files joined to a long directory
        decode(unit(b"", directories=(long[:-1],), files=((b"f.c", 1),) * 5000), 0)
    assert decode(unit(b"", directories=(long[:-1],), files=((b"f.c", 1),) * 1000), 0).names[1000] == \
        long[:-1].decode() + "/f.c"


def test_rows_are_capped():
    program = set_address(0) + special(1, 1) * 10 + END_SEQUENCE
    assert len(decode(unit(program), 0, max_rows=11)) == 11
    with pytest.raises(Malformed, match="more than 10 rows"):
        decode(unit(program), 0, max_rows=10)
    with pytest.raises(Malformed, match="more than 3 rows"):
        decode(unit(program), 0, max_rows=3)


def fuzzed(data: bytes, start: int, end: int, seed: int, count: int) -> Iterator[bytes]:
    """``count`` copies of ``data``, each with one to four bytes in [start, end) set at random."""
    rng = random.Random(seed)
    for _ in range(count):
        copy = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            copy[rng.randrange(start, end)] = rng.randrange(256)
        yield bytes(copy)


@pytest.mark.parametrize("name", ["tiny-O0", "tiny-O2"])
def test_random_damage_gives_a_table_or_malformed_quickly(name: str):
    with open(DATA / name, "rb") as f:
        info = ELFFile(f).get_dwarf_info()
        line, line_strings, strings = (section(info, s) for s in
                                       ("debug_line_sec", "debug_line_str_sec", "debug_str_sec"))
    header = read_header(line, 0, line_strings, strings)
    outcomes = {"table": 0, "malformed": 0}
    slowest = 0.0
    seed = zlib.crc32(name.encode())
    # bytes anywhere in the first unit, then in its header alone (lengths, counts, forms, offsets)
    damaged = [*fuzzed(line, 0, header.end, seed, 1500), *fuzzed(line, 0, header.start, seed + 1, 500)]
    for data in damaged:
        began = time.perf_counter()
        try:
            decode(data, 0, line_strings, strings)
            outcomes["table"] += 1
        except Malformed:
            outcomes["malformed"] += 1
        slowest = max(slowest, time.perf_counter() - began)
    assert outcomes["table"] > 100 and outcomes["malformed"] > 100, outcomes
    assert slowest < 0.5, f"a damaged unit took {slowest:.2f} s"


def test_every_cut_gives_a_table_or_malformed():
    data = unit(SEQUENCES)
    for end in range(len(data)):
        try:
            decode(data[:end], 0)
        except Malformed:
            pass
    tables, line_strings, strings = v5_tables()
    data = unit(set_address(0x10) + COPY + END_SEQUENCE, version=5, v5_tables=tables)
    for end in range(len(data)):
        for cut in (data[:end], data[:4] + data[4:end] + b"\0" * (len(data) - end)):
            try:
                decode(cut, 0, line_strings, strings)
            except Malformed:
                pass
