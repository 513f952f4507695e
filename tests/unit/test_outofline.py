"""The out-of-line copy of the instruction under an int3 (sampler/inprocess/outofline.py): what each kind of
instruction becomes, read back with capstone (tests/integration/test_keepalive.py runs them in a target)."""

from __future__ import annotations

import struct

import pytest
from capstone import CS_ARCH_X86, CS_MODE_64, Cs

from sampler.inprocess.outofline import COPY, copy_of
from sampler.inprocess.relocate import Refused

SITE = 0x401000
AT = 0x7F0000001000
_CS = Cs(CS_ARCH_X86, CS_MODE_64)


def _read(code: bytes, at: int = AT) -> list[tuple[int, str, str]]:
    return [(i.address, i.mnemonic, i.op_str) for i in _CS.disasm(code, at)]


def _absolute(code: bytes, offset: int) -> int:
    """The target of the `jmp [rip+0]; dq` at ``offset``."""
    assert code[offset:offset + 6] == b"\xff\x25\x00\x00\x00\x00"
    return int(struct.unpack_from("<Q", code, offset + 6)[0])


def test_an_instruction_that_does_not_branch_runs_then_jumps_to_the_next() -> None:
    copy = copy_of(bytes.fromhex("4157" "4156"), SITE, AT)  # push r15 (then push r14)
    assert _read(copy.code[:2]) == [(AT, "push", "r15")]
    assert _absolute(copy.code, 2) == SITE + 2
    assert copy.exits == {0: SITE, 2: SITE + 2}


def test_a_rip_relative_operand_still_reaches_its_data_from_the_copy() -> None:
    copy = copy_of(bytes.fromhex("488d0500100000"), SITE, SITE + 0x1000_0000)  # lea rax, [rip + 0x1000]
    (address, mnemonic, _), = _read(copy.code[:7], SITE + 0x1000_0000)
    displacement = int.from_bytes(copy.code[3:7], "little", signed=True)
    assert mnemonic == "lea" and address + 7 + displacement == SITE + 7 + 0x1000
    with pytest.raises(Refused):  # (more than 2 GiB away: no copy, the hit is emulated or stepped)
        copy_of(bytes.fromhex("488d0500100000"), SITE, AT)


def test_branches_keep_their_condition_and_targets() -> None:
    near = copy_of(bytes.fromhex("0f8410000000"), SITE, AT)  # je +0x10 (near)
    assert _read(near.code[:2])[0][1] == "je"
    assert _absolute(near.code, 2) == SITE + 6 and _absolute(near.code, 16) == SITE + 6 + 0x10
    assert _read(near.code[:2])[0][2] == hex(AT + 16)  # (taken: the second absolute jump)
    short = copy_of(bytes.fromhex("75f0"), SITE, AT)  # jne -0x10 (short)
    assert _read(short.code[:2])[0][1:] == ("jne", hex(AT + 16))
    assert _absolute(short.code, 16) == SITE + 2 - 0x10
    jump = copy_of(bytes.fromhex("e9fb0f0000"), SITE, AT)  # jmp +0xffb
    assert _absolute(jump.code, 0) == SITE + 5 + 0xFFB


def test_a_call_pushes_the_programs_return_address_and_a_ret_stays_a_ret() -> None:
    call = copy_of(bytes.fromhex("e8fb0f0000"), SITE, AT)  # call +0xffb
    read = _read(call.code[:20])
    assert [m for _, m, _ in read] == ["lea", "mov", "mov"]
    assert struct.unpack_from("<I", call.code, 8)[0] == (SITE + 5) & 0xFFFFFFFF
    assert struct.unpack_from("<I", call.code, 16)[0] == (SITE + 5) >> 32
    assert _absolute(call.code, 20) == SITE + 5 + 0xFFB
    with pytest.raises(Refused):
        copy_of(bytes.fromhex("e8fb0f0000"), SITE, AT, shadow_stack=True)
    assert copy_of(b"\xc3", SITE, AT).code == b"\xc3"
    assert copy_of(b"\xf3\xc3", SITE, AT).code == b"\xc3"
    assert copy_of(b"\xc2\x08\x00", SITE, AT).code == b"\xc2\x08\x00"


def test_what_cannot_run_elsewhere_is_refused() -> None:
    for code in ("0f05", "ffd0", "cc"):  # syscall, call rax, int3
        with pytest.raises(Refused):
            copy_of(bytes.fromhex(code), SITE, AT)
    assert all(len(copy_of(bytes.fromhex(c), SITE, AT).code) <= COPY for c in ("0f8410000000", "e8fb0f0000"))
