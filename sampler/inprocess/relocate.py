"""Where an in-process probe's jump may go, and the instructions it displaces, moved (issue 36).

A probe replaces the first bytes at its site with a 5-byte `jmp rel32` to its trampoline; the
whole instructions those bytes held run in the trampoline instead, then it jumps back past them.
That is safe only when (decoding the whole function with capstone):

- the displaced instructions can run elsewhere: none is a branch, call or return (its target or
  the return address would change), none enters the kernel (a thread blocked in a system call
  there would come back into the jump's bytes), and a memory operand relative to rip is re-encoded
  for its new address (its displacement must still fit 32 bits);
- no branch of the function lands inside the displaced bytes (past their first), known by its
  immediate target; a function with an indirect jump (a switch's table) is refused unless the site
  is the function's entry (compilers never jump back into a prologue);
- an `endbr64` at the site stays where it is (CET's indirect-branch tracking): the jump goes after it.

What cannot be done is refused with the reason, and that site gets an int3 instead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from capstone import CsError  # type: ignore[import-untyped]
from capstone import x86_const as X

from sampler.debuginfo import x86
from sampler.debuginfo.x86 import Refused as Refused
from sampler.debuginfo.x86 import decode as decode
from sampler.inprocess.gotos import landings

JUMP_SIZE = 5
"""A jmp rel32."""
MAX_FUNCTION = 1 << 20
"""Bytes of a function decoded, at most."""

_DECODER = x86.DETAILED

BRANCHES = {X.X86_GRP_JUMP, X.X86_GRP_CALL, X.X86_GRP_RET, X.X86_GRP_IRET, X.X86_GRP_BRANCH_RELATIVE}
KERNEL = {X.X86_GRP_INT}
KERNEL_MNEMONICS = ("syscall", "sysenter", "int", "int3", "into", "ud2", "hlt")


@dataclass(frozen=True)
class Moved:
    """One displaced instruction."""

    address: int
    data: bytes
    disp_offset: int = 0
    """Where in it a rip-relative displacement is (0: none)."""
    disp_size: int = 0


@dataclass(frozen=True)
class Displaced:
    site: int
    """Where the jump goes (past an endbr64)."""
    instructions: tuple[Moved, ...]
    ret_rsp: tuple[str, int] | None = None
    """A return probe's (issue 37): where the stack pointer is when the ``ret`` runs, from the registers
    the probe sees before the displaced instructions run: (register, offset)."""

    @property
    def size(self) -> int:
        return sum(len(m.data) for m in self.instructions)

    @property
    def back(self) -> int:
        """Where the trampoline jumps back to: past the displaced instructions."""
        return self.site + self.size

    def code_at(self, address: int) -> bytes:
        """The displaced instructions re-encoded to run at ``address`` (rip-relative operands fixed);
        Refused when an operand's new displacement does not fit 32 bits."""
        out = bytearray()
        for moved in self.instructions:
            data = bytearray(moved.data)
            if moved.disp_size:
                at = moved.disp_offset
                old = int.from_bytes(data[at:at + moved.disp_size], "little", signed=True)
                target = moved.address + len(moved.data) + old
                new = target - (address + len(out) + len(moved.data))
                if moved.disp_size != 4 or not -(1 << 31) <= new < (1 << 31):
                    raise Refused(f"the operand of the instruction at {moved.address:#x} cannot reach its "
                                  "data from the trampoline")
                data[at:at + 4] = new.to_bytes(4, "little", signed=True)
            out += data
        return bytes(out)


def displace(code: bytes, start: int, site: int, read: Callable[[int, int], bytes] | None = None) -> Displaced:
    """The instructions a jump at ``site`` displaces, in the function whose ``code`` starts at run-time
    address ``start``; Refused with the reason when the site cannot take one. ``read`` (the process's
    memory): a function whose indirect jumps are all computed gotos through tables (gotos.py) may take
    one past its entry where no entry of those tables lands inside its bytes."""
    if not start <= site < start + len(code):
        raise Refused(f"{site:#x} is not in the function's code")
    instructions, by_address = _decoded(code[:MAX_FUNCTION], start)
    if site not in by_address:
        raise Refused(f"{site:#x} is not the start of an instruction of its function")
    first = by_address[site]
    if first.mnemonic == "endbr64":  # CET: the indirect branch's landing pad stays first
        site = first.address + first.size
        if site not in by_address:
            raise Refused("the function ends after its endbr64")
    moved: list[Moved] = []
    at = site
    while sum(len(m.data) for m in moved) < JUMP_SIZE:
        instruction = by_address.get(at)
        if instruction is None:
            raise Refused(f"the function ends {at - site} bytes after the site: no room for a jump")
        moved.append(movable(instruction))
        at += instruction.size
    end = at
    landing: set[int] | None = None
    if site != start and read is not None and any(_indirect_jump(i) for i in instructions):
        landing = _landings(code[:MAX_FUNCTION], start, read)
        inside = sorted(t for t in landing or () if site < t < end)
        if inside:
            raise Refused(f"a computed goto of the function lands at {inside[0]:#x}, inside the bytes the jump "
                          f"would take ({site:#x}-{end:#x})")
    for instruction in instructions:
        for target in x86.branch_targets(instruction):
            if site < target < end:
                raise Refused(f"the instruction at {instruction.address:#x} jumps to {target:#x}, inside the "
                              f"bytes the jump would take ({site:#x}-{end:#x})")
        if site != start and landing is None and _indirect_jump(instruction):
            raise Refused(f"the function jumps through a table at {instruction.address:#x}: a case could land "
                          "inside the bytes the jump would take")
    return Displaced(site, tuple(moved))


