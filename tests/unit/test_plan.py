"""Read plans: learnt from one full evaluation's reads, replayed alone at later hits."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from sampler.backends.ptrace.memory import UnreadableMemory
from sampler.backends.ptrace.plan import REGISTER_ORDER, PlanMiss, ReadPlan, Recorder


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
