"""Zero-stop rows read as of one moment, as a seqlock's reader does.

Without --at nothing stops: the fields a row needs are read while the target's threads
change them, and two fields read a few microseconds apart may never have held their values
together (``w - r`` of a ring whose reader advanced between the two reads is a negative
number read as unsigned).

The reads a row needs (those of the row before, mostly) are made a span at a time: one
pread for all that lies within SPAN bytes, a copy the kernel makes in nanoseconds, which is
taken as one moment (a value torn inside it needs two stores of the target's within that
copy). A row of one span is read once. A row of several is read in one order and at once in
the other, so that the last span's two reads are back to back and every other span's two
reads lie around them: when every other span's reads agree, each held its value from before
the last span's read until after it, and the row is of that moment (evaluated from the
second reads). A span that changed goes last for the next attempt; a row whose spans keep
changing for BUDGET_S (TRIES attempts at most) has no values and says "torn", counted in the
summary. A row that needs other reads (a pointer moved) is read again with those.

The check cannot see a value that changed and changed back between two reads (ABA); the
counters and indexes this is for only grow.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sampler.process.memory import SPAN, Memory, MemoryHang
from sampler.process.reads import Read, UnreadableMemory

TRIES = 64
"""Attempts at a row before it is called torn..."""
MIN_TRIES = 3
"""...at least (a loaded host can take the budget in one)..."""
BUDGET_S = 0.0005
"""...and the time they may take."""

T = TypeVar("T")
Entry = tuple[int, int, "bytes | None"]


class Torn(Exception):
    """The row's reads never agreed."""


class Spans:
    """The bytes of some reads, made a span at a time (one pread for reads within SPAN bytes
    of each other), and served to an evaluation; a read not among them is made from memory
    and noted (``missed``)."""

    def __init__(self, memory: Memory, wanted: list[tuple[int, int]], spans: list[tuple[int, int]]) -> None:
        """``spans``: spans_of(wanted), read in this order."""
        self.memory = memory
        self.wanted = wanted
        self.spans: list[tuple[int, int, bytes]] = []
        self.alone: dict[tuple[int, int], bytes | None] = {}
        """Reads in a span that could not be read whole (it crosses an unmapped page)."""
        self.missed: list[tuple[int, int]] = []
        self.used: list[tuple[int, int]] = []
        """Every read served, in order."""
        self._wanted = set(wanted)
        for start, size in spans:
            try:
                self.spans.append((start, size, memory.read(start, size)))
            except MemoryHang:
                raise  # its own error: the row says the read did not return
            except UnreadableMemory:
                for address, length in wanted:
                    if start <= address < start + size:
                        try:
                            self.alone[(address, length)] = memory.read(address, length)
                        except MemoryHang:
                            raise
                        except UnreadableMemory:
                            self.alone[(address, length)] = None

    def get(self, address: int, size: int) -> tuple[bool, bytes | None]:
        """(whether it was read, its bytes or None: unreadable)."""
        for start, length, data in self.spans:
            if start <= address and address + size <= start + length:
                return True, data[address - start:address - start + size]
        if (address, size) in self.alone:
            return True, self.alone[(address, size)]
        return False, None

    def read(self, address: int, size: int) -> bytes:
        self.used.append((address, size))
        found, data = self.get(address, size) if (address, size) in self._wanted else (False, None)
        if not found:  # (a read within a span but not wanted was not checked: a miss too)
            self.missed.append((address, size))
            return self.memory.read(address, size)
        if data is None:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
        return data

    def differ(self, other: Spans) -> set[int]:
        """The starts of the spans whose wanted reads gave other bytes in the two."""
        return {self.span_of(address) for address, size in self.wanted
                if self.get(address, size) != other.get(address, size)}

    def whole(self, start: int) -> set[int]:
        """{start} when the span there was read whole (one pread), else nothing."""
        return {start} if any(begin == start for begin, _, _ in self.spans) else set()

    def span_of(self, address: int) -> int:
        for start, length, _ in self.spans:
            if start <= address < start + length:
                return start
        return address


def spans_of(wanted: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The reads, sorted and joined where a span of at most SPAN bytes holds them."""
    joined: list[list[int]] = []
    for address, size in sorted(set(wanted)):
        if joined and address + size - joined[-1][0] <= SPAN:
            joined[-1][1] = max(joined[-1][1], address + size)
        else:
            joined.append([address, address + size])
    return [(low, high - low) for low, high in joined]


class Moment:
    """A zero-stop row's reads, made as of one moment (the module's docstring says how)."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.wanted: list[tuple[int, int]] = []
        self.spans: list[tuple[int, int]] = []
        """spans_of(wanted), the ones that changed last."""
        self.again = 0
        """Attempts made again because a value changed between two reads."""
        self.torn = 0

    def read(self, evaluate: Callable[[Read], T]) -> T:
        """``evaluate``'s result from reads that all held at one moment; Torn when they never
        agreed."""
        memory = self.memory
        ends = time.monotonic() + BUDGET_S
        for attempt in range(TRIES):
            if attempt >= MIN_TRIES and time.monotonic() > ends:
                break
            spans = self.spans
            if len(spans) > 1:
                before = Spans(memory, self.wanted, spans)
                now = Spans(memory, self.wanted, spans[::-1])
                changed = now.differ(before) - now.whole(spans[-1][0])
                if changed:
                    self.again += 1
                    spans.sort(key=lambda span: span[0] in changed)  # one of them innermost next
                    continue
            else:
                now = Spans(memory, self.wanted, spans)
            result = evaluate(now.read)
            if not now.missed:
                return result
            self.wanted = sorted(set(now.used))  # read again, each within its span: the row's
            self.spans = spans_of(self.wanted)  # reads were made one by one (the first row, a
            # pointer that moved): no moment yet
        self.torn += 1
        raise Torn("torn: the values changed every time they were read (for "
                   f"{(time.monotonic() - ends + BUDGET_S) * 1e6:.0f} us)")
