"""The x86-64 decoders (capstone), built once, when this module is imported.

The worker imports it before it lets a Ctrl-C in (cli.py): a KeyboardInterrupt raised while
capstone's ``Cs()`` was building a decoder left a half-built object, whose ``__del__`` then
printed "Exception ignored ... AttributeError: 'Cs' object has no attribute 'csh'" under the
run's one line (test_ctrl_c, one Ctrl-C 0.3 s into a trace)."""

from __future__ import annotations

from typing import Any

from capstone import CS_ARCH_X86, CS_MODE_64, Cs, CsError  # type: ignore[import-untyped]
from capstone.x86_const import X86_GRP_BRANCH_RELATIVE, X86_GRP_CALL, X86_GRP_JUMP, X86_OP_IMM  # type: ignore[import-untyped]

PLAIN = Cs(CS_ARCH_X86, CS_MODE_64)
"""Mnemonics, operands as text and sizes: the cheaper decode."""

DETAILED = Cs(CS_ARCH_X86, CS_MODE_64)
"""With capstone's detail: the registers an instruction reads and writes, its operands."""
DETAILED.detail = True

SWEEPING = Cs(CS_ARCH_X86, CS_MODE_64)
"""DETAILED that steps over bytes it cannot decode and goes on (code with data or padding in it)."""
SWEEPING.detail = True
SWEEPING.skipdata = True


class Refused(Exception):
    """The code cannot be decoded, or a site cannot take a jump (the reason says why): it gets an int3
    instead."""


def decode(code: bytes, start: int) -> list:  # type: ignore[type-arg]
    """Every instruction of a function, in order; Refused when a byte cannot be decoded."""
    try:
        found = list(DETAILED.disasm(code, start))
    except CsError as e:
        raise Refused(f"the function cannot be decoded ({e})") from None
    decoded = sum(i.size for i in found)
    if decoded < len(code) and not code[decoded:].strip(b"\xcc\x90\x00"):
        return found  # (padding after the last instruction)
    if decoded < len(code):
        raise Refused(f"the function cannot be decoded past {start + decoded:#x}")
    return found


def branch_targets(instruction: Any) -> list[int]:
    """Where a branch with an immediate target goes (a jump, a conditional one, a call, a loop; prefixed too)."""
    if not instruction.id:  # (bytes SWEEPING stepped over)
        return []
    if not set(instruction.groups) & {X86_GRP_JUMP, X86_GRP_CALL, X86_GRP_BRANCH_RELATIVE}:
        return []
    return [op.imm for op in instruction.operands if op.type == X86_OP_IMM]


RSP, RBP, RIP = 7, 6, 16
"""DWARF's numbers of the x86-64 stack pointer, frame pointer and return address column."""
NAMES = ("rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15", "rip")
"""The registers by DWARF number (0-16), as struct user_regs_struct names them."""
MASK = (1 << 64) - 1


def registers_of(regs: Any) -> dict[int, int]:
    """A stopped thread's registers (struct user_regs_struct) by DWARF number."""
    return {number: int(getattr(regs, name)) & MASK for number, name in enumerate(NAMES)}
