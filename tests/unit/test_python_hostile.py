"""The Python readers against hostile memory: random bytes whose words often point back into
themselves. Whatever they hold, every read ends in a value or in Unreadable (one line), never in
another exception, and in bounded time."""

from __future__ import annotations

import random
import time

import pytest

from sampler.process.reads import UnreadableMemory
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


def _bare(version: tuple[int, int], read, runtime: int) -> Interpreter:  # type: ignore[no-untyped-def]
    """An Interpreter over memory made here (no process, no module to find it in)."""
    interpreter = Interpreter.__new__(Interpreter)
    interpreter.version = version
    interpreter.layout = layouts.TABLES[version]
    interpreter.objects = Objects(version, interpreter.layout, read)
    interpreter._code = {}
    interpreter._code_bytes = 0
    interpreter._lines = {}
    interpreter._budget = 0
    interpreter._names = {}
    interpreter._names_read = -10.0
    interpreter.runtime = runtime
    return interpreter


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
        interpreter = _bare(version, _reader(memory), BASE + random.Random(seed).randrange(SIZE - 4096))
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

    from sampler.process.snapshot import pread_exactly
    fd = os.open(f"/proc/{os.getpid()}/mem", os.O_RDONLY)
    try:
        for address, size in ((1 << 63, 8), (2 ** 64 - 8, 8), ((1 << 63) - 4, 8), (0, 8), (4096, -1)):
            with pytest.raises(UnreadableMemory):
                pread_exactly(fd, address, size)
    finally:
        os.close(fd)


class Sparse:
    """Memory of a few regions written here, zero pages in a span, nothing elsewhere; each read
    counted, and refused past ``most`` (a walk that would not end fails the test, not hangs it)."""

    def __init__(self, zeros: tuple[int, int] = (0, 0), most: int = 200_000) -> None:
        self.regions: dict[int, bytearray] = {}
        self.zeros = zeros
        self.reads = 0
        self.most = most

    def put(self, address: int, data: bytes) -> int:
        self.regions[address] = bytearray(data)
        return address

    def word(self, address: int, value: int) -> None:
        self.write(address, value.to_bytes(8, "little"))

    def write(self, address: int, data: bytes) -> None:
        for start, region in self.regions.items():
            if start <= address and address + len(data) <= start + len(region):
                region[address - start:address - start + len(data)] = data
                return
        raise AssertionError(f"nothing made at {address:#x}")

    def read(self, address: int, size: int) -> bytes:
        self.reads += 1
        if self.reads > self.most:
            raise RuntimeError(f"more than {self.most} reads: the walk does not end")
        for start, region in self.regions.items():
            if start <= address and address + size <= start + len(region):
                return bytes(region[address - start:address - start + size])
        if not (self.zeros[0] <= address and address + size <= self.zeros[1]):
            raise UnreadableMemory(f"nothing is mapped at {address:#x}")
        out = bytearray(size)  # zero pages, and what was written over them
        for start, region in self.regions.items():
            low, high = max(start, address), min(start + len(region), address + size)
            if low < high:
                out[low - address:high - address] = region[low - start:high - start]
        return bytes(out)


def _string(memory: Sparse, address: int, text: str, lay: dict[str, int], type_: int) -> int:
    raw = bytearray(lay["unicode.ascii_size"] + len(text) + 1)
    raw[8:16] = type_.to_bytes(8, "little")
    raw[lay["unicode.length"]:lay["unicode.length"] + 8] = len(text).to_bytes(8, "little")
    raw[lay["unicode.state"]:lay["unicode.state"] + 4] = (1 << 2 | 1 << 5 | 1 << 6).to_bytes(4, "little")
    raw[lay["unicode.ascii_size"]:lay["unicode.ascii_size"] + len(text)] = text.encode()
    return memory.put(address, bytes(raw))


def test_a_dict_claiming_2_to_the_36_slots_is_refused_at_once() -> None:
    """The review's case: a nobody's python3.11 pointed sys.modules' keys at a table claiming log2_size=36
    over read-only zero pages; the probe ran size + 64 times (days)."""
    version = (3, 11)
    lay = layouts.TABLES[version]
    memory = Sparse(zeros=(0x7F0000000000, 0x7F0000000000 + (1 << 40)))
    keys = memory.put(0x7F0000000000, bytes(64))  # its header, over zero pages
    memory.write(keys + lay["keys.log2_size"], bytes([36, 38, 1]))
    d = memory.put(0x10000, bytes(64))
    memory.word(d + lay["dict.keys"], keys)
    objects = Objects(version, lay, memory.read)
    objects.secret = (1, 2)  # (a trusted hash secret: the lookup probes by hash)
    started = time.monotonic()
    with pytest.raises(Unreadable, match="not believed"):
        objects.dict_get(d, "threading")
    assert memory.reads < 10 and time.monotonic() - started < 1


def test_the_largest_dict_believed_is_probed_in_bounded_reads() -> None:
    version = (3, 11)
    lay = layouts.TABLES[version]
    memory = Sparse(zeros=(0x7F0000000000, 0x7F0000000000 + (1 << 30)))
    keys = memory.put(0x7F0000000000, bytes(64))
    memory.write(keys + lay["keys.log2_size"], bytes([21, 23, 1]))  # 2^21 slots of 4 bytes, all zero: index 0
    d = memory.put(0x10000, bytes(64))
    memory.word(d + lay["dict.keys"], keys)
    objects = Objects(version, lay, memory.read)
    objects.secret = (1, 2)
    with pytest.raises(Unreadable, match="past its 0 entries: not believed"):
        objects.dict_get(d, "threading")
    memory.word(keys + lay["keys.nentries"], 1 << 20)  # entries claimed: the zero slots all name entry 0
    memory.reads = 0
    with pytest.raises(Unreadable, match="never ends"):
        objects.dict_get(d, "threading")
    assert memory.reads < 100  # (the index and the entries in one read each, past 64)
    memory.put(keys + lay["keys.indices"], b"\xfe\xff\xff\xff" * (1 << 21))  # every slot deleted (DKIX_DUMMY)
    memory.reads = 0
    with pytest.raises(Unreadable, match="never ends"):
        objects.dict_get(d, "threading")
    assert memory.reads < 100  # (64 slots one by one, then the whole index in one read)


