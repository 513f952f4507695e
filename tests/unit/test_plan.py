"""Read plans: learnt from one full evaluation's reads, replayed alone at later hits."""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from sampler.evaluation.plan import REGISTER_ORDER, PlanMiss, ReadPlan, Recorder, Step
from sampler.process.memory import Memory
from sampler.process.reads import UnreadableMemory


def registers(**values: int) -> SimpleNamespace:
    return SimpleNamespace(**{name: values.get(name, 0) for name in REGISTER_ORDER})


class FakeMemory:
    def __init__(self, words: dict[int, bytes]) -> None:
        self.words = words
        self.reads: list[tuple[int, int]] = []

    def read(self, address: int, size: int) -> bytes:
        self.reads.append((address, size))
        for start, data in self.words.items():
            if start <= address and address + size <= start + len(data):
                return data[address - start:address - start + size]
        raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")

    def read_many(self, wanted: list[tuple[int, int]]) -> list[bytes | None]:
        found: list[bytes | None] = []
        for address, size in wanted:
            try:
                found.append(self.read(address, size))
            except UnreadableMemory:
                found.append(None)
        return found


def word(value: int) -> bytes:
    return value.to_bytes(8, "little")


def planned(recorder: Recorder) -> ReadPlan:
    plan = recorder.plan()
    assert plan is not None
    return plan


def test_a_pointer_chain_is_replayed_from_the_new_registers_and_words() -> None:
    # GIVEN b in rdi at the first hit; the evaluation read b->next (at +16), then next->w (at +8)
    first = FakeMemory({0x1000: word(1) + word(2) + word(0x2000), 0x2000: word(0) + word(77)})
    recorder = Recorder(first.read, registers(rdi=0x1000, rsp=0x7F00))
    recorder.read(0x1010, 8)
    recorder.read(0x2008, 8)
    plan = planned(recorder)
    # WHEN a later hit has another b with another next
    later = FakeMemory({0x5000: word(0) + word(0) + word(0x6000), 0x6000: word(0) + word(99)})
    snapshot = plan.run(registers(rdi=0x5000, rsp=0x7F00), later.read_many)
    # THEN only those two reads happened, and the evaluation finds them in the snapshot
    assert later.reads == [(0x5010, 8), (0x6008, 8)]
    assert snapshot.read(0x6008, 8) == word(99) and not snapshot.missed


def test_the_nearest_base_wins_over_a_stack_pointer_just_below() -> None:
    # GIVEN Go: the stack (rsp) a little below the heap object r, which is in rbx
    memory = FakeMemory({0xC000100000: word(0xC000200000)})
    recorder = Recorder(memory.read, registers(rsp=0xC0000F0000, rbx=0xC000100000))
    recorder.read(0xC000100000, 8)
    [step] = planned(recorder).steps
    assert (step.kind, step.source, step.offset) == ("reg", "rbx", 0)


def test_a_string_is_read_with_the_length_of_this_hit() -> None:
    # GIVEN a string header {pointer, length} at rdi, read as the evaluator reads it
    first = FakeMemory({0x1000: word(0x3000) + word(1), 0x3000: b"/"})
    recorder = Recorder(first.read, registers(rdi=0x1000))
    for address, size in ((0x1000, 8), (0x1008, 8), (0x3000, 1)):
        recorder.read(address, size)
    later = FakeMemory({0x1000: word(0x4000) + word(6), 0x4000: b"/items"})
    snapshot = planned(recorder).run(registers(rdi=0x1000), later.read_many)
    assert snapshot.read(0x4000, 6) == b"/items"


def test_a_global_keeps_its_address() -> None:
    memory = FakeMemory({0x601000: word(5)})
    recorder = Recorder(memory.read, registers(rax=0x600F00), fixed=[(0x601000, 0x601008)])
    recorder.read(0x601000, 8)
    [step] = planned(recorder).steps
    assert (step.kind, step.offset) == ("fixed", 0x601000)


def test_a_read_the_plan_did_not_make_is_a_miss_and_an_unreadable_one_stays_unreadable() -> None:
    memory = FakeMemory({0x1000: word(0)})
    recorder = Recorder(memory.read, registers(rdi=0x1000))
    recorder.read(0x1000, 8)
    with pytest.raises(UnreadableMemory):
        recorder.read(0x9000, 8)
    snapshot = planned(recorder).run(registers(rdi=0x1000), memory.read_many)
    with pytest.raises(UnreadableMemory):
        snapshot.read(0x9000, 8)
    assert not snapshot.missed
    with pytest.raises(PlanMiss):
        snapshot.read(0x1008, 8)
    assert snapshot.missed


def test_a_register_that_lay_near_by_chance_at_one_hit_is_not_kept_by_the_next() -> None:
    # GIVEN g in r14 and goid at g+152; at the first hit rdx happened to hold g+144
    memory = FakeMemory({0x1000: bytes(152) + word(7)})
    first = Recorder(memory.read, registers(r14=0x1000, rdx=0x1090))
    first.read(0x1098, 8)
    assert planned(first).steps[0].source == "rdx"  # alone, the nearest register wins
    # WHEN the second hit, where rdx holds something else, confirms the first
    memory = FakeMemory({0x2000: bytes(152) + word(9)})
    second = Recorder(memory.read, registers(r14=0x2000, rdx=0x5))
    second.read(0x2098, 8)
    plan = second.plan(first.candidates())
    # THEN r14 + 152 is the way, and it reads the goid at a third hit
    assert plan is not None and (plan.steps[0].source, plan.steps[0].offset) == ("r14", 152)
    later = FakeMemory({0x3000: bytes(152) + word(11)})
    assert plan.run(registers(r14=0x3000, rdx=0x3090), later.read_many).read(0x3098, 8) == word(11)


