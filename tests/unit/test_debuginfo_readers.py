"""Each debug-info reader on its own, against small checked-in inputs (tests/unit/data:
tiny.c built at -O0 with DWARF 5 and at -O2 with DWARF 4) and tables built here, their
failure paths included: a damaged input gives the reader's own error, never another.

The expected values were read off the same files with readelf and objdump."""

from __future__ import annotations

import contextlib
import io
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from elftools.dwarf.dwarf_expr import DWARFExprParser
from elftools.dwarf.locationlists import BaseAddressEntry, LocationEntry
from elftools.elf.elffile import ELFFile

from sampler.debuginfo import dwarfscan
from sampler.debuginfo.cfi import CallFrames
from sampler.debuginfo.demangle import demangle, last_component, qualified, signature
from sampler.debuginfo.dies import Malformed, children, same_file
from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.elffile import BadFile, ElfFile, crc32
from sampler.debuginfo.gopclntab import BadTable, PcLineTable
from sampler.debuginfo.leb128 import uleb128
from sampler.debuginfo.locations import (
    REGISTERS,
    Computed,
    Frame,
    InBytes,
    InMemory,
    InRegister,
    OptimizedOut,
    entry_at,
    execute,
)
from sampler.debuginfo.types import Array, Enum, Pointer, Scalar, Struct

DATA = Path(__file__).parent / "data"
BINARIES = ("tiny-O0", "tiny-O2")
WALK = {"tiny-O0": (0x1129, 0x11A3), "tiny-O2": (0x1170, 0x11B6)}
"""walk()'s [low, high) in each build (objdump -d)."""


@pytest.fixture(params=BINARIES)
def elf(request: pytest.FixtureRequest) -> Iterator[ElfFile]:
    opened = ElfFile(str(DATA / request.param))
    yield opened
    opened.close()


def registers() -> dict[str, int]:
    return {name: 0x7000 + number for number, name in enumerate(REGISTERS)}


# -- leb128 -------------------------------------------------------------------

@pytest.mark.parametrize("data, value, end", [
    (b"\x02", 2, 1), (b"\x7f", 127, 1), (b"\x80\x01", 128, 2), (b"\xe5\x8e\x26", 624485, 3),
    (b"\xff" * 9 + b"\x01", (1 << 64) - 1, 10),
])
def test_uleb128_reads_the_number_and_where_it_ends(data: bytes, value: int, end: int) -> None:
    assert uleb128(b"\x00" + data, 1) == (value, end + 1)


def test_uleb128_refuses_a_number_too_long_and_one_cut_short() -> None:
    with pytest.raises(ValueError):
        uleb128(b"\x80" * 11, 0)
    with pytest.raises(IndexError):
        uleb128(b"\x80\x80", 0)


# -- ELF ----------------------------------------------------------------------

def test_an_elf_file_gives_its_build_id_symbols_and_sections(elf: ElfFile) -> None:
    expected = {"tiny-O0": "72db1eb713d58ad5b16f49124a68284a957b776a",
                "tiny-O2": "c7f23286595728ded3a54d5ed963bada3731382e"}
    assert elf.build_id is not None and elf.build_id.hex() == expected[Path(elf.path).name]
    assert elf.has_dwarf and elf.has_symtab and elf.is_position_independent()
    assert elf.debuglink() is None
    symbols = elf.symbols()
    low, high = WALK[Path(elf.path).name]
    assert (symbols["walk"].address, symbols["walk"].size, symbols["walk"].is_function) == (low, high - low, True)
    assert symbols["head"].size == 24 and not symbols["head"].is_function and symbols["head"].exported
    assert not symbols["counter"].exported  # static: no copy relocation can move it
    assert {".text", ".debug_info", ".eh_frame"} <= elf.section_names()
    assert elf.go_table() is None


