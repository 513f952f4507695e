"""Out-of-line copies of the instruction under an int3 (issue 59): a thread that hits one goes on in the
copy (the tracer sets its pc there, as Linux's uprobes do), and the copy runs the instruction, then jumps
on to what follows it. No single-step, no emulation, and nothing that only the tracer knows: the target's
own SIGTRAP handler (probe.S's "sigtrap") sends a thread to the same copy when the tracer is gone, so that
a killed tracer leaves no trap that kills the target.

What a copy holds, by the instruction:
- one that does not branch: the instruction (its rip-relative operand re-encoded for the copy's
  address, relocate.py), then a jump to the next instruction;
- ``ret``: itself;
- a jump or conditional branch with an immediate target: the condition kept, the two ways absolute jumps;
- ``call`` with an immediate target: the return address pushed (no flag changes), an absolute jump to
  the target; refused under a CET shadow stack (a push is not a call there).
Anything else (an indirect call, a system call, an instruction that reads rip) is Refused: that int3 is
stepped or emulated as before, and a killed tracer's trap at it still kills the target (said).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from capstone import CsError  # type: ignore[import-untyped]

from sampler.debuginfo import x86
from sampler.inprocess.relocate import Displaced, Refused, movable

COPY = 48
"""Bytes a copy may take (probe.S's COPY: the handler's test of a pc inside one)."""
ENTRY = 16
"""Bytes of an entry of the handler's table (an int3's address, its copy's)."""
TABLE_AT = 128
"""Where the entries start in the table."""
OLD_HANDLER = 8
COUNT = 0

CONDITIONS = {"jo": 0, "jno": 1, "jb": 2, "jae": 3, "je": 4, "jne": 5, "jbe": 6, "ja": 7, "js": 8, "jns": 9,
              "jp": 10, "jnp": 11, "jl": 12, "jge": 13, "jle": 14, "jg": 15}


@dataclass(frozen=True)
class Copy:
    code: bytes
    """The copy's bytes, for running at the address it was made for."""
    exits: dict[int, int]
    """Offset in the copy -> the address in the program a thread there stands for (the copy's start: the
    instruction itself; each absolute jump: its target). A thread at any other offset is mid-way."""


def absolute_jump(target: int) -> bytes:
    """jmp [rip+0]; dq target: reaches anywhere, changes nothing but the pc."""
    return b"\xff\x25\x00\x00\x00\x00" + struct.pack("<Q", target)


def copy_of(code: bytes, address: int, at: int, shadow_stack: bool = False) -> Copy:
    """The copy of the instruction at the start of ``code`` (the program's bytes at ``address``, the int3's
    original byte in front), to run at ``at``. Refused with why it cannot be."""
    try:
        instruction = next(x86.DETAILED.disasm(code[:16], address, 1), None)
    except CsError:
        instruction = None
    if instruction is None:
        raise Refused(f"the instruction at {address:#x} cannot be decoded")
    after = address + instruction.size
    mnemonic = instruction.mnemonic.split()[-1]  # (past a prefix: bnd, notrack, rep)
    data = bytes(instruction.bytes)
    targets = x86.branch_targets(instruction)
    if mnemonic == "ret":
        body = b"\xc3" if instruction.size == 1 or data[-1] == 0xC3 else b"\xc2" + data[-2:]
        return _checked(Copy(body, {0: address}))
    if mnemonic == "jmp" and targets:
        return _checked(Copy(absolute_jump(targets[0]), {0: targets[0]}))
    if targets and (mnemonic in CONDITIONS or mnemonic.startswith(("loop", "jrcxz", "jecxz"))):
        if mnemonic in CONDITIONS and len(data) >= 6 and data[-6] == 0x0F and data[-5] & 0xF0 == 0x80:
            short = bytes([0x70 | CONDITIONS[mnemonic]])  # (the near form's condition, as a short jump)
        else:
            short = data[:-1]  # (the short form: its prefixes and opcode, the displacement replaced)
        jumped = len(short) + 1 + 14
        body = short + bytes([14]) + absolute_jump(after) + absolute_jump(targets[0])
        return _checked(Copy(body, {0: address, len(short) + 1: after, jumped: targets[0]}))
    if mnemonic == "call" and targets:
        if shadow_stack:
            raise Refused(f"the call at {address:#x} cannot be copied under a CET shadow stack")
        body = (b"\x48\x8d\x64\x24\xf8"  # lea rsp, [rsp - 8]
                + b"\xc7\x04\x24" + struct.pack("<I", after & 0xFFFFFFFF)  # mov dword [rsp], low
                + b"\xc7\x44\x24\x04" + struct.pack("<I", after >> 32)  # mov dword [rsp + 4], high
                + absolute_jump(targets[0]))
        return _checked(Copy(body, {0: address, len(body) - 14: targets[0]}))
    moved = movable(instruction)  # (Refused: any other branch, a system call, rip read)
    body = Displaced(address, (moved,)).code_at(at)
    return _checked(Copy(body + absolute_jump(after), {0: address, len(body): after}))


def _checked(copy: Copy) -> Copy:
    if len(copy.code) > COPY:
        raise Refused(f"the copy takes {len(copy.code)} bytes, more than {COPY}")
    return copy


def sigaction(handler: int, flags: int, restorer: int, mask: int) -> bytes:
    """A struct kernel_sigaction (x86-64: handler, flags, restorer, mask; 32 bytes)."""
    return struct.pack("<QQQQ", handler, flags, restorer, mask)


def unpack_sigaction(data: bytes) -> tuple[int, int, int, int]:
    handler, flags, restorer, mask = struct.unpack("<QQQQ", data[:32])
    return handler, flags, restorer, mask
