"""consistent.py: a zero-stop row's reads agree, or the row says torn.

A unit test of the retry logic against a memory whose words move between reads as a ring's
threads move them (the real rings: tests/integration/test_zero_stop_reads.py)."""

from __future__ import annotations

import random
import struct

import pytest

from sampler.process.consistent import Moment, Torn, spans_of
from sampler.process.reads import UnreadableMemory

POINTER, RING = 0x1000, 0x8000  # a global pointer to r, and w FAR past it: three spans
FAR = 0x10000


class Ring:
    """Memory whose ring moves on at a read (at each with probability ``chance``): ``moves``
    steps, of the writer until the ring is full, then of the reader."""

    def __init__(self, capacity: int = 4, moves: int = 1, chance: float = 1.0) -> None:
        self.r = self.w = 0
        self.capacity, self.moves, self.chance = capacity, moves, chance
        self.random = random.Random(7)

    def _step(self) -> None:
        if self.random.random() >= self.chance:
            return
        for _ in range(self.moves):  # the writer fills, then the reader drains
            if self.w - self.r < self.capacity:
                self.w += 1
            elif self.r < self.w:
                self.r += 1
        if self.w - self.r == self.capacity:
            self.r += self.moves

    def read(self, address: int, size: int) -> bytes:
        self._step()
        image = {POINTER: struct.pack("<Q", RING), RING: struct.pack("<Q", self.r),
                 RING + FAR: struct.pack("<Q", self.w)}
        for start, data in image.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start:address - start + size]
        raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")


def delta(read) -> int:  # ring->w - ring->r, read field by field as the evaluator does
    ring = int.from_bytes(read(POINTER, 8), "little")
    w = int.from_bytes(read(ring + FAR, 8), "little")
    r = int.from_bytes(read(ring, 8), "little")
    return (w - r) % (1 << 64)


def test_field_by_field_reads_of_a_moving_ring_give_what_it_never_held():
    """The failure itself: read one field at a time, w - r goes out of the ring's range."""
    ring = Ring(moves=3, chance=0.2)
    assert any(delta(ring.read) > ring.capacity for _ in range(200))


def test_the_rows_of_a_ring_that_moves_between_some_reads_are_all_in_range():
    ring = Ring(moves=3, chance=0.2)
    moment = Moment(ring)  # type: ignore[arg-type]
    seen, torn = [], 0
    for _ in range(200):
        try:
            seen.append(moment.read(delta))
        except Torn:
            torn += 1
    assert seen and all(0 <= value <= ring.capacity for value in seen)
    assert torn == moment.torn
    assert moment.again > 0


def test_a_ring_that_moves_at_every_read_is_torn_not_wrong():
    ring = Ring(moves=1)
    moment = Moment(ring)  # type: ignore[arg-type]
    with pytest.raises(Torn, match="torn"):
        moment.read(delta)
    assert moment.torn == 1


def test_one_span_is_one_moment_however_fast_it_moves():
    ring = Ring(moves=1)
    moment = Moment(ring)  # type: ignore[arg-type]
    for _ in range(20):
        moment.read(lambda read: read(RING + FAR, 8))
    assert moment.torn == 0 and moment.again == 0


def test_only_the_innermost_span_may_move():
    """The pointer and r hold still, w moves at every read: w is read last and innermost, and
    every row is kept."""
    ring = Ring(capacity=10**9, moves=1)  # never full: the reader never moves
    moment = Moment(ring)  # type: ignore[arg-type]
    rows = [moment.read(delta) for _ in range(20)]
    assert moment.torn == 0 and rows == sorted(rows)


def test_unreadable_memory_is_the_rows_error_not_a_retry():
    ring = Ring(moves=0)
    moment = Moment(ring)  # type: ignore[arg-type]

    def bad(read):
        read(POINTER, 8)
        return read(0xdead000, 8)

    for _ in range(3):
        with pytest.raises(UnreadableMemory):
            moment.read(bad)
    assert moment.torn == 0


def test_spans_join_what_one_read_can_hold():
    assert spans_of([(0x1008, 8), (0x1000, 8), (0x1000, 8)]) == [(0x1000, 16)]
    assert spans_of([(0x1000, 8), (0x3000, 8)]) == [(0x1000, 8), (0x3000, 8)]


class Pair:
    """{r, w} in one span, w - r always 1, both moving on at every read."""

    def __init__(self) -> None:
        self.r = 0

    def read(self, address: int, size: int) -> bytes:
        self.r += 1
        data = struct.pack("<QQ", self.r, self.r + 1)
        return data[address - RING:address - RING + size]


def test_the_first_row_is_of_one_moment_too():
    # (the first row's reads were made one by one and taken as they came: w - r was 2, then 1)
    pair = Pair()
    moment = Moment(pair)  # type: ignore[arg-type]

    def w_minus_r(read) -> int:
        w = int.from_bytes(read(RING + 8, 8), "little")
        return w - int.from_bytes(read(RING, 8), "little")

    assert [moment.read(w_minus_r) for _ in range(5)] == [1] * 5