def test_what_is_not_an_elf_file_is_bad_file_only(tmp_path: Path) -> None:
    raw = (DATA / "tiny-O0").read_bytes()
    cases = {"text": b"hello, not an ELF file\n", "empty": b"", "header only": raw[:64],
             "truncated": raw[:4096], "no sections": raw[:40] + b"\xff" * 8 + raw[48:200]}
    refused: list[str] = []
    for name, data in cases.items():
        path = tmp_path / name.replace(" ", "-")
        path.write_bytes(data)
        try:
            opened = ElfFile(str(path))
        except BadFile:
            refused.append(name)  # refused at once
            continue
        with opened:  # or each reading gives what it can, or BadFile: never another error
            for read in (opened.symbols, opened.section_names, opened.first_load_address, opened.go_table,
                         opened.debuglink, opened.text_section):
                with contextlib.suppress(BadFile):
                    read()
            assert opened.build_id is None or len(opened.build_id) == 20
    assert {"text", "empty"} <= set(refused), refused
    with pytest.raises(BadFile):
        ElfFile(str(tmp_path / "missing"))


def test_crc32_is_the_debuglink_checksum(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"x" * 100_000)
    assert crc32(str(path)) == zlib.crc32(b"x" * 100_000)


# -- names -------------------------------------------------------------------

def test_demangled_names() -> None:
    text = demangle("_ZNK2rb4Ring4sizeEv")
    assert text == "rb::Ring::size() const"
    assert qualified(text) == "rb::Ring::size" and signature(text) == "rb::Ring::size() const"
    rust = demangle("_ZN4main4Ring4read17h0123456789abcdefE")
    assert rust is not None and qualified(rust) == "main::Ring::read"  # the hash is ignored
    template = demangle("_Z1fIiEvT_")
    assert template == "void f<int>(int)" and qualified(template) == "f<int>"
    assert last_component("std::vector<int, std::allocator<int> >::push_back") == "push_back"
    assert demangle("malloc") is None

    assert demangle("_Z" + "9" * 40) is None  # a length past the name: not demangled, no crash


# -- DWARF: index, lines, scopes, types ----------------------------------------

def test_the_index_finds_functions_globals_and_lines(elf: ElfFile) -> None:
    debug = Debug(elf.elf, 0)
    low, high = WALK[Path(elf.path).name]
    walk = debug.function_named("walk")
    assert walk is not None and (walk.low, walk.high) == (low, high)
    at = debug.function_at(low + 3)
    assert at is not None and at.name == "walk"
    assert debug.function_at(0x10) is None and debug.function_named("nothing") is None
    assert low < debug.after_prologue(walk) < high
    line = debug.line_address("tiny.c", 26)  # sum += here
    assert line is not None and low < line < high
    assert debug.line_address("other.c", 26) is None
    assert debug.global_names() == ["counter", "head"]
    assert debug.has_global("head") and not debug.has_global("walk")


def test_types_come_from_their_dies_with_a_list_that_points_to_itself(elf: ElfFile) -> None:
    debug = Debug(elf.elf, 0)
    head = debug.global_variable("head")
    assert head is not None and isinstance(head.type, Struct)
    node = head.type
    assert (node.name, node.size, list(node.members)) == ("node", 24, ["next", "value", "small", "color"])
    pointer = node.members["next"].type
    assert isinstance(pointer, Pointer) and pointer.target is node  # converted once, not forever
    assert node.members["value"].type == Scalar("unsigned int", 4, "unsigned")
    small = node.members["small"]
    assert small.offset == 12 and isinstance(small.type, Array) and small.type.count == 4
    assert small.type.element == Scalar("short int", 2, "signed")
    color = node.members["color"].type
    assert isinstance(color, Enum) and color.signed and color.names == {1: "RED", 2: "GREEN", -3: "BLUE"}


def test_globals_are_at_their_address_plus_the_bias(elf: ElfFile) -> None:
    debug = Debug(elf.elf, 0x1000)
    for name in ("head", "counter"):
        variable = debug.global_variable(name)
        assert variable is not None
        assert debug.location(variable, None, None) == InMemory(elf.symbols()[name].address + 0x1000)


