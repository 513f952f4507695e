"""Where a function's computed gotos land (sampler/inprocess/gotos.py): Debian's python3.11 eval loop
read from its file (make setup installs it), and code whose indirect jump is a switch's relative table."""

from __future__ import annotations

import io

from elftools.elf.elffile import ELFFile

from sampler.inprocess.gotos import landings
from sampler.inprocess.relocate import Refused, decode, displace

PYTHON = "/usr/bin/python3.11"
EVAL = "_PyEval_EvalFrameDefault"


def _eval_loop() -> tuple[int, bytes, object]:
    with open(PYTHON, "rb") as file:
        f = io.BytesIO(file.read())
    elf = ELFFile(f)
    symbol = next(s for s in elf.get_section_by_name(".dynsym").iter_symbols() if s.name == EVAL)

    def read(address: int, size: int) -> bytes:
        for segment in elf.iter_segments():
            if segment["p_type"] == "PT_LOAD" and segment["p_vaddr"] <= address < segment["p_vaddr"] + \
                    segment["p_filesz"]:
                f.seek(address - segment["p_vaddr"] + segment["p_offset"])
                return f.read(size)
        raise OSError(f"{address:#x} is not in the file")

    return symbol["st_value"], read(symbol["st_value"], symbol["st_size"]), read


def test_the_eval_loops_computed_gotos_land_on_its_opcode_targets() -> None:
    start, code, read = _eval_loop()
    found = landings(decode(code, start), start, start + len(code), read)  # type: ignore[arg-type]
    # every opcode's label (one table of 256: Debian's non-PIE build reads it at a fixed address), some in
    # the .cold part a PGO build moves out of the function
    assert found is not None and 100 < len(found) <= 256
    assert sum(start <= t < start + len(code) for t in found) > 100
    # the label start_frame's copy Debian's build runs (a Python probe's place) takes a jump: no target inside
    displace(code, start, 0x502BF9, read)  # type: ignore[arg-type]


def test_a_switch_through_a_table_of_offsets_is_not_known_so_no_jump_goes_past_the_entry() -> None:
    # lea rdx, [rip + 0x100]; movsxd rax, dword ptr [rdx + rax*4]; add rax, rdx; jmp rax; nop * 8; ret
    code = bytes.fromhex("488d1500010000" "48630482" "4801d0" "ffe0") + b"\x90" * 8 + b"\xc3"
    start = 0x1000

    def read(address: int, size: int) -> bytes:
        return bytes(size)

    assert landings(decode(code, start), start, start + len(code), read) is None
    try:
        displace(code, start, start + 17, read)
    except Refused as e:
        assert "jumps through a table" in str(e)
    else:
        raise AssertionError("a jump past the entry of a function with a switch's table was allowed")


def test_a_load_before_the_one_that_made_the_jumps_register_is_not_taken_for_it() -> None:
    # lea rbx, [rip + 0x200]; mov rax, [rbx + rcx*8]; lea rdx, [rip + 0x100];
    # movsxd rax, dword ptr [rdx + rax*4]; add rax, rdx; jmp rax; nop * 8; ret: the jump's rax is the add's
    code = bytes.fromhex("488d1d00020000" "488b04cb" "488d1500010000" "48630482" "4801d0" "ffe0") \
        + b"\x90" * 8 + b"\xc3"
    start = 0x1000

    def read(address: int, size: int) -> bytes:  # (any table read: entries inside the function)
        return (start + 2).to_bytes(8, "little") * (size // 8)

    assert landings(decode(code, start), start, start + len(code), read) is None
