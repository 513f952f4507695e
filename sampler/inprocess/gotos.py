"""Where a function's indirect jumps can land, when every one of them is a computed goto through one
table of absolute addresses (issue 39): CPython's eval loop dispatches each opcode with ``goto
*opcode_targets[op]`` (235 such jumps in Debian's python3.11, about 190 in pyenv's 3.11-3.13), and a
Python probe's places lie inside it, so a jump may go there only when no entry of that table lands
inside the bytes it takes (relocate.displace's ``landings``).

Each indirect jump must read its target from a table of 8-byte entries indexed by a register (``jmp
[base + index*8]``, or ``mov reg, [base + index*8]`` then ``jmp reg``), whose base is a fixed address
(non-PIE) or a register a ``lea reg, [rip + X]`` of the function loads (or that a ``mov`` of registers
passed on: followed without regard to order, a register may hold any of them). Every entry of a table read
so must land near the function (NEAR: a guess that read other data fails there); any other indirect jump
(a switch's table of relative offsets) gives None: the function's landings are not known.
"""

from __future__ import annotations

from collections.abc import Callable

from capstone import x86_const as X  # type: ignore[import-untyped]

ENTRIES = 256
"""Entries of a table: CPython's opcode_targets."""
NEAR = 1 << 24
"""How far from the function an entry may land: a PGO build moves its cold blocks out of it (Debian's
python3.11: _PyEval_EvalFrameDefault.cold), and a guess that read other data fails here."""
LOOK_BACK = 8
"""Instructions before a ``jmp reg`` looked at for the load of ``reg``."""


def landings(instructions: list, start: int, end: int,  # type: ignore[type-arg]
             read: Callable[[int, int], bytes]) -> set[int] | None:
    """Every address the function's indirect jumps can land on (``read``: the process's memory), or None
    when one of them is not a computed goto through a table whose entries all lie near [start, end)."""
    leas: dict[int, set[int]] = {}
    moves: set[tuple[int, int]] = set()
    for instruction in instructions:
        if instruction.mnemonic in ("lea", "mov") and len(instruction.operands) == 2:
            dest, source = instruction.operands
            if dest.type != X.X86_OP_REG:
                continue
            if instruction.mnemonic == "lea" and source.type == X.X86_OP_MEM and source.mem.base == X.X86_REG_RIP \
                    and source.mem.index == 0:
                leas.setdefault(dest.reg, set()).add(instruction.address + instruction.size + source.mem.disp)
            elif instruction.mnemonic == "mov" and source.type == X.X86_OP_REG:
                moves.add((dest.reg, source.reg))
    for _ in range(4):  # (a table's address moved from register to register: each may hold it)
        for dest, source in moves:
            leas.setdefault(dest, set()).update(leas.get(source, ()))
    valid: dict[int, list[int] | None] = {}

    def entries(table: int) -> list[int] | None:
        if table not in valid:
            try:
                data = read(table, 8 * ENTRIES)
            except Exception:  # (a guessed base that cannot be read: not a table)
                data = b""
            found = [int.from_bytes(data[i:i + 8], "little") for i in range(0, len(data) - 7, 8)]
            valid[table] = found if len(found) == ENTRIES and all(start - NEAR <= e < end + NEAR for e in found) \
                else None
        return valid[table]

    targets: set[int] = set()
    for at, instruction in enumerate(instructions):
        if X.X86_GRP_JUMP not in instruction.groups or any(op.type == X.X86_OP_IMM for op in instruction.operands):
            continue
        operand = instruction.operands[0]
        if operand.type == X.X86_OP_REG:
            target = _whole(instruction.reg_name(operand.reg))
            load = next((i for i in reversed(instructions[max(0, at - LOOK_BACK):at]) if target in _written(i)),
                        None)  # (the last instruction before the jump that wrote the register: its load)
            if load is None or load.mnemonic != "mov" or len(load.operands) != 2 or \
                    load.operands[1].type != X.X86_OP_MEM:
                return None
            operand = load.operands[1]
        elif operand.type != X.X86_OP_MEM:
            return None
        tables = [found for table in _bases(operand, leas) if (found := entries(table)) is not None]
        if not tables:
            return None  # (one indirect jump whose landings are not known: none are)
        for found in tables:
            targets.update(found)
    return targets


def _bases(operand, leas: dict[int, set[int]]) -> set[int]:  # type: ignore[no-untyped-def]
    """The table addresses a ``[base + index*8 + disp]`` operand can mean."""
    memory = operand.mem
    if memory.scale != 8 or memory.index == 0 or memory.base == X.X86_REG_RIP:
        return set()
    if memory.base == 0:
        return {memory.disp & (1 << 64) - 1}
    return {address + memory.disp for address in leas.get(memory.base, ())}


def _written(instruction) -> set[str]:  # type: ignore[no-untyped-def]
    """The whole registers an instruction writes (eax's write is rax's)."""
    try:
        written = instruction.regs_access()[1]
    except Exception:  # (capstone could not say: as if it wrote every one)
        return {"*"} | set(_WHOLE.values())
    return {_whole(instruction.reg_name(reg)) for reg in written}


def _whole(name: str | None) -> str:
    return _WHOLE.get(name or "", name or "")


_WHOLE = {small: whole for whole, smalls in {
    "rax": ("eax", "ax", "al", "ah"), "rbx": ("ebx", "bx", "bl", "bh"), "rcx": ("ecx", "cx", "cl", "ch"),
    "rdx": ("edx", "dx", "dl", "dh"), "rsi": ("esi", "si", "sil"), "rdi": ("edi", "di", "dil"),
    "rbp": ("ebp", "bp", "bpl"), "rsp": ("esp", "sp", "spl"),
    **{f"r{n}": (f"r{n}d", f"r{n}w", f"r{n}b") for n in range(8, 16)}}.items() for small in smalls}