def test_locals_at_o0_are_frame_base_relative() -> None:
    # GIVEN walk() at -O0: its frame base is the CFA, its locals at fixed offsets from it
    with ElfFile(str(DATA / "tiny-O0")) as elf:
        debug = Debug(elf.elf, 0)
        walk = debug.function_named("walk")
        assert walk is not None
        regs = registers()
        for pc, cfa in ((walk.low, regs["rsp"] + 8), (debug.after_prologue(walk), regs["rbp"] + 16)):
            frame = Frame(regs, pc, cfa=lambda pc=pc: debug.cfa(pc, regs), read_word=lambda a: 0)
            # WHEN the variables in scope are located at the entry and after the prologue
            scope = debug.variables(walk, pc)
            assert sorted(scope) == ["limit", "n", "sum"]  # i is in an inner block that does not cover pc
            # THEN each is in memory below the CFA (readelf: DW_OP_fbreg -56, -64, -24)
            located = {name: debug.location(v, frame, walk) for name, v in scope.items()}
            assert located == {"n": InMemory(cfa - 56), "limit": InMemory(cfa - 64), "sum": InMemory(cfa - 24)}


def test_locals_at_o2_come_from_location_lists() -> None:
    with ElfFile(str(DATA / "tiny-O2")) as elf:
        debug = Debug(elf.elf, 0)
        walk = debug.function_named("walk")
        assert walk is not None
        frame = Frame(registers(), walk.low, cfa=lambda: 0, read_word=lambda a: 0)
        scope = debug.variables(walk, walk.low)
        # readelf --debug-dump=loc: at the entry n is in RDI, limit in RSI, sum is the constant 0
        assert debug.location(scope["n"], frame, walk) == InRegister("rdi")
        assert debug.location(scope["limit"], frame, walk) == InRegister("rsi")
        assert debug.location(scope["sum"], frame, walk) == Computed(0)


def test_the_cfa_rule_follows_the_prologue() -> None:
    with ElfFile(str(DATA / "tiny-O0")) as elf:
        frames = CallFrames(elf.elf, elf.elf.get_dwarf_info())
        low, high = WALK["tiny-O0"]
        assert frames.rule(low) == (7, 8)  # rsp + 8 at the entry
        assert frames.rule(low + 1) == (7, 16)  # after push %rbp
        assert frames.rule(low + 4) == (6, 16)  # after mov %rsp,%rbp: rbp + 16 in the body
        assert frames.rule(high - 2) == (6, 16)
        assert frames.rule(high - 1) == (7, 8)  # at ret, after leave
        assert frames.function_range(low + 10) == (low, high)
        assert frames.rule(0x10) is None and frames.function_range(0x10) is None


# -- DWARF: the walks, on damaged input -----------------------------------------

def damaged(patch: dict[int, bytes]) -> ELFFile:
    """tiny-O0 with bytes of its .debug_info replaced (offsets inside the section)."""
    raw = bytearray((DATA / "tiny-O0").read_bytes())
    start = ELFFile(io.BytesIO(bytes(raw))).get_section_by_name(".debug_info")["sh_offset"]
    for offset, data in patch.items():
        raw[start + offset:start + offset + len(data)] = data
    return ELFFile(io.BytesIO(bytes(raw)))


def test_the_fast_walk_finds_what_pyelftools_finds() -> None:
    for name in BINARIES:
        elf = ELFFile(io.BytesIO((DATA / name).read_bytes()))
        info = elf.get_dwarf_info()
        data = info.debug_info_sec.stream.getvalue()
        for cu in info.iter_CUs():
            slow = [(d.offset, d.tag) for d in cu.get_top_DIE().iter_children()]
            fast = dwarfscan.top_level(cu, data, info.debug_str_sec.stream.getvalue())
            assert [(offset, tag) for offset, tag, _ in fast] == slow, name
            assert {"walk", "main", "head", "counter"} <= {n for _, _, n in fast}, name


