"""The Python readers against hostile memory: random bytes whose words often point back into
themselves. Whatever they hold, every read ends in a value or in Unreadable (one line), never in
another exception, and in bounded time."""

from __future__ import annotations

import random
import time

import pytest

from sampler.evaluation.reads import UnreadableMemory
from sampler.python import layouts
from sampler.python.interpreter import Interpreter
from sampler.python.lines import line_at
from sampler.python.objects import Objects, Unreadable

BASE = 0x10000
SIZE = 1 << 16


def _memory(seed: int) -> bytes:
    rng = random.Random(seed)
    raw = bytearray(rng.randbytes(SIZE))
    for at in range(0, SIZE, 8):  # half the words point inside, 8-aligned or not
        if rng.random() < 0.5:
            raw[at:at + 8] = (BASE + rng.randrange(SIZE - 64)).to_bytes(8, "little")
        elif rng.random() < 0.2:
            raw[at:at + 8] = rng.choice([0, 1, 2 ** 63, 2 ** 64 - 1, 3]).to_bytes(8, "little")
    return bytes(raw)


def _reader(memory: bytes):  # type: ignore[no-untyped-def]
    def read(address: int, size: int) -> bytes:
        if size < 0 or not BASE <= address <= address + size <= BASE + SIZE:
            raise UnreadableMemory(f"nothing is mapped at {address:#x}")
        return memory[address - BASE:address - BASE + size]
    return read


@pytest.mark.parametrize("version", sorted(layouts.TABLES))
def test_objects_read_from_random_memory_end_in_a_value_or_one_line(version: tuple[int, int]) -> None:
    for seed in range(40):
        memory = _memory(seed)
        objects = Objects(version, layouts.TABLES[version], _reader(memory))
        if seed % 2:
            objects.secret = (seed, seed * 7)
        rng = random.Random(seed)
        for _ in range(60):
            obj = BASE + rng.randrange(SIZE)
            started = time.monotonic()
            calls = ((objects.value, ()), (objects.length, ()), (objects.item, ("key",)), (objects.item, (-1,)),
                     (objects.attribute, ("name",)), (objects.dict_get, (12345,)), (objects.text, ()))
            for call, more in calls:
                try:
                    call(obj, *more)  # type: ignore[operator]
                except Unreadable:
                    pass
            assert time.monotonic() - started < 5


@pytest.mark.parametrize("version", sorted(layouts.TABLES))
def test_frames_read_from_random_memory_end_in_frames_or_one_line(version: tuple[int, int]) -> None:
    for seed in range(40):
        memory = _memory(seed)
        interpreter = Interpreter.__new__(Interpreter)
        interpreter.version = version
        interpreter.layout = layouts.TABLES[version]
        interpreter.objects = Objects(version, interpreter.layout, _reader(memory))
        interpreter._code = {}
        interpreter._names = {}
        interpreter._names_read = -10.0
        interpreter.runtime = BASE + random.Random(seed).randrange(SIZE - 4096)
        try:
            threads = interpreter.threads()
        except Unreadable:
            continue
        for thread in threads:
            assert len(thread.frames) <= 1024
            assert all(isinstance(frame.line, int) for frame in thread.frames)


def test_line_tables_of_random_bytes_give_a_line() -> None:
    rng = random.Random(1)
    for _ in range(2000):
        table = rng.randbytes(rng.randrange(64))
        for version in ((3, 8), (3, 10), (3, 11)):
            assert isinstance(line_at(version, table, rng.randrange(-5, 5000), rng.randrange(-4, 400)), int)


def test_a_pointer_past_the_address_space_is_unreadable_not_a_crash() -> None:
    """A torn frame's pointer (0xffff...) read through /proc/PID/mem: pread's OverflowError was exit 70 (CI)."""
    import os

    from sampler.backends.ptrace.snapshot import pread_exactly
    fd = os.open(f"/proc/{os.getpid()}/mem", os.O_RDONLY)
    try:
        for address, size in ((1 << 63, 8), (2 ** 64 - 8, 8), ((1 << 63) - 4, 8), (0, 8), (4096, -1)):
            with pytest.raises(UnreadableMemory):
                pread_exactly(fd, address, size)
    finally:
        os.close(fd)