_LANDINGS: dict[tuple[int, bytes], set[int] | None] = {}


@functools.lru_cache(maxsize=4)
def _decoded(code: bytes, start: int) -> tuple[list, dict[int, Any]]:  # type: ignore[type-arg]
    """``decode``'s instructions, and by address (a Python probe's places are in one function: decoded once)."""
    instructions = decode(code, start)
    return instructions, {i.address: i for i in instructions}


def _landings(code: bytes, start: int, read: Callable[[int, int], bytes]) -> set[int] | None:
    key = (start, code)
    if key not in _LANDINGS:
        if len(_LANDINGS) >= 4:
            _LANDINGS.clear()
        _LANDINGS[key] = landings(_decoded(code, start)[0], start, start + len(code), read)
    return _LANDINGS[key]


def movable(instruction) -> Moved:  # type: ignore[no-untyped-def]
    """The instruction as it is displaced, or Refused with why it cannot be."""
    groups = set(instruction.groups)
    mnemonic = instruction.mnemonic
    if groups & BRANCHES or mnemonic.startswith(("j", "call", "ret", "loop")):
        raise Refused(f"the site holds a branch ({mnemonic} at {instruction.address:#x}): it cannot move")
    if groups & KERNEL or mnemonic in KERNEL_MNEMONICS:
        raise Refused(f"the site holds {mnemonic} at {instruction.address:#x}: a thread in the kernel there "
                      "would come back into the jump's bytes")
    data = bytes(instruction.bytes)
    rip_relative = any(op.type == X.X86_OP_MEM and op.mem.base == X.X86_REG_RIP for op in instruction.operands)
    if rip_relative:
        if instruction.disp_size != 4:
            raise Refused(f"the rip-relative operand at {instruction.address:#x} is not 32-bit")
        return Moved(instruction.address, data, instruction.disp_offset, 4)
    if any(op.type == X.X86_OP_REG and op.reg == X.X86_REG_RIP for op in instruction.operands):
        raise Refused(f"the instruction at {instruction.address:#x} reads rip")
    return Moved(instruction.address, data)


def _indirect_jump(instruction) -> bool:  # type: ignore[no-untyped-def]
    return X.X86_GRP_JUMP in instruction.groups and \
        not any(op.type == X.X86_OP_IMM for op in instruction.operands)


PADDING = ("nop", "int3")
"""What compilers put between functions (never run: nothing jumps there)."""


def displace_return(code: bytes, ret: int) -> Displaced:
    """A jump over a function's last ``ret`` and the padding after it (a return probe: issue 37). ``code``:
    the bytes from ``ret`` to where the next function starts (the caller knows no function, symbol or
    unwind entry covers them). The trampoline runs the probe with the registers the return leaves (the
    result, the stack pointer at the return address), then the ``ret`` itself: the padding it copies is
    never run, nor the jump back. Refused with the reason when the bytes are not a ret and padding."""
    found = decode_some(code, ret)
    if not found or X.X86_GRP_RET not in set(found[0].groups) or found[0].mnemonic.startswith("iret"):
        raise Refused(f"{ret:#x} holds no return")
    moved = [Moved(found[0].address, bytes(found[0].bytes))]
    for instruction in found[1:]:
        if sum(len(m.data) for m in moved) >= JUMP_SIZE:
            break
        if instruction.mnemonic not in PADDING:
            raise Refused(f"the return at {ret:#x} is followed by code ({instruction.mnemonic} at "
                          f"{instruction.address:#x}), not padding: no room for a jump")
        moved.append(Moved(instruction.address, bytes(instruction.bytes)))
    if sum(len(m.data) for m in moved) < JUMP_SIZE:
        raise Refused(f"the return at {ret:#x} has {sum(len(m.data) for m in moved) - 1} byte(s) of padding "
                      "after it: no room for a jump")
    return Displaced(ret, tuple(moved), ret_rsp=("rsp", 0))


