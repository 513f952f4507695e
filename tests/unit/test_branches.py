"""Where a module's code branches (sampler/debuginfo/branches.py): a jump from another function into the bytes
a probe's jump would take is found; bytes that only look like a branch (inside another instruction) are not."""

from __future__ import annotations

from sampler.debuginfo.branches import Branches

MEMMOVE = 0x2000
MEMMOVE_CODE = bytes.fromhex("4889f8" "4883fa20" "c3")  # mov rax, rdi; cmp rdx, 32; ret


def jump_to(source: int, target: int) -> bytes:
    return b"\xe9" + (target - (source + 5)).to_bytes(4, "little", signed=True)


def module(first: bytes) -> Branches:
    """``first`` at 0x1000 (a function of its own), memmove's first bytes at 0x2000."""
    code = first + b"\xcc" * (MEMMOVE - 0x1000 - len(first)) + MEMMOVE_CODE

    def span(address: int) -> tuple[int, int] | None:
        if 0x1000 <= address < 0x1000 + len(first):
            return 0x1000, len(first)
        return (MEMMOVE, len(MEMMOVE_CODE)) if MEMMOVE <= address < MEMMOVE + len(MEMMOVE_CODE) else None

    return Branches([(0x1000, code)], span)


def test_a_jump_from_another_function_into_the_bytes_is_found() -> None:
    # GIVEN mempcpy's shape: add rax, rdx; then a jump to memmove's fourth byte (its mov rax, rdi done)
    branches = module(bytes.fromhex("4801d0") + jump_to(0x1003, MEMMOVE + 3))
    # THEN a jump over memmove's first 5 bytes would be landed in; one past them would not
    assert branches.inside(MEMMOVE, MEMMOVE + 5) == MEMMOVE + 3
    assert branches.inside(MEMMOVE + 3, MEMMOVE + 8) is None


def test_bytes_that_only_look_like_a_branch_are_not_one() -> None:
    # GIVEN movabs rax, imm64 whose immediate holds E9 and a rel32 to memmove + 3 (a jump's bytes, were they one)
    fake = bytes.fromhex("48b8") + jump_to(0x1002, MEMMOVE + 3) + b"\x00\x00\x00" + b"\xc3"
    branches = module(fake)
    # THEN its target is a candidate (the bytes are there), but decoding the function finds no such branch
    assert (branches.targets == MEMMOVE + 3).any()
    assert branches.inside(MEMMOVE, MEMMOVE + 5) is None


def test_a_candidate_in_code_no_function_holds_counts() -> None:
    # GIVEN the same jump in bytes no symbol places (the span says None)
    code = bytes.fromhex("4801d0") + jump_to(0x1003, MEMMOVE + 3)
    branches = Branches([(0x1000, code + b"\xcc" * (MEMMOVE - 0x1000 - len(code)) + MEMMOVE_CODE), ], lambda _: None)
    # THEN it counts as it is: the jump goes elsewhere
    assert branches.inside(MEMMOVE, MEMMOVE + 5) == MEMMOVE + 3


def test_a_bnd_prefixed_jump_counts_too() -> None:
    # GIVEN the jump into memmove's bytes written bnd jmp (F2 E9: CET/MPX builds)
    branch = b"\xf2\xe9" + (MEMMOVE + 3 - (0x1003 + 6)).to_bytes(4, "little", signed=True)
    branches = module(bytes.fromhex("4801d0") + branch)
    # THEN it is found as the plain jump is
    assert branches.inside(MEMMOVE, MEMMOVE + 5) == MEMMOVE + 3


def test_a_candidate_where_no_symbol_of_known_size_lies_is_decoded_from_its_section() -> None:
    # GIVEN crt's register_tm_clones (no symbol size, no unwind entry) right before memmove: jmp *%rax (FF E0, E0 a
    # loopne's opcode, the byte after it read as a rel8 into memmove's bytes)
    fake = bytes.fromhex("ffe0") + bytes([MEMMOVE + 3 - (MEMMOVE - 15 + 2)])
    code = b"\xcc" * 0xF0 + fake + b"\xcc" * (0x10 - len(fake)) + MEMMOVE_CODE
    branches = Branches([(MEMMOVE - 0x100, code)], lambda _: None)
    assert (branches.targets == MEMMOVE + 3).any()  # (the bytes are there)
    # THEN the loopne that is no instruction does not count (decoded from the section's start, it is jmp *%rax)
    assert branches.inside(MEMMOVE, MEMMOVE + 5) is None
