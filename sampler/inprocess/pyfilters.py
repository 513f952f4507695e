"""A Python probe's test in the target (issue 39): at each of its places in the eval loop, the reads an
in-process filtering probe makes to find the code object of the frame the thread starts (probe.S's
filter templates, sampler.inprocess.trampoline.Chain), so that only the calls of the probe's function
stop at its int3, and every other Python call of the process goes on in the target.

Where the frame is: in an argument register at the eval loop's entry (3.8-3.10: every frame;
3.11 and later: a frame started from C); at 3.11's ``start_frame`` and 3.13's ``RESUME``, where the
interpreter's DWARF puts its variable ``frame`` at that address: a register (pyenv's builds), or a
slot of the C stack (one of Debian's PGO copies: ``DW_OP_fbreg`` from the CFA), read first.
"""

from __future__ import annotations

from sampler.debuginfo.locations import REGISTERS, Frame, InMemory, InRegister, OptimizedOut
from sampler.errors import LocationNotFound
from sampler.inprocess.trampoline import Chain
from sampler.python.probes import EVAL, PyProbe, dwarf_function

SPREAD = 44
"""Register i stands for (i + 1) << SPREAD while a location is worked out: what a location adds to it
(an offset of a few KiB) leaves which register it was."""


def chain(probe: PyProbe, address: int) -> Chain | str:
    """The test at the place ``address`` (run-time) of ``probe``, or why it has none (the place keeps
    an int3 that sampler's own test follows)."""
    code = probe.code_offset
    if probe.frame_register is not None:
        return Chain(probe.frame_register, (code,), probe.code)
    module = probe.interpreter.module
    try:
        debug, function = dwarf_function(probe.interpreter, EVAL, "a Python probe's test", "starts a frame")
    except LocationNotFound as e:
        return e.message
    pc = address - module.bias
    variable = debug.variables(function, pc).get("frame")
    if variable is None:
        return f"no variable 'frame' in the DWARF of {EVAL} at {pc:#x}"
    symbols = {name: (i + 1) << SPREAD for i, name in enumerate(REGISTERS)}

    def no_read(address: int) -> int:
        raise OptimizedOut("a read")

    try:
        where = debug.location(variable, Frame(symbols, pc, cfa=lambda: debug.cfa(pc, symbols), read_word=no_read),
                               function)
    except OptimizedOut as e:
        return f"the frame's place at {pc:#x} is not a register or a stack slot ({e})"
    if isinstance(where, InRegister) and where.register in REGISTERS[:16]:
        return Chain(where.register, (code,), probe.code)
    if isinstance(where, InMemory):
        index = (where.address >> SPREAD) - 1
        if 0 <= index < 16:
            offset = where.address - ((index + 1) << SPREAD)
            if -(1 << 20) < offset < 1 << 20:
                return Chain(REGISTERS[index], (offset, code), probe.code)
    return f"the frame's place at {pc:#x} is not a register or a stack slot ({where})"