def test_threads_whose_frame_points_at_itself_cost_one_frame_each(monkeypatch: pytest.MonkeyPatch) -> None:
    """The review's case: a C program exporting _PyRuntime and Py_Version, 1,024 thread states whose frame
    points at itself, a code object with a 1 MiB line table: 30 s and 174 MB (4,096: still running at 60 s)."""
    from sampler.python import interpreter as module

    version = (3, 11)
    lay = layouts.TABLES[version]
    memory = Sparse()
    type_ = memory.put(0x1000, bytes(64))
    memory.word(type_ + lay["type.name"], memory.put(0x2000, b"code\0"))
    table = memory.put(0x100000, bytes(lay["bytes.data"]) + bytes(1 << 20))
    memory.word(table + lay["var.size"], 1 << 20)
    code = memory.put(0x3000, bytes(0x200))
    memory.word(code + 8, type_)
    memory.word(code + lay["code.name"], _string(memory, 0x4000, "spin", lay, type_))
    memory.word(code + lay["code.filename"], _string(memory, 0x4100, "fake.py", lay, type_))
    memory.word(code + lay["code.qualname"], _string(memory, 0x4200, "spin", lay, type_))
    memory.word(code + lay["code.linetable"], table)
    frame = memory.put(0x5000, bytes(0x100))
    memory.word(frame + lay["iframe.code"], code)
    memory.word(frame + lay["iframe.previous"], frame)  # itself
    memory.word(frame + lay["iframe.instr"], code + lay["code.code_adaptive"] + 8)
    cframe = memory.put(0x6000, bytes(0x40))
    memory.word(cframe + lay["cframe.current_frame"], frame)
    threads = 1024
    states = [memory.put(0x10000 + 0x200 * i, bytes(0x200)) for i in range(threads)]
    for i, tstate in enumerate(states):
        memory.word(tstate + lay["tstate.next"], states[i + 1] if i + 1 < threads else 0)
        memory.word(tstate + lay["tstate.cframe"], cframe)
        memory.word(tstate + lay["tstate.native_thread_id"], 1000 + i)
    interp = memory.put(0x7000, bytes(0x400))
    memory.word(interp + lay["interp.threads_head"], states[0])
    runtime = memory.put(0x8000, bytes(0x200))
    memory.word(runtime + lay["runtime.interpreters_head"], interp)
    decoded = []

    def counted(*args):  # type: ignore[no-untyped-def]
        decoded.append(args[3])
        if len(decoded) > 50:
            raise RuntimeError("the line table is decoded again for every frame")
        return line_at(*args)

    monkeypatch.setattr(module, "line_at", counted)
    interpreter = _bare(version, memory.read, runtime)
    started = time.monotonic()
    found = interpreter.threads(names=False)
    # every thread: one frame, then the loop said; the table decoded once; in a second or two
    assert len(found) == threads
    assert all(len(t.frames) == 1 and "loops back" in (t.problem or "") for t in found), found[0]
    assert len(decoded) == 1
    assert time.monotonic() - started < 5


def test_a_real_dict_whose_probe_comes_back_to_a_slot_is_read() -> None:
    """CPython's probe may meet a slot again while perturb is not yet 0: in {0: a, 224: b} of 8 slots,
    the lookup of 224 meets slot 0 (key 0), slot 0 again ((0 * 5 + 7 + 1) & 7), then slot 1. A probe
    that took a slot met twice for a forged table refused real dicts at random (str hashes are)."""
    version = (3, 11)
    lay = layouts.TABLES[version]
    memory = Sparse()
    int_type = memory.put(0x1000, bytes(64))
    memory.word(int_type + lay["type.name"], memory.put(0x1100, b"int\0" + bytes(300)))

    def integer(address: int, value: int) -> int:
        obj = memory.put(address, bytes(32))
        memory.word(obj + 8, int_type)
        memory.word(obj + lay["long.size"], 1 if value else 0)
        memory.write(obj + lay["long.digits"], value.to_bytes(4, "little"))
        return obj

    zero, key, a, b = integer(0x2000, 0), integer(0x2100, 224), integer(0x2200, 1), integer(0x2300, 2)
    keys = memory.put(0x3000, bytes(0x200))
    memory.write(keys + lay["keys.log2_size"], bytes([3, 3, 0]))  # 8 slots of 1 byte, general entries
    memory.word(keys + lay["keys.nentries"], 2)
    indices = bytes([0, 1]) + b"\xff" * 6  # 0 in slot 0, 224 in slot 1 (after slot 0 twice)
    memory.write(keys + lay["keys.indices"], indices)
    entries = keys + lay["keys.indices"] + 8
    for n, (k, v) in enumerate(((zero, a), (key, b))):
        memory.word(entries + 24 * n, 0 if k == zero else 224)  # the hash CPython keeps (an int's: itself)
        memory.word(entries + 24 * n + 8, k)
        memory.word(entries + 24 * n + 16, v)
    d = memory.put(0x4000, bytes(64))
    memory.word(d + lay["dict.keys"], keys)
    objects = Objects(version, lay, memory.read)
    objects.secret = (1, 2)
    assert objects.dict_get(d, 224) == b
    assert objects.dict_get(d, 0) == a
    assert objects.dict_get(d, 5) is None
