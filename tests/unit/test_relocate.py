"""Where an in-process probe's jump may go (sampler/inprocess/relocate.py): made-up functions for
each rule, and the entry of every function of Debian's libc, redis-server and python3: each is
displaced exactly (the moved instructions decode the same at their new place, a rip-relative
operand reaching the same byte) or refused with a reason."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from capstone import CS_ARCH_X86, CS_MODE_64, Cs  # type: ignore[import-untyped]
from capstone import x86_const as X

from sampler.inprocess.relocate import JUMP_SIZE, Refused, displace
from tests.unit.real_programs import PROGRAMS, text_functions

DECODER = Cs(CS_ARCH_X86, CS_MODE_64)
DECODER.detail = True


def test_a_prologue_is_displaced_whole_instructions() -> None:
    code = bytes.fromhex("55" "4889e5" "4883ec10" "c3")  # push rbp; mov rbp, rsp; sub rsp, 16; ret
    displaced = displace(code, 0x1000, 0x1000)
    assert [m.address for m in displaced.instructions] == [0x1000, 0x1001, 0x1004]  # 1 + 3 < 5: one more
    assert displaced.size == 8 and displaced.back == 0x1008
    assert displaced.code_at(0x7000) == code[:8]


def test_a_rip_relative_operand_reaches_the_same_byte_from_its_new_place() -> None:
    code = bytes.fromhex("488b0510000000" "c3")  # mov rax, [rip + 0x10]; ret
    displaced = displace(code, 0x400000, 0x400000)
    moved = displaced.code_at(0x500000)
    [instruction] = DECODER.disasm(moved, 0x500000)
    assert instruction.mnemonic == "mov"
    assert 0x500000 + instruction.size + instruction.disp == 0x400000 + 7 + 0x10
    with pytest.raises(Refused, match="cannot reach"):
        displaced.code_at(0x400000 + (3 << 31))


def test_endbr64_stays_first() -> None:
    code = bytes.fromhex("f30f1efa" "55" "4889e5" "5d" "c3")
    displaced = displace(code, 0x1000, 0x1000)
    assert displaced.site == 0x1004 and displaced.instructions[0].address == 0x1004


@pytest.mark.parametrize("hexcode, reason", [
    ("e800000000" "c3", "branch"),                         # call at the site
    ("0f05" "909090" "c3", "kernel"),                      # syscall
    ("4885c0" "4885c0" "75fb" "c3", "jumps to"),           # test; test; jne back into the displaced bytes
    ("4885c0" "90", "no room"),                            # the function ends first
])
def test_what_cannot_move_is_refused_with_the_reason(hexcode: str, reason: str) -> None:
    with pytest.raises(Refused, match=reason):
        displace(bytes.fromhex(hexcode), 0x1000, 0x1000)


def test_a_site_past_the_entry_in_a_function_with_a_table_is_refused() -> None:
    code = bytes.fromhex("4889f8" "4889f0" "4889d1" "ffe0" "c3")  # mov rax, rdi; mov rax, rsi; mov rcx, rdx; jmp rax
    assert displace(code, 0x1000, 0x1000).size == 6  # at the entry: allowed
    with pytest.raises(Refused, match="table"):
        displace(code, 0x1000, 0x1003)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_every_function_entry_of_a_real_program_is_displaced_exactly_or_refused(name: str) -> None:
    _, data, base, functions = text_functions(name)
    outcome: Counter[str] = Counter()
    for address, size in functions:
        code = data[address - base:address - base + size]
        try:
            displaced = displace(code, address, address)
        except Refused as e:
            outcome[str(e).split(" at ")[0].split(" (")[0][:40]] += 1
            continue
        outcome["displaced"] += 1
        assert displaced.size >= JUMP_SIZE and displaced.back <= address + size
        for new in (address + 0x10000000, address + 0x7F000000):
            try:
                moved = displaced.code_at(new)
            except Refused:
                continue
            original = list(DECODER.disasm(b"".join(m.data for m in displaced.instructions), displaced.site))
            again = list(DECODER.disasm(moved, new))
            assert [i.mnemonic for i in again] == [i.mnemonic for i in original], (name, hex(address))
            for before, after in zip(original, again):
                if any(op.type == X.X86_OP_MEM and op.mem.base == X.X86_REG_RIP for op in before.operands):
                    assert before.address + before.size + before.disp == after.address + after.size + after.disp
                else:
                    assert after.op_str == before.op_str, (name, hex(address), before.op_str)
    assert outcome["displaced"] > len(functions) * 0.6, outcome.most_common(8)
    Path(f"/tmp/relocate-{name}.txt").write_text(f"{len(functions)} functions: {outcome.most_common(12)}\n")



def test_a_recording_trampoline_runs_the_moved_instructions_and_jumps_back() -> None:
    from sampler.inprocess.trampoline import DATA, jump, recording
    code = bytes.fromhex("55" "4889e5" "488b0510000000" "c3")  # push rbp; mov rbp, rsp; mov rax, [rip+16]; ret
    displaced = displace(code, 0x401000, 0x401000)
    for entry in (True, False):
        body, moved_at = recording(displaced, 0x500000, 0x600000, 2, entry)
        instructions = list(DECODER.disasm(body, 0x500000))
        names = [i.mnemonic for i in instructions]
        assert DATA.to_bytes(8, "little") not in body and (0x600000).to_bytes(8, "little") in body
        assert names[-1] == "jmp" and instructions[-1].operands[0].imm == displaced.back
        assert instructions[-2].address + instructions[-2].size + instructions[-2].disp == 0x401004 + 7 + 16
        assert body[moved_at:moved_at + 4] == code[:4]  # push rbp; mov rbp, rsp: as they were
        if entry:
            assert names[0] == "push"  # nothing but the registers it uses kept at an entry
        else:
            assert names[:2] == ["lea", "pushfq"] and "popfq" in names
    [jmp] = DECODER.disasm(jump(0x401000, 0x500000), 0x401000)
    assert jmp.mnemonic == "jmp" and jmp.operands[0].imm == 0x500000 and jmp.size == 5
