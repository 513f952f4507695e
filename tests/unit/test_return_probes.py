"""Where an in-process return probe's jump goes (relocate.displace_return, displace_to_return): over a
function's last ret and the padding after it, or over the instructions before a ret (5 bytes or more: the
ret stays), which run in the trampoline after the probe, with the ret; checked on made-up code and on
every return of Debian's libc, redis-server and python3: each jump's bytes hold whole instructions ending
with that ret, none of them changes the result, the stack pointer at the ret is known, and no branch of
the function lands among them."""

from __future__ import annotations

import pytest

from sampler.debuginfo.exits import exits
from sampler.debuginfo.x86 import branch_targets
from sampler.inprocess.relocate import JUMP_SIZE, Refused, decode, displace_return, displace_to_return
from tests.unit.real_programs import programs, text_functions


def test_a_last_ret_with_padding_takes_the_jump_over_both() -> None:
    displaced = displace_return(bytes.fromhex("c3" "66662e0f1f840000000000"), 0x16F3)
    assert displaced.site == 0x16F3 and displaced.ret_rsp == ("rsp", 0) and displaced.size >= JUMP_SIZE
    with pytest.raises(Refused, match="padding"):
        displace_return(bytes.fromhex("c3" "90"), 0x10)  # one byte: burst's touch()
    with pytest.raises(Refused, match="followed by code"):
        displace_return(bytes.fromhex("c3" "4889e5"), 0x10)


def test_the_instructions_before_a_ret_move_with_it() -> None:
    # burst's touch(): mov rax,[rdi]; add rax,1; add [rdi+8],rax; mov [rdi],rax; ret
    code = bytes.fromhex("488b07" "4883c001" "48014708" "488907" "c3")
    displaced = displace_to_return(code, 0x1420, 0x142E)
    assert displaced.site == 0x1427 and displaced.ret_rsp == ("rsp", 0)
    assert [m.data.hex() for m in displaced.instructions] == ["48014708", "488907", "c3"]


def test_the_stack_pointer_at_the_ret_is_followed() -> None:
    # add rsp,0x18; pop rbx; pop rbp; pop r12; ret
    code = bytes.fromhex("4883c418" "5b" "5d" "415c" "c3")
    assert displace_to_return(code, 0x1000, 0x1008).ret_rsp == ("rsp", 0x18 + 24)
    # leave; ... : rsp from rbp (nop; nop; nop; nop; leave; ret)
    assert displace_to_return(bytes.fromhex("90909090" "c9" "c3"), 0x1000, 0x1005).ret_rsp == ("rbp", 8)


def test_a_result_set_before_the_ret_is_refused() -> None:
    # mov eax,1; pop rbx; ret: a probe before the mov would not see the result
    with pytest.raises(Refused, match="changes the result"):
        displace_to_return(bytes.fromhex("b801000000" "5b" "c3"), 0x1000, 0x1006)


def test_an_epilogue_other_paths_jump_to_is_refused() -> None:
    # test rdi,rdi; je 0x100c (the ret); add [rdi],rsi; add [rdi+8],rsi; ret -- a branch lands on the ret
    code = bytes.fromhex("4885ff" "7407" "480137" "48017708" "c3")
    with pytest.raises(Refused, match="jumps to"):
        displace_to_return(code, 0x1000, 0x100C)


@pytest.mark.parametrize("name", programs("return_probes"))
def test_every_return_of_a_real_program_is_placed_or_refused_safely(name: str) -> None:
    _, data, base, functions = text_functions(name)
    placed = refused = 0
    for start, size in functions:
        code = data[start - base:start - base + size]
        try:
            found = exits(code, start)
            instructions = decode(code, start)
        except Refused:
            continue
        targets = {t for i in instructions for t in branch_targets(i)}
        boundaries = {i.address for i in instructions}
        for ret in found.returns:
            try:
                displaced = displace_to_return(code, start, ret)
            except Refused:
                refused += 1
                continue
            placed += 1
            end = displaced.site + displaced.size
            assert displaced.site in boundaries and end == ret + len(displaced.instructions[-1].data)
            assert displaced.size - len(displaced.instructions[-1].data) >= JUMP_SIZE  # (the ret stays)
            assert displaced.instructions[-1].address == ret and displaced.ret_rsp is not None
            assert not any(displaced.site < t < end for t in targets), (hex(start), hex(ret))
    assert placed > refused / 4 and placed > 100, (placed, refused)
