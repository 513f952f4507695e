"""The code of one in-process probe, placed (issue 36): a template of probe.S with its
placeholders filled in, the instructions the jump displaced (relocate.py), and the jump back.

The template counts the hit and writes a record (the thread's fs base, the TSC) into the ring
(ring.py); at a function's entry it keeps nothing but the registers it uses (pushed, 40 bytes),
elsewhere the flags too, past the 128-byte red zone. Nothing else of the target's state changes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from sampler.debuginfo.locations import REGISTERS
from sampler.inprocess import ring, templates
from sampler.inprocess.reads import Layout
from sampler.inprocess.relocate import Displaced, Refused

DATA = 0x1122334455667788
HITS = 0x0BADC0DE
DROPS = 0x0DD5C0DE
PROBE = 0x5EED1D00
RDATA = 0x2233445566778899
SLOTMASK = 0x5107A5C0
SLOT = 0x51075EED
TABLE = 0x3344556677889900
PID = 0x0B1D0B1D
FTABLE = 0x4455667788990011
STOP = 0x7AB57AB5
RDFSBASE_RDX = bytes.fromhex("f3480faec2" "0f1f4000")
MOV_RDX_FS0 = bytes.fromhex("64488b142500000000")
"""Where the kernel does not let user code read its fs base: the word at fs:0 (glibc's and musl's
thread pointer points to itself there; other runtimes' threads may all read alike)."""


def _rel32(source_end: int, target: int) -> bytes:
    offset = target - source_end
    if not -(1 << 31) <= offset < (1 << 31):
        raise Refused(f"{target:#x} is out of a rel32's reach from {source_end:#x}")
    return offset.to_bytes(4, "little", signed=True)


def fill(template: bytes, values: dict[int, tuple[int, int]]) -> bytes:
    """``template`` with each placeholder (its little-endian bytes, of the width given with its
    value) replaced: each must occur once."""
    code = bytearray(template)
    for placeholder, (value, width) in values.items():
        mark = placeholder.to_bytes(width, "little")
        at = code.find(mark)
        if at < 0 or code.find(mark, at + 1) >= 0:
            raise AssertionError(f"placeholder {placeholder:#x} not once in the template")
        code[at:at + width] = value.to_bytes(width, "little")
    return bytes(code)


def recording(displaced: Displaced, at: int, data: int, probe: int, entry: bool,
              fsgsbase: bool = True) -> tuple[bytes, int]:
    """The trampoline's bytes for running at ``at``, for probe number ``probe`` of the data area at
    ``data``; and where in it the displaced instructions start (a thread found in them is moved
    there)."""
    if displaced.ret_rsp is not None:
        raise Refused("a return probe reads the registers: it is a reading probe")
    code = fill(templates.ENTRY if entry else templates.ANYWHERE,
                {DATA: (data, 8), HITS: (ring.hits_at(probe), 4), DROPS: (ring.drops_at(probe), 4),
                 PROBE: (probe, 4)})
    return _finished(code, displaced, at, fsgsbase)


def reading(displaced: Displaced, at: int, data: int, probe: int, entry: bool, layout: Layout, pid: int,
            fsgsbase: bool = True) -> tuple[bytes, int]:
    """A reading probe's trampoline (``layout``: its record and read plan, reads.py) for process
    ``pid`` (its id in its own pid namespace), with its own data area at ``data``: the bytes, the
    table of its reads after them, and where the displaced instructions start."""
    template = templates.READS_ENTRY if entry else templates.READS_ANYWHERE
    table_at = at + (len(template) + displaced.size + 5 + 15) // 16 * 16  # (a relocated copy keeps its length)
    code = fill(template, {RDATA: (data, 8), SLOTMASK: (layout.slots - 1, 4), SLOT: (layout.record, 4),
                           TABLE: (table_at, 8), PID: (pid, 4), PROBE: (probe, 4)})
    code, moved_at = _finished(code, displaced, at, fsgsbase)
    return code + bytes(table_at - at - len(code)) + layout.table(), moved_at


@dataclass(frozen=True)
class Chain:
    """A filtering probe's test (probe.S's filter templates): from ``register``'s value at the site, for
    each offset, the offset added and 8 bytes read there; the call goes on to the int3 when the last
    read gives ``expect``."""

    register: str
    offsets: tuple[int, ...]
    expect: int

    def table(self) -> bytes:
        return struct.pack(f"<QQ{len(self.offsets)}qQ", REGISTERS.index(self.register) * 8, len(self.offsets),
                           *self.offsets, self.expect)


def filtering(displaced: Displaced, at: int, data: int, probe: int, entry: bool, chain: Chain, pid: int,
              stop: int, fsgsbase: bool = True) -> tuple[bytes, int]:
    """A filtering probe's trampoline (probe number ``probe`` of the data area at ``data``, for its
    counters) for process ``pid``, whose calls let through go to ``stop`` (``stopping``'s bytes): the
    bytes, its chain's table after them, and where the displaced instructions start."""
    if displaced.ret_rsp is not None:
        raise Refused("a return's place takes no filtering probe")
    template = templates.FILTER_ENTRY if entry else templates.FILTER_ANYWHERE
    table_at = at + (len(template) + displaced.size + 5 + 15) // 16 * 16
    jump_end = template.find(b"\xe9" + STOP.to_bytes(4, "little")) + 5
    code = fill(template, {DATA: (data, 8), HITS: (ring.hits_at(probe), 4), DROPS: (ring.drops_at(probe), 4),
                           FTABLE: (table_at, 8), PID: (pid, 4),
                           STOP: (int.from_bytes(_rel32(at + jump_end, stop), "little"), 4)})
    code, moved_at = _finished(code, displaced, at, fsgsbase)
    return code + bytes(table_at - at - len(code)) + chain.table(), moved_at


def stop_only(displaced: Displaced, at: int, stop: int) -> tuple[bytes, int]:
    """An int3 probe's trampoline (issue 59): a jump to its stop (``stopping``'s bytes: the int3 sampler arms,
    then a jump back here), then the displaced instructions and the jump back. A thread stopped at the int3
    stands where it can go on (the byte after it is the stop's jump), whatever becomes of its tracer."""
    return _finished(b"\xe9" + _rel32(at + 5, stop), displaced, at, True)


def stopping(stop: int, back: int) -> bytes:
    """A filtering probe's stop at ``stop``: the byte sampler arms (a nop), then a jump to ``back``."""
    return b"\x90\xe9" + _rel32(stop + 6, back)


def _finished(code: bytes, displaced: Displaced, at: int, fsgsbase: bool) -> tuple[bytes, int]:
    """The template's bytes, then the displaced instructions and the jump back (a return probe's: the
    instructions end with the ``ret``, and the jump back is never reached)."""
    if not fsgsbase:
        code = code.replace(RDFSBASE_RDX, MOV_RDX_FS0)
    moved_at = len(code)
    code += displaced.code_at(at + moved_at)
    code += b"\xe9" + _rel32(at + len(code) + 5, displaced.back)  # jmp back
    return code, moved_at


def jump(site: int, target: int) -> bytes:
    """The 5 bytes written at the site: jmp rel32 to the trampoline."""
    return b"\xe9" + _rel32(site + 5, target)
