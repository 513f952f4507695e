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
- ``mov`` and ``lea`` into a 64-, 32- or 8-bit register (32-bit results zero-extend, 8-bit
  ones keep the rest), from a register, an immediate or an address computed from registers
  (``rip`` included); ``mov`` between a register and the thread's own frame (``[rsp+N]``,
  within one page); ``ret`` (to a canonical address, without a CET shadow stack);
- ``add``, ``sub``, ``cmp``, ``and``, ``or``, ``xor``, ``test`` between 64- or 32-bit
  registers and immediates, with the six arithmetic flags as the CPU sets them (AF, which
  the logic instructions leave undefined, cleared as this CPU does);
- ``cmp``/``test`` of one byte of memory (glibc's ``cmpb $0, __libc_single_threaded`` at
  the start of its system call wrappers) and Go's stack check ``cmp rsp, [r14+16]``; a
  byte is read whole, and any value of Go's stack guard leads the function to a correct path.

Memory is reached through the /proc/PID/mem descriptor opened at attach (Access): it holds the
address space sampler armed, whatever the PID runs later. A process sharing that memory
(clone(CLONE_VM), traced as a thread) may hit the breakpoint after the PID exec'd a
set-user-ID program: through the PID (process_vm_readv/writev, as before issue 32) its pushes
were written into that program and its loads read from it. A read or write goes only where
the pages' protections let the CPU (memory.Protections, from /proc/PID/maps opened with it);
elsewhere the instruction is single-stepped and faults, if it does, on the CPU.