def displace_to_return(code: bytes, start: int, ret: int) -> Displaced:
    """A jump over the instructions before the ``ret`` at ``ret`` (5 bytes or more of them, so that the
    ``ret`` itself stays where it is), in the function whose ``code`` starts at ``start``: the probe runs
    first, then they and the ``ret`` run in the trampoline. The probe sees the registers before them:
    they must leave the result alone (rax, rdx, xmm0), and where they move the stack pointer must be
    known (pops, an add to rsp, leave), so the return's frame is known. Refused (the return keeps its
    int3) when one cannot move, a branch lands among them or on the ``ret``, they change the result or
    move rsp otherwise, or the function jumps through a table."""
    instructions = decode(code[:MAX_FUNCTION], start)
    at = {i.address: n for n, i in enumerate(instructions)}
    last = at.get(ret)
    if last is None or X.X86_GRP_RET not in set(instructions[last].groups):
        raise Refused(f"{ret:#x} holds no return")
    first, size = last, 0
    while size < JUMP_SIZE:
        first -= 1
        if first < 0:
            raise Refused(f"the function has {size} bytes before its return at {ret:#x}: no room for a jump")
        size += instructions[first].size
    site = instructions[first].address
    moved = [movable(i) for i in instructions[first:last]]
    moved.append(Moved(ret, bytes(instructions[last].bytes)))
    for instruction in instructions:
        for target in x86.branch_targets(instruction):
            if site < target <= ret:
                raise Refused(f"the instruction at {instruction.address:#x} jumps to {target:#x}, among the "
                              f"instructions that end with the return ({site:#x}-{ret:#x})")
        if _indirect_jump(instruction):
            raise Refused(f"the function jumps through a table at {instruction.address:#x}: a case could land "
                          "inside the bytes the jump would take")
    return Displaced(site, tuple(moved), ret_rsp=_stack_at_return(instructions[first:last], ret))


RESULT = {"rax", "eax", "ax", "al", "ah", "rdx", "edx", "dx", "dl", "dh", "xmm0", "ymm0", "zmm0", "st(0)"}
STACK = {"rsp", "esp", "sp", "spl"}
FRAME = {"rbp", "ebp", "bp", "bpl"}


def _stack_at_return(instructions: list, ret: int) -> tuple[str, int]:  # type: ignore[type-arg]
    """(register, offset): the stack pointer when the ``ret`` runs, from the registers before
    ``instructions``; Refused when they change the result or move rsp in a way not followed."""
    base, offset, frame_moved = "rsp", 0, False
    for instruction in instructions:
        mnemonic = instruction.mnemonic
        ops = instruction.operands
        _, written = instruction.regs_access()
        names = {instruction.reg_name(r) for r in written}
        if names & RESULT:
            raise Refused(f"the instruction at {instruction.address:#x} ({mnemonic}) before the return at {ret:#x} "
                          "changes the result: a probe before it would not see it")
        if mnemonic == "pop" and ops[0].type == X.X86_OP_REG and instruction.reg_name(ops[0].reg) not in STACK:
            offset += 8
            frame_moved = frame_moved or instruction.reg_name(ops[0].reg) in FRAME
            continue
        if mnemonic == "push":
            offset -= 8
            continue
        if mnemonic == "leave" and not frame_moved:
            base, offset = "rbp", 8
            continue
        stack_written = names & STACK
        if not stack_written:
            frame_moved = frame_moved or bool(names & FRAME)
            continue
        destination = instruction.reg_name(ops[0].reg) if ops and ops[0].type == X.X86_OP_REG else ""
        if mnemonic in ("add", "sub") and destination == "rsp" and len(ops) == 2 and ops[1].type == X.X86_OP_IMM:
            offset += ops[1].imm if mnemonic == "add" else -ops[1].imm
            continue
        if mnemonic == "lea" and destination == "rsp" and ops[1].type == X.X86_OP_MEM and not ops[1].mem.index:
            source = instruction.reg_name(ops[1].mem.base) if ops[1].mem.base else ""
            if source == "rsp":
                offset += ops[1].mem.disp
                continue
            if source == "rbp" and not frame_moved:
                base, offset = "rbp", ops[1].mem.disp
                continue
        if mnemonic == "mov" and destination == "rsp" and len(ops) == 2 and ops[1].type == X.X86_OP_REG \
                and instruction.reg_name(ops[1].reg) == "rbp" and not frame_moved:
            base, offset = "rbp", 0
            continue
        raise Refused(f"the instruction at {instruction.address:#x} ({mnemonic} {instruction.op_str}) before the "
                      f"return at {ret:#x} moves the stack pointer in a way not followed")
    return base, offset


def decode_some(code: bytes, start: int) -> list:  # type: ignore[type-arg]
    """The instructions ``code`` decodes to, up to the first byte that does not decode."""
    try:
        return list(_DECODER.disasm(code, start))
    except CsError:
        return []
