"""Is an address the start of an instruction? Checked before an int3 is written there.

An int3 in the middle of an instruction changes what the target executes: it would crash
or compute wrong results. A breakpoint address comes from the line table (corrupted debug
information can put it anywhere in a function) or from the user (``*ADDR``), so it is
checked by decoding x86-64 from the start of its function (capstone) until the address
is reached or passed.
"""

from __future__ import annotations

from sampler.debuginfo import x86

_DECODER = x86.PLAIN

MAX_FUNCTION = 1 << 20
"""Decode at most this many bytes from the function's start (1 MiB)."""


def starts_instruction(code: bytes, start: int, address: int) -> bool:
    """CODE (at run-time address START) decoded from its first byte reaches ADDRESS exactly."""
    for at, _size, _mnemonic, _operands in _DECODER.disasm_lite(code, start):
        if at == address:
            return True
        if at > address:
            return False
    return False  # an undecodable byte before the address: not known to be an instruction


BLOCKING = ("syscall", "sysenter", "int")
"""Instructions that enter the kernel: one may wait there for another thread of the target."""


def kind_of(code: bytes, address: int) -> str:
    """What a single-step over the instruction at the start of CODE must allow for:
    'kernel' (it enters the kernel and may wait there for another thread), 'repeat' (a rep
    prefix: each step runs one iteration), or 'plain'; 'kernel' too when it cannot be decoded."""
    for _at, _size, mnemonic, _operands in _DECODER.disasm_lite(code, address, 1):
        words = mnemonic.split()
        if words[-1] in BLOCKING:
            return "kernel"
        return "repeat" if words[0].startswith("rep") and len(words) > 1 else "plain"
    return "kernel"
