"""A read plan (evaluation/plan.py) as a reading probe runs it in the target (probe.S's
``reads_entry``/``reads_anywhere``), and its records read back into what evaluation reads.

The plan's reads, level by level, become a table of 48-byte entries the probe walks at each hit:
the base (a register saved in the record, a word of an earlier read in the record, or none: a fixed
address), the offset added to it, the size, and where in the record the read goes (its address, the
system call's result, then its bytes). Each read is a process_vm_readv of the process's own memory:
a bad pointer gives EFAULT in the record, never a fault in the target. Python reads a record back
into the thread's registers at the hit and a Snapshot of the bytes read, and evaluates the
expressions against them as the int3 path does after its thread went on.

Not compiled (the site keeps its int3, and the line says why): a read whose size is read at the hit
(a string's text), more than MAX_READS reads, records past MAX_RECORD bytes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sampler.debuginfo.locations import REGISTERS as ALL_REGISTERS
from sampler.evaluation.evaluate import SampleError
from sampler.evaluation.plan import ReadPlan, Snapshot
from sampler.inprocess import ring

if TYPE_CHECKING:  # numpy is imported when a layout is made for a probe (never in a run without one)
    import numpy as np

REGISTERS = ALL_REGISTERS[:16]
"""The registers a record holds, in probe.S's order (rip is the site's address)."""
HEADER = 200
"""A record's bytes before its reads: seq, probe, flags, fs base, TSC (32), the registers (128), the
ticket and the two iovecs of the system call (40)."""
ENTRY = 48
MAX_READS = 32
MAX_RECORD = 2048
RING_BYTES = 16 << 20
"""Bytes of a reading probe's ring (its slots: the power of two that fits)."""
NOT_MADE = -1000
"""The result of a read whose pointer could not be read (probe.S)."""
REG, WORD, FIXED = 1, 2, 3


class Unfit(Exception):
    """The plan cannot run in the target (the reason, for the probes line)."""


@dataclass(frozen=True)
class _Read:
    kind: int
    source: int
    """REG: the register's offset in the record; WORD: the word's offset in the record."""
    start: int
    size: int
    at: int
    """Where the read's address, result and bytes go in the record."""
    check_at: int = 0
    """WORD: the offset of the pointer's read's result, which must equal ``check_size``."""
    check_size: int = 0


class Layout:
    """One reading probe's record and table, for ``plan`` at ``site``."""

    def __init__(self, plan: ReadPlan, site: int, ring_bytes: int = RING_BYTES) -> None:
        """``ring_bytes``: the most its ring may take of the target's memory (a return probe's: less)."""
        self.site = site
        reads: list[_Read] = []
        placed: dict[int, tuple[int, int]] = {}
        """Step index -> (its read's index, where its bytes start in that read)."""
        at = HEADER
        for level in plan.levels:
            for group in level:
                if group.size_from is not None:
                    raise Unfit("a string's text is read (its length is known only at the hit)")
                if group.kind == "reg" and group.source == "rip":
                    kind, source, start = FIXED, 0, site + group.start
                elif group.kind == "reg":
                    kind, source, start = REG, 32 + 8 * REGISTERS.index(str(group.source)), group.start
                elif group.kind == "word":
                    index, within_read = placed[int(group.source)]
                    pointer = reads[index]
                    kind, source, start = WORD, pointer.at + 16 + within_read + group.within, group.start
                else:
                    kind, source, start = FIXED, 0, group.start
                check = (reads[placed[int(group.source)][0]].at + 8, reads[placed[int(group.source)][0]].size) \
                    if kind == WORD else (0, 0)
                if not 0 < group.size <= MAX_RECORD or not -(1 << 63) <= start < (1 << 63):
                    raise Unfit(f"a read of {group.size} bytes at offset {start:#x}")
                for step, offset, _ in group.members:
                    placed[step] = (len(reads), offset)
                reads.append(_Read(kind, source, start, group.size, at, *check))
                at += 16 + (group.size + 7) // 8 * 8
        if len(reads) > MAX_READS:
            raise Unfit(f"{len(reads)} reads at a hit (at most {MAX_READS} in the target)")
        if at > MAX_RECORD:
            raise Unfit(f"a record of {at} bytes (at most {MAX_RECORD})")
        self.reads = reads
        self.record = (at + 31) // 32 * 32
        self.slots = 1 << min(16, (ring_bytes // self.record).bit_length() - 1)
        self.size = ring.RING + self.slots * self.record
        """Bytes of the probe's data area."""
        import numpy as np

        self.record_type = np.dtype([("seq", "<u8"), ("probe", "<u4"), ("flags", "<u4"), ("fs", "<u8"),
                                     ("tsc", "<u8"), ("registers", "<u8", (16,)), ("scratch", "<u8", (5,)),
                                     ("body", "V", self.record - HEADER)] if self.record > HEADER else
                                    [("seq", "<u8"), ("probe", "<u4"), ("flags", "<u4"), ("fs", "<u8"),
                                     ("tsc", "<u8"), ("registers", "<u8", (16,)), ("scratch", "<u8", (5,))])

    def table(self) -> bytes:
        """The entries probe.S walks (a zero kind ends them)."""
        out = bytearray()
        for read in self.reads:
            out += struct.pack("<QQqIIQQ", read.kind, read.source, read.start, read.size, read.at,
                               read.check_at, read.check_size)
        return bytes(out + bytes(ENTRY))

    def decode(self, record: np.void) -> tuple[Registers, Snapshot]:
        """The registers at the hit and the bytes read there, from one record."""
        registers = Registers(dict(zip(REGISTERS, record["registers"].tolist())), self.site, int(record["fs"]))
        snapshot = Snapshot()
        body = bytes(record["body"]) if self.record > HEADER else b""
        for read in self.reads:
            where = read.at - HEADER
            address, result = struct.unpack_from("<Qq", body, where)
            if result == NOT_MADE:
                continue
            data = body[where + 16:where + 16 + read.size] if result == read.size else None
            snapshot.spans.append((address, read.size, data))
        return registers, snapshot


class Registers:
    """A thread's registers as a reading probe recorded them: the general ones, rip (the site) and
    the fs base; another (``$eflags``) is an error of the row."""

    def __init__(self, values: dict[str, int], rip: int, fs_base: int) -> None:
        self.__dict__.update(values)
        self.rip = rip
        self.fs_base = fs_base

    def __getattr__(self, name: str) -> int:
        raise SampleError(f"${name} is not recorded by an in-process probe (give --probe int3 to read it)")



@dataclass(frozen=True)
class Recorded:
    """A hit of a reading probe, as evaluation sees a stopped thread (reads.Stop)."""

    address: int
    registers: Any