def test_two_hits_that_read_differently_make_no_plan() -> None:
    memory = FakeMemory({0x1000: word(1) + word(2)})
    first = Recorder(memory.read, registers(rdi=0x1000))
    first.read(0x1000, 8)
    second = Recorder(memory.read, registers(rdi=0x1000))
    second.read(0x1000, 8)
    second.read(0x1008, 8)
    assert second.plan(first.candidates()) is None


def test_nearby_reads_from_one_base_are_one_read_and_plans_merge_into_one_call_per_level() -> None:
    # GIVEN two expressions: b->w - b->r (b in rdi) and a global at a fixed address
    memory = FakeMemory({0x1000: word(7) + word(3), 0x601000: word(5)})
    first = Recorder(memory.read, registers(rdi=0x1000))
    first.read(0x1008, 8)
    first.read(0x1000, 8)
    second = Recorder(memory.read, registers(rdi=0x1000), fixed=[(0x601000, 0x601008)])
    second.read(0x601000, 8)
    merged = ReadPlan.merged([planned(first), planned(second)])
    assert [(step.kind, step.offset) for step in merged.steps] == [("reg", 8), ("reg", 0), ("fixed", 0x601000)]
    # WHEN the merged plan runs at a hit
    calls: list[list[tuple[int, int]]] = []
    later = FakeMemory({0x2000: word(9) + word(4), 0x601000: word(6)})

    def read_many(wanted: list[tuple[int, int]]) -> list[bytes | None]:
        calls.append(wanted)
        return later.read_many(wanted)

    snapshot = merged.run(registers(rdi=0x2000), read_many)
    # THEN one call read w and r as one 16-byte read, and the global beside it
    assert sorted(calls[0]) == [(0x2000, 16), (0x601000, 8)] and len(calls) == 1
    assert snapshot.read(0x2008, 8) == word(4) and snapshot.read(0x2000, 8) == word(9)
    assert snapshot.read(0x601000, 8) == word(6) and not snapshot.missed


def test_a_joint_read_that_crosses_into_unmapped_memory_is_read_apart() -> None:
    memory = FakeMemory({0x1000: word(1) + word(2)})
    recorder = Recorder(memory.read, registers(rdi=0x1000))
    recorder.read(0x1000, 8)
    with pytest.raises(UnreadableMemory):
        recorder.read(0x1010, 8)  # past the mapping's end
    plan = planned(recorder)
    snapshot = plan.run(registers(rdi=0x1000), memory.read_many)
    assert snapshot.read(0x1000, 8) == word(1)
    with pytest.raises(UnreadableMemory):
        snapshot.read(0x1010, 8)
    assert not snapshot.missed


# -- the hot path's runner, on real memory: this test process's own, through /proc/self/mem --


def own_buffer(data: bytes) -> tuple[ctypes.Array[ctypes.c_char], int]:
    buffer = ctypes.create_string_buffer(data, len(data))
    return buffer, ctypes.addressof(buffer)


@pytest.fixture
def own_memory() -> Iterator[Memory]:
    memory = Memory(os.getpid())
    yield memory
    memory.close()


def test_the_runner_reads_what_run_reads_from_one_register(own_memory: Memory) -> None:
    # GIVEN a plan of one 16-byte read at rdi + 8, and that memory in this process
    keep, address = own_buffer(word(1) + word(20000) + word(5))
    plan = ReadPlan([Step("reg", "rdi", 0, 8, 16)])
    runner = plan.runner(own_memory)
    # WHEN the runner and the careful run make it
    fast = runner(registers(rdi=address))
    careful = plan.run(registers(rdi=address), own_memory.read_many)
    # THEN both read the same bytes, which are the memory's
    assert fast.spans == careful.spans == [(address + 8, 16, word(20000) + word(5))]
    assert fast.read(address + 16, 8) == word(5)
    del keep


def test_the_runner_follows_a_pointer_chain_level_by_level(own_memory: Memory) -> None:
    # GIVEN a global pointer (fixed address) to a struct whose fields are read
    keep_struct, struct_at = own_buffer(word(7) + word(11) + word(13))
    keep_pointer, pointer_at = own_buffer(word(struct_at))
    plan = ReadPlan([Step("fixed", 0, 0, pointer_at, 8), Step("word", 0, 0, 8, 8), Step("word", 0, 0, 16, 8),
                     Step("reg", "r14", 0, 0, 8)])
    runner = plan.runner(own_memory)
    # WHEN it runs
    snapshot = runner(registers(r14=pointer_at))
    # THEN each field is the memory's, the two fields of one base read as one
    assert snapshot.read(struct_at + 8, 8) == word(11) and snapshot.read(struct_at + 16, 8) == word(13)
    assert (struct_at + 8, 16, word(11) + word(13)) in snapshot.spans
    assert snapshot.read(pointer_at, 8) == word(struct_at)
    del keep_struct, keep_pointer


def test_the_runner_falls_back_to_the_careful_way_on_an_unreadable_address(own_memory: Memory) -> None:
    # GIVEN a pointer that is null at this hit
    keep, pointer_at = own_buffer(word(0))
    plan = ReadPlan([Step("fixed", 0, 0, pointer_at, 8), Step("word", 0, 0, 8, 8)])
    # WHEN the runner makes it
    snapshot = plan.runner(own_memory)(registers())
    # THEN the read through the null pointer is unreadable, not an exception or a wrong value
    with pytest.raises(UnreadableMemory):
        snapshot.read(8, 8)
    assert snapshot.read(pointer_at, 8) == word(0)
    del keep