def test_the_fast_walk_refuses_a_unit_cut_short() -> None:
    elf = ELFFile(io.BytesIO((DATA / "tiny-O0").read_bytes()))
    info = elf.get_dwarf_info()
    cu = next(info.iter_CUs())
    data = info.debug_info_sec.stream.getvalue()
    for cut in (len(data) // 2, len(data) - 3):
        with pytest.raises((dwarfscan.CannotScan, IndexError, ValueError)):  # what Debug falls back on
            dwarfscan.top_level(cu, data[:cut] + b"\x7f" * 2)


def test_a_sibling_that_points_back_is_malformed_not_a_loop() -> None:
    # the enumeration DIE at 0xa2 has DW_AT_sibling (DW_FORM_ref4) at 0xb0: point it back at itself
    elf = damaged({0xB0: struct.pack("<I", 0xA2)})
    top = next(elf.get_dwarf_info().iter_CUs()).get_top_DIE()
    with pytest.raises(Malformed, match="points back"):
        list(children(top))


def test_abbreviations_past_their_section_are_malformed_for_every_reading() -> None:
    readings = {"function_named": lambda debug: debug.function_named("walk"),
                "global_variable": lambda debug: debug.global_variable("head"),
                "function_at": lambda debug: debug.function_at(0x1130),
                "global_names": lambda debug: debug.global_names()}
    for name, read in readings.items():
        debug = Debug(damaged({8: struct.pack("<I", 0x7FFFFFF0)}), 0)  # DWARF 5 unit header: debug_abbrev_offset
        with pytest.raises(Malformed):  # the one error a reader of damaged debug info may raise
            read(debug)
            pytest.fail(f"{name} read an unreadable unit")


def test_same_file_matches_a_trailing_path() -> None:
    assert same_file("/src/app/tiny.c", "tiny.c") and same_file("/src/app/tiny.c", "./app/tiny.c")
    assert not same_file("/src/app/notiny.c", "tiny.c")


# -- the DW_OP interpreter, without a process ------------------------------------

def ops(code: bytes) -> list:  # type: ignore[type-arg]
    structs = ELFFile(io.BytesIO((DATA / "tiny-O0").read_bytes())).get_dwarf_info().structs
    return list(DWARFExprParser(structs).parse_expr(list(code)))


def run(code: bytes, frame: Frame | None = None, bias: int = 0) -> object:
    return execute(ops(code), "x", frame, bias, frame_base=lambda: 0x9000)


def test_the_interpreter_computes_locations_from_registers_and_memory() -> None:
    memory = {0x7007 + 8: 0x1234}
    frame = Frame(registers(), 0, cfa=lambda: 0x8000, read_word=lambda address: memory[address])
    assert run(b"\x03" + struct.pack("<Q", 0x4010), bias=0x1000) == InMemory(0x5010)  # DW_OP_addr
    assert run(b"\x55", frame) == InRegister("rdi")  # DW_OP_reg5
    assert run(b"\x77\x08\x06", frame) == InMemory(0x1234)  # DW_OP_breg7 8; DW_OP_deref
    assert run(b"\x91\x70", frame) == InMemory(0x9000 - 16)  # DW_OP_fbreg -16
    assert run(b"\x9c\x23\x10", frame) == InMemory(0x8010)  # DW_OP_call_frame_cfa; DW_OP_plus_uconst 16
    assert run(b"\x33\x9f") == Computed(3)  # DW_OP_lit3; DW_OP_stack_value
    # a value in two registers (a Go string): DW_OP_reg0; DW_OP_piece 8; DW_OP_reg3; DW_OP_piece 8
    joined = run(b"\x50\x93\x08\x53\x93\x08", frame)
    assert joined == InBytes(struct.pack("<QQ", registers()["rax"], registers()["rbx"]))


@pytest.mark.parametrize("code, frame, said", [
    (b"\x77\x08", False, "needs registers"),  # DW_OP_breg7 with no stop
    (b"\x9c", False, "needs a frame"),  # DW_OP_call_frame_cfa with no stop
    (b"\xa3\x01\x55\x9f", True, "only its entry value"),  # DW_OP_entry_value(DW_OP_reg5)
    (b"\x96", True, "unsupported DWARF location operation DW_OP_nop"),
    (b"", True, "optimized out here"),
    (b"\x50\x93\x04\x93\x04", True, "partly optimized out"),  # the second piece has no location
])
def test_what_the_interpreter_cannot_locate_is_optimized_out(code: bytes, frame: bool, said: str) -> None:
    stop = Frame(registers(), 0, cfa=lambda: 0, read_word=lambda a: 0) if frame else None
    with pytest.raises(OptimizedOut, match=said):
        run(code, stop)


def test_a_location_list_entry_is_chosen_by_pc_after_a_base_address() -> None:
    entries = [LocationEntry(0, 0, 0x00, 0x10, b"first", False), BaseAddressEntry(0, 0, 0x2000),
               LocationEntry(0, 0, 0x00, 0x10, b"second", False), LocationEntry(0, 0, 0x3000, 0x3010, b"third", True)]
    assert entry_at(entries, 0x1000, 0x1008) == b"first"
    assert entry_at(entries, 0x1000, 0x2008) == b"second"
    assert entry_at(entries, 0x1000, 0x3000) == b"third"
    assert entry_at(entries, 0x1000, 0x2010) is None


# -- Go's function table ----------------------------------------------------------

def encode_uleb(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def pc_values(runs: list[tuple[int, int]], quantum: int = 1) -> bytes:
    """Go's pc-value encoding: (bytes of code, value) runs, values as zig-zag deltas from -1."""
    out, value = bytearray(), -1
    for size, new in runs:
        delta = new - value
        out += encode_uleb(delta << 1 if delta >= 0 else (~delta << 1) | 1) + encode_uleb(size // quantum)
        value = new
    return bytes(out + b"\0")


def go_table(functions: list[tuple[str, int, int, str, list[tuple[int, int]], list[tuple[int, int]]]],
             magic: int = 0xFFFFFFF1, text_start: int = 0) -> bytes:
    """A Go 1.20 .gopclntab: (name, entry, end, file, file runs, line runs) per function; the
    file runs' values index [file, "inlined.go"]."""
    names, files = bytearray(), bytearray()
    file_names = sorted({function[3] for function in functions} | {"inlined.go"})
    file_at = {}
    for name in file_names:
        file_at[name] = len(files)
        files += name.encode() + b"\0"
    pctab, cutab = bytearray(b"\0"), bytearray()
    records = []
    for name, entry, end, file, file_runs, line_runs in functions:
        cu = len(cutab) // 4
        for f in (file, "inlined.go"):
            cutab += struct.pack("<I", file_at[f])
        pcfile = len(pctab)
        pctab += pc_values(file_runs)
        pcln = len(pctab)
        pctab += pc_values(line_runs)
        name_at = len(names)
        names += name.encode() + b"\0"
        records.append((entry, end, struct.pack("<IiIIIIIII", entry, name_at, 0, 0, 0, pcfile, pcln, 0, cu)))
    header = 8 + 8 * 8
    funcnames = header
    cutab_at = funcnames + len(names)
    filetab = cutab_at + len(cutab)
    pctab_at = filetab + len(files)
    pcln_at = pctab_at + len(pctab)
    functab = bytearray()
    record_at = 4 * (2 * len(functions) + 2)
    bodies = bytearray()
    for entry, _end, body in records:
        functab += struct.pack("<II", entry, record_at + len(bodies))
        bodies += body
    functab += struct.pack("<II", records[-1][1], 0)
    head = struct.pack("<IBBBB", magic, 0, 0, 1, 8) + struct.pack(
        "<8Q", len(functions), len(file_names), text_start, funcnames, cutab_at, filetab, pctab_at, pcln_at)
    return bytes(head + names + cutab + files + pctab + functab + bodies)


TABLE = [
    ("main.(*Ring).Read", 0x00, 0x40, "/src/ring/main.go", [(0x40, 0)], [(0x10, 50), (0x10, 51), (0x20, 53)]),
    ("main.helper", 0x40, 0x80, "/src/ring/util.go", [(0x20, 0), (0x20, 1)], [(0x20, 10), (0x20, 53)]),
]


def test_go_functions_and_lines_are_read_from_the_table() -> None:
    table = PcLineTable(go_table(TABLE), text_start=0x401000)
    assert [(f.name, f.entry, f.end) for f in table.functions()] == [
        ("main.(*Ring).Read", 0x401000, 0x401040), ("main.helper", 0x401040, 0x401080)]
    helper = table.function_named("main.helper")
    assert helper is not None and helper.entry == 0x401040 and table.function_named("main.nothing") is None
    assert table.line_address("main.go", 53, same_file) == 0x401020  # the function written in main.go
    assert table.line_address("main.go", 51, same_file) == 0x401010
    assert table.line_address("util.go", 10, same_file) == 0x401040
    assert table.line_address("inlined.go", 53, same_file) == 0x401060  # inlined into helper only
    assert table.line_address("main.go", 99, same_file) is None


def test_a_table_that_records_its_text_start_wins_over_the_section() -> None:
    table = PcLineTable(go_table(TABLE, text_start=0x500000), text_start=0x401000)
    assert table.functions()[0].entry == 0x500000


@pytest.mark.parametrize("how", ["old magic", "pointer size 4", "cut short", "name without end", "huge count"])
def test_a_damaged_go_table_is_bad_table_only(how: str) -> None:
    data = bytearray(go_table(TABLE))
    if how == "old magic":
        data[0:4] = struct.pack("<I", 0xFFFFFFFB)  # Go 1.16
    elif how == "pointer size 4":
        data[7] = 4
    elif how == "cut short":
        data = data[:100]
    elif how == "name without end":
        funcnames = struct.unpack_from("<Q", data, 8 + 3 * 8)[0]
        cutab = struct.unpack_from("<Q", data, 8 + 4 * 8)[0]
        data[funcnames:cutab] = b"x" * (cutab - funcnames)
        data = data[:cutab] + b"\x01" * 4
    elif how == "huge count":
        struct.pack_into("<Q", data, 8, 1 << 40)
    with pytest.raises(BadTable):
        table = PcLineTable(bytes(data), text_start=0x401000)
        table.functions()
        table.line_address("main.go", 53, same_file)


# -- hostile type graphs -------------------------------------------------------------

def test_a_class_that_inherits_from_itself_is_searched_once() -> None:
    from sampler.debuginfo.types import Member

    loop = Struct("loop", 8, {"x": Member("x", 0, Scalar("int", 4))})
    loop.bases.append(Member("", 0, loop))
    other = Struct("other", 8)
    other.bases.append(Member("", 0, other))
    other.bases.append(Member("", 4, loop))
    assert loop.member("x") == (0, loop.members["x"])
    assert loop.member("nothing") is None
    assert other.member("x") == (4, loop.members["x"])
    # forty levels, each listing the next twice: 2**40 paths if each were walked
    chain = Struct("level0", 8)
    top = chain
    for level in range(1, 41):
        deeper = Struct(f"level{level}", 8)
        chain.bases += [Member("", 0, deeper), Member("", 8, deeper)]
        chain = deeper
    assert top.member("nothing") is None


def test_a_number_too_wide_to_print_is_printed_in_hex() -> None:
    from sampler.sample import format_value

    huge = 1 << (4096 * 8 - 1)
    assert format_value(huge) == hex(huge)


def test_a_go_table_whose_functions_share_one_long_pc_table_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    from sampler.debuginfo import gopclntab

    runs = [(1, 10 + i % 7) for i in range(60_000)]  # 60,000 one-byte runs of lines
    functions = [(f"main.f{i}", 0x100000 * i, 0x100000 * i + 60_000, "/src/main.go", [(60_000, 0)], runs)
                 for i in range(40)]  # each its own table here; the budget counts them all
    table = PcLineTable(go_table(functions), text_start=0x401000)
    monkeypatch.setattr(gopclntab, "MAX_RUNS", 100_000)  # the real budget, 2 million, takes seconds to reach
    with pytest.raises(BadTable, match="pc-table entries"):
        table.line_address("main.go", 99, same_file)


def test_a_debug_section_that_claims_more_than_its_file_is_malformed() -> None:
    raw = bytearray((DATA / "tiny-O0").read_bytes())
    elf = ELFFile(io.BytesIO(bytes(raw)))
    index = next(i for i, section in enumerate(elf.iter_sections()) if section.name == ".debug_str")
    struct.pack_into("<Q", raw, elf["e_shoff"] + index * elf["e_shentsize"] + 32, 3 << 30)  # sh_size: 3 GiB
    with pytest.raises(Malformed, match="past the end of its file"):
        Debug(ELFFile(io.BytesIO(bytes(raw))), 0)