Everything else (memory written or read wider, a lock or operand-size prefix, a segment,
flags read, other control flow, system calls, vector registers) is single-stepped as before.
Not covered: memory protection keys (the CPU checks them, /proc/PID/maps does not say them)
and 32-bit processes (decoded as x86-64). Test:
``SAMPLER_CHECK_EMULATION=1`` runs every emulated instruction on the CPU too (a single-step)
and compares registers and memory (tests/integration/test_emulate.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from capstone import CsError  # type: ignore[import-untyped]
from capstone import x86_const as X

from sampler.debuginfo import x86
from sampler.process.memory import LAST_ADDRESS, Memory, Protections, check_left


class Access:
    """The memory sampler armed, as the hitting thread's own instructions reach it: through the
    descriptor opened at attach (never by PID), where the pages' protections allow."""

    def __init__(self, memory: Memory, protections: Protections) -> None:
        self.memory = memory
        self.protections = protections

    def read(self, address: int, size: int) -> bytes | None:
        memory = self.memory
        if not 0 < address < address + size < LAST_ADDRESS or not self.protections.allows(address, size, b"r") \
                or (memory.hung and memory.refuses(address, size)):
            return None
        memory.inflight = (address, size)
        try:
            data = os.pread(memory.fd, size, address)
        except OSError:
            data = b""
        check_left()
        return data if len(data) == size else None

    def write(self, address: int, data: bytes) -> bool:
        memory = self.memory
        if not 0 < address < address + len(data) < LAST_ADDRESS or not self.protections.allows(
                address, len(data), b"w") or (memory.hung and memory.refuses(address, len(data))):
            return False
        memory.inflight = (address, len(data))
        try:
            written = os.pwrite(memory.fd, data, address)
        except OSError:
            written = -1
        check_left()
        return written == len(data)


class Recorder(Access):
    """Reads the target, keeps the writes (for comparing an emulation with the CPU's step)."""

    def __init__(self, memory: Memory, protections: Protections) -> None:
        super().__init__(memory, protections)
        self.writes: list[tuple[int, bytes]] = []

    def write(self, address: int, data: bytes) -> bool:
        """Refused where the real write would be; kept, not written."""
        if not 0 < address < address + len(data) < LAST_ADDRESS \
                or not self.protections.allows(address, len(data), b"w"):
            return False
        self.writes.append((address, data))
        return True


Emulation = Callable[[Any, Access], bool]
"""``emulation(registers, memory)``: set the registers (and the stack) to what the instruction
would leave; False when it cannot be done this time (nothing changed): single-step instead."""

_DECODER = x86.DETAILED
PAGE = 4096
CF, PF, AF, ZF, SF, OF = 1 << 0, 1 << 2, 1 << 4, 1 << 6, 1 << 7, 1 << 11
ARITHMETIC_FLAGS = CF | PF | AF | ZF | SF | OF
_PARITY = [PF if bin(byte).count("1") % 2 == 0 else 0 for byte in range(256)]

_REGISTERS = {name: (name, 8) for name in (
    "rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp", "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")}
_REGISTERS.update({f"e{name[1:]}": (name, 4) for name in ("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "rsp")})
_REGISTERS.update({f"r{n}d": (f"r{n}", 4) for n in range(8, 16)})
_REGISTERS.update({f"{name[1]}l": (name, 1) for name in ("rax", "rbx", "rcx", "rdx")})
_REGISTERS.update({f"{name[1:]}l": (name, 1) for name in ("rsi", "rdi", "rbp", "rsp")})
_REGISTERS.update({f"r{n}b": (f"r{n}", 1) for n in range(8, 16)})
MASK = {8: (1 << 64) - 1, 4: (1 << 32) - 1, 1: 0xFF}
SIGN = {8: 1 << 63, 4: 1 << 31, 1: 1 << 7}
SKIP = {X.X86_INS_ENDBR64, X.X86_INS_NOP}
LOGIC = {X.X86_INS_AND, X.X86_INS_OR, X.X86_INS_XOR, X.X86_INS_TEST}
ARITHMETIC = {X.X86_INS_ADD, X.X86_INS_SUB, X.X86_INS_CMP} | LOGIC
FLAGS_ONLY = {X.X86_INS_CMP, X.X86_INS_TEST}
MOVES = {X.X86_INS_MOV, X.X86_INS_MOVABS}


def emulation_for(code: bytes, address: int, go: bool, shadow_stack: bool = False) -> Emulation | None:
    """How to run the instruction at the start of CODE (at ADDRESS) without a step, or None.
    ``shadow_stack``: the process keeps a CET shadow stack (a ret must pop it too: not emulated)."""
    try:
        decoded = next(_DECODER.disasm(code, address, 1), None)
    except CsError:
        return None
    if decoded is None or any(decoded.prefix[:2]) or decoded.prefix[3]:  # lock/rep, segment, address size
        return None
    if decoded.prefix[2] and decoded.id not in SKIP:  # operand size (66): a 16-bit form (ret pops 2 bytes)
        return None
    try:
        return _compile(decoded, address + decoded.size, go, shadow_stack)
    except (CsError, KeyError, ValueError):
        return None  # an operand this module does not know


def _compile(insn: Any, after: int, go: bool, shadow_stack: bool) -> Emulation | None:
    ops = insn.operands
    kind = insn.id
    if kind in SKIP:
        return _skip(after)
    if kind == X.X86_INS_PUSH and len(ops) == 1 and ops[0].type == X.X86_OP_REG:
        field, width = _register(insn, ops[0].reg)
        return _push(field, after) if width == 8 else None
    if kind == X.X86_INS_RET and not shadow_stack and all(op.type == X.X86_OP_IMM for op in ops):
        return _return(ops[0].imm if ops else 0)
    if kind in MOVES and len(ops) == 2 and X.X86_OP_MEM in (ops[0].type, ops[1].type):
        return _frame_move(insn, after)
    if len(ops) != 2 or (ops[0].type != X.X86_OP_REG and kind not in FLAGS_ONLY):
        return None
    if kind == X.X86_INS_LEA and ops[1].type == X.X86_OP_MEM:
        field, width = _register(insn, ops[0].reg)
        return _assign(field, width, _address_of(insn, ops[1].mem, after), after)
    if kind in MOVES:
        field, width = _register(insn, ops[0].reg)
        return _assign(field, width, _source(insn, ops[1], width, after), after)
    if kind in ARITHMETIC:
        return _arithmetic(insn, kind, after, go)
    return None


NO_ACCESS = {X.X86_INS_LEA, X.X86_INS_NOP, X.X86_INS_PREFETCH, X.X86_INS_PREFETCHNTA, X.X86_INS_PREFETCHT0,
             X.X86_INS_PREFETCHT1, X.X86_INS_PREFETCHT2, X.X86_INS_PREFETCHW, X.X86_INS_CLFLUSH}
"""Instructions whose memory operand is only an address: nothing is read or written there."""
STACK = {X.X86_INS_PUSH, X.X86_INS_POP, X.X86_INS_CALL, X.X86_INS_RET, X.X86_INS_PUSHFQ, X.X86_INS_POPFQ,
         X.X86_INS_LEAVE, X.X86_INS_ENTER}
"""Instructions that read or write the stack without naming it."""


def touched(code: bytes, address: int, registers: Any) -> list[tuple[int, int]]:
    """The memory the instruction at the start of CODE (at ADDRESS) reads or writes with these
    registers, as (address, size), as far as decoding says: its memory operands (fs and gs ones
    left out: thread-local storage; a string instruction's first element at rsi and rdi, as
    capstone lists them) and the stack around rsp for pushes, pops, calls and returns. Empty
    when it does not decode.
    A single-step of an instruction whose memory does not answer would leave its thread in the
    kernel with the trap flag set: killed by SIGTRAP when the memory comes after sampler left."""
    try:
        decoded = next(_DECODER.disasm(code, address, 1), None)
    except CsError:
        return []
    if decoded is None or decoded.id in NO_ACCESS:
        return []
    after = address + decoded.size
    spans = []
    for op in decoded.operands:
        if op.type != X.X86_OP_MEM or decoded.reg_name(op.mem.segment) in ("fs", "gs"):
            continue
        try:
            at = _address_of(decoded, op.mem, after, flat=True)(registers)
        except (KeyError, ValueError):
            continue
        spans.append((at, max(op.size, 1)))
    if decoded.id in STACK:
        spans.append(((registers.rsp - 8) & MASK[8], 16))
    return spans


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


def _address_of(insn: Any, mem: Any, after: int, flat: bool = False) -> Callable[[Any], int]:
    """The address a memory operand names (lea's result), from the registers. ``flat``: a
    segment other than fs and gs is taken as based at 0 (as x86-64 makes them)."""
    if mem.segment and not (flat and insn.reg_name(mem.segment) not in ("fs", "gs")):
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
    def run(registers: Any, memory: Access) -> bool:
        registers.rip = after
        return True
    return run


def _push(field: str, after: int) -> Emulation:
    def run(registers: Any, memory: Access) -> bool:
        value, top = getattr(registers, field), registers.rsp
        slot = (top - 8) & MASK[8]
        if slot // PAGE != top // PAGE or not memory.write(slot, value.to_bytes(8, "little")):
            return False
        registers.rsp, registers.rip = slot, after
        return True
    return run


def _return(pop: int) -> Emulation:
    """ret: the return address from the thread's own stack, as the CPU reads it."""
    def run(registers: Any, memory: Access) -> bool:
        top = registers.rsp
        data = memory.read(top, 8)
        if data is None:
            return False
        to = int.from_bytes(data, "little")
        if to >> 47 not in (0, (1 << 17) - 1):
            return False  # not canonical: the CPU faults at the ret itself (#GP), in a single-step
        registers.rip, registers.rsp = to, (top + 8 + pop) & MASK[8]
        return True
    return run


def _frame_move(insn: Any, after: int) -> Emulation | None:
    """mov between a 64- or 32-bit register (or an immediate, stored) and the thread's own
    stack frame, at or above its stack pointer ([rsp+disp], disp >= 0)."""
    target, source = insn.operands
    memory = target if target.type == X.X86_OP_MEM else source
    mem = memory.mem
    if mem.segment or mem.index or not mem.base or insn.reg_name(mem.base) != "rsp" or mem.disp < 0 \
            or memory.size not in (8, 4):
        return None
    width, disp = memory.size, mem.disp
    if target is memory:
        value = _source(insn, source, width, after)

        def store(registers: Any, memory: Access) -> bool:
            data = value(registers).to_bytes(width, "little")
            at = (registers.rsp + disp) & MASK[8]
            if at // PAGE != (at + width - 1) // PAGE or not memory.write(at, data):
                return False  # across two pages, a write could stop half done where the CPU writes nothing
            registers.rip = after
            return True
        return store
    field, register_width = _register(insn, target.reg)
    if register_width != width:
        return None

    def load(registers: Any, memory: Access) -> bool:
        data = memory.read((registers.rsp + disp) & MASK[8], width)
        if data is None:
            return False
        setattr(registers, field, int.from_bytes(data, "little"))  # a 32-bit load zero-extends
        registers.rip = after
        return True
    return load


def _assign(field: str, width: int, source: Callable[[Any], int], after: int) -> Emulation:
    def run(registers: Any, memory: Access) -> bool:
        _put(registers, field, width, source(registers))
        registers.rip = after
        return True
    return run


def _put(registers: Any, field: str, width: int, value: int) -> None:
    """Write a register as the CPU does: a 32-bit result zero-extends, an 8-bit one replaces
    the low byte only."""
    if width == 1:
        value = getattr(registers, field) & ~0xFF | value & 0xFF
    setattr(registers, field, value & MASK[width] if width != 1 else value)


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
        read_right = lambda registers, memory: immediate  # noqa: E731
    return _compute(kind, width, read_left, read_right, None if kind in FLAGS_ONLY else field, after)


def _stack_guard(insn: Any, mem: Any) -> bool:
    """Go's stack check reads g.stackguard0 through r14 (ABIInternal keeps g there)."""
    return bool(mem.base) and insn.reg_name(mem.base) == "r14" and not mem.index and not mem.segment


def _from_register(field: str, width: int) -> Callable[[Any, Access], int | None]:
    mask = MASK[width]
    return lambda registers, memory: getattr(registers, field) & mask


def _from_memory(insn: Any, mem: Any, width: int, after: int) -> Callable[[Any, Access], int | None]:
    address_of = _address_of(insn, mem, after)

    def read(registers: Any, memory: Access) -> int | None:
        data = memory.read(address_of(registers), width)
        return None if data is None else int.from_bytes(data, "little")
    return read


def _compute(kind: int, width: int, read_left: Callable[[Any, Access], int | None],
             read_right: Callable[[Any, Access], int | None], field: str | None, after: int) -> Emulation:
    mask, sign = MASK[width], SIGN[width]

    def run(registers: Any, memory: Access) -> bool:
        a, b = read_left(registers, memory), read_right(registers, memory)
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
            _put(registers, field, width, result)
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

