"""Running the instruction under an every-hit breakpoint without a single-step.

In every-hit mode the int3 stays in place; the thread that hit it must still run the
instruction the int3 covers. A single-step does it (the byte put back, every other thread
held meanwhile, a second stop), at about twice the cost of the hit itself. Most functions
start with an instruction whose whole effect can be computed from the registers: this
module computes it (as the kernel's uprobes do for the same instructions), so the thread
goes on from the next instruction with one stop and the int3 never leaves.

What is emulated is only what is exact and safe, decoded once per breakpoint (capstone):

- ``endbr64`` and nops: nothing but the next instruction;
- ``push r64``: 8 bytes onto the thread's own stack, only when they fall in the page its
  stack pointer is in (a page the call that got here just wrote): a stack overflow still
  faults as the CPU would make it;
- ``mov`` and ``lea`` into a 64- or 32-bit register (32-bit results zero-extend), from a
  register, an immediate or an address computed from registers (``rip`` included);
- ``add``, ``sub``, ``cmp``, ``and``, ``or``, ``xor``, ``test`` between 64- or 32-bit
  registers and immediates, with the six arithmetic flags as the CPU sets them (AF, which
  the logic instructions leave undefined, cleared as this CPU does);
- ``cmp``/``test`` of one byte of memory (glibc's ``cmpb $0, __libc_single_threaded`` at
  the start of its system call wrappers) and Go's stack check ``cmp rsp, [r14+16]``: read
  with process_vm_readv, which faults where the CPU would fault (it gets what the CPU
  can read, unlike /proc/PID/mem); a byte is read whole, and any value of Go's stack guard
  leads the function to a correct path.

Everything else (memory written or read wider, a lock prefix, a segment, flags read,
control flow, system calls, vector registers) is single-stepped as before. Test:
``SAMPLER_CHECK_EMULATION=1`` runs every emulated instruction on the CPU too (a single-step)
and compares registers and memory (tests/integration/test_emulate.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from capstone import CS_ARCH_X86, CS_MODE_64, Cs, CsError  # type: ignore[import-untyped]
from capstone import x86_const as X

from sampler.backends.ptrace.memory import read_as_cpu, write_as_cpu

Emulation = Callable[[Any, int], bool]
"""``emulation(registers, pid)``: set the registers (and the stack) to what the instruction
would leave; False when it cannot be done this time (nothing changed): single-step instead."""

_DECODER = Cs(CS_ARCH_X86, CS_MODE_64)
_DECODER.detail = True
PAGE = 4096
CF, PF, AF, ZF, SF, OF = 1 << 0, 1 << 2, 1 << 4, 1 << 6, 1 << 7, 1 << 11
ARITHMETIC_FLAGS = CF | PF | AF | ZF | SF | OF
_PARITY = [PF if bin(byte).count("1") % 2 == 0 else 0 for byte in range(256)]

_REGISTERS = {name: (name, 8) for name in (
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")}
_REGISTERS.update({f"e{name[1:]}": (name, 4) for name in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp")})
_REGISTERS.update({f"r{n}d": (f"r{n}", 4) for n in range(8, 16)})
MASK = {8: (1 << 64) - 1, 4: (1 << 32) - 1, 1: 0xFF}
SIGN = {8: 1 << 63, 4: 1 << 31, 1: 1 << 7}
SKIP = {X.X86_INS_ENDBR64, X.X86_INS_NOP}
LOGIC = {X.X86_INS_AND, X.X86_INS_OR, X.X86_INS_XOR, X.X86_INS_TEST}
ARITHMETIC = {X.X86_INS_ADD, X.X86_INS_SUB, X.X86_INS_CMP} | LOGIC
FLAGS_ONLY = {X.X86_INS_CMP, X.X86_INS_TEST}


def emulation_for(code: bytes, address: int, go: bool) -> Emulation | None:
    """How to run the instruction at the start of CODE (at ADDRESS) without a step, or None."""
    try:
        decoded = next(_DECODER.disasm(code, address, 1), None)
    except CsError:
        return None
    if decoded is None or any(decoded.prefix[:2]) or decoded.prefix[3]:  # lock/rep, segment, address size
        return None
    try:
        return _compile(decoded, address + decoded.size, go)
    except (CsError, KeyError, ValueError):
        return None  # an operand this module does not know


def _compile(insn: Any, after: int, go: bool) -> Emulation | None:
    ops = insn.operands
    kind = insn.id
    if kind in SKIP:
        return _skip(after)
    if kind == X.X86_INS_PUSH and len(ops) == 1 and ops[0].type == X.X86_OP_REG:
        field, width = _register(insn, ops[0].reg)
        return _push(field, after) if width == 8 else None
    if len(ops) != 2 or (ops[0].type != X.X86_OP_REG and kind not in FLAGS_ONLY):
        return None
    if kind == X.X86_INS_LEA and ops[1].type == X.X86_OP_MEM:
        field, width = _register(insn, ops[0].reg)
        return _assign(field, width, _address_of(insn, ops[1].mem, after), after)
    if kind == X.X86_INS_MOV:
        field, width = _register(insn, ops[0].reg)
        return _assign(field, width, _source(insn, ops[1], width, after), after)
    if kind in ARITHMETIC:
        return _arithmetic(insn, kind, after, go)
    return None


def _register(insn: Any, reg: int) -> tuple[str, int]:
    """(user_regs_struct field, width in bytes) of a 64- or 32-bit general register."""
    return _REGISTERS[insn.reg_name(reg)]


def _source(insn: Any, op: Any, width: int, after: int) -> Callable[[Any], int]:
    """A register or an immediate (no memory), as an unsigned number of ``width`` bytes."""
    mask = MASK[width]
    if op.type == X.X86_OP_IMM:
        value = op.imm & mask
        return lambda registers: value
    if op.type == X.X86_OP_REG:
        field, source_width = _register(insn, op.reg)
        if source_width != width:
            raise ValueError("operands of different widths")
        return lambda registers: getattr(registers, field) & mask
    raise ValueError("a memory operand")


def _address_of(insn: Any, mem: Any, after: int) -> Callable[[Any], int]:
    """The address a memory operand names (lea's result), from the registers."""
    if mem.segment:
        raise ValueError("a segment")
    base = insn.reg_name(mem.base) if mem.base else None
    index = _register(insn, mem.index)[0] if mem.index else None
    scale, disp = mem.scale, mem.disp
    if base == "rip":
        if index:
            raise ValueError("rip with an index")
        value = (after + disp) & MASK[8]
        return lambda registers: value
    base_field = _register(insn, mem.base)[0] if base else None
    if (base_field and _register(insn, mem.base)[1] != 8) or (index and _register(insn, mem.index)[1] != 8):
        raise ValueError("a 32-bit address")

    def address(registers: Any) -> int:
        total: int = disp
        if base_field:
            total += getattr(registers, base_field)
        if index:
            total += getattr(registers, index) * scale
        return total & MASK[8]
    return address


def _skip(after: int) -> Emulation:
    def run(registers: Any, pid: int) -> bool:
        registers.rip = after
        return True
    return run


def _push(field: str, after: int) -> Emulation:
    def run(registers: Any, pid: int) -> bool:
        value, top = getattr(registers, field), registers.rsp
        slot = (top - 8) & MASK[8]
        if slot // PAGE != top // PAGE or not write_as_cpu(pid, slot, value.to_bytes(8, "little")):
            return False
        registers.rsp, registers.rip = slot, after
        return True
    return run


def _assign(field: str, width: int, source: Callable[[Any], int], after: int) -> Emulation:
    mask = MASK[width]

    def run(registers: Any, pid: int) -> bool:
        setattr(registers, field, source(registers) & mask)  # a 32-bit result zero-extends
        registers.rip = after
        return True
    return run


def _arithmetic(insn: Any, kind: int, after: int, go: bool) -> Emulation | None:
    """add, sub, cmp and the logic instructions between 64- or 32-bit registers and
    immediates; cmp and test also of one byte of memory, and Go's stack check."""
    left, right = insn.operands
    width = left.size
    field: str | None = None
    if left.type == X.X86_OP_REG:
        field, register_width = _register(insn, left.reg)
        if register_width != width:
            return None
        read_left = _from_register(field, width)
    elif left.type == X.X86_OP_MEM and kind in FLAGS_ONLY and width == 1:
        read_left = _from_memory(insn, left.mem, 1, after)
    else:
        return None
    if right.type == X.X86_OP_MEM:
        if kind not in FLAGS_ONLY or not (width == 1 or (go and width == 8 and _stack_guard(insn, right.mem))):
            return None
        read_right = _from_memory(insn, right.mem, width, after)
    elif right.type == X.X86_OP_REG:
        right_field, right_width = _register(insn, right.reg)
        if right_width != width:
            return None
        read_right = _from_register(right_field, width)
    else:
        immediate = right.imm & MASK[width]
        read_right = lambda registers, pid: immediate  # noqa: E731
    return _compute(kind, width, read_left, read_right, None if kind in FLAGS_ONLY else field, after)


def _stack_guard(insn: Any, mem: Any) -> bool:
    """Go's stack check reads g.stackguard0 through r14 (ABIInternal keeps g there)."""
    return bool(mem.base) and insn.reg_name(mem.base) == "r14" and not mem.index and not mem.segment


def _from_register(field: str, width: int) -> Callable[[Any, int], int | None]:
    mask = MASK[width]
    return lambda registers, pid: getattr(registers, field) & mask


def _from_memory(insn: Any, mem: Any, width: int, after: int) -> Callable[[Any, int], int | None]:
    address_of = _address_of(insn, mem, after)

    def read(registers: Any, pid: int) -> int | None:
        data = read_as_cpu(pid, address_of(registers), width)
        return None if data is None else int.from_bytes(data, "little")
    return read


def _compute(kind: int, width: int, read_left: Callable[[Any, int], int | None],
             read_right: Callable[[Any, int], int | None], field: str | None, after: int) -> Emulation:
    mask, sign = MASK[width], SIGN[width]

    def run(registers: Any, pid: int) -> bool:
        a, b = read_left(registers, pid), read_right(registers, pid)
        if a is None or b is None:
            return False  # memory the CPU could not read: it faults there, in a single-step
        if kind == X.X86_INS_ADD:
            result = (a + b) & mask
            flags = (CF if a + b > mask else 0) | (OF if ~(a ^ b) & (a ^ result) & sign else 0) | \
                ((a ^ b ^ result) & AF)
        elif kind in (X.X86_INS_SUB, X.X86_INS_CMP):
            result = (a - b) & mask
            flags = (CF if a < b else 0) | (OF if (a ^ b) & (a ^ result) & sign else 0) | ((a ^ b ^ result) & AF)
        else:
            result = a & b if kind in (X.X86_INS_AND, X.X86_INS_TEST) else a | b if kind == X.X86_INS_OR else a ^ b
            flags = 0
        flags |= _PARITY[result & 0xFF] | (ZF if result == 0 else 0) | (SF if result & sign else 0)
        if field is not None:
            setattr(registers, field, result)  # a 32-bit result zero-extends
        registers.eflags = registers.eflags & ~ARITHMETIC_FLAGS | flags
        registers.rip = after
        return True
    return run


def copy(registers: Any) -> Any:
    """A copy of a user_regs_struct (for comparing an emulation with the CPU)."""
    return type(registers).from_buffer_copy(registers)


FIELDS = ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14",
          "r15", "rip", "eflags")


def differences(emulated: Any, stepped: Any) -> list[str]:
    """Registers an emulation set otherwise than the CPU did (eflags: the arithmetic flags and
    the trap flag's neighbours only: a single-step leaves its own marks)."""
    found = []
    for field in FIELDS:
        mine, cpu = getattr(emulated, field), getattr(stepped, field)
        if field == "eflags":
            mine, cpu = mine & ARITHMETIC_FLAGS, cpu & ARITHMETIC_FLAGS
        if mine != cpu:
            found.append(f"{field} {mine:#x} (the CPU: {cpu:#x})")
    return found

