"""Nothing but raw reads while the thread is stopped.

The first two hits are evaluated in full while the thread waits, through a Recorder
that notes every read and explains each address by where it came from: a register plus
an offset, a word read earlier plus an offset (a pointer followed), or a fixed address;
the way that explains a read at both hits is kept. That is the read plan. At every
later hit the plan runs alone (registers are already in hand; the independent reads
in one ``pread`` of their span where they lie close), the thread goes on, and only then are the
expressions evaluated, against the bytes the plan read (a Snapshot). Evaluation is
deterministic, so it asks for the same reads in the same way; when a sample's data
leads elsewhere (a null pointer, another dynamic type), a read is missing from the
snapshot: that row says so and the next two hits are evaluated in full again, making a
new plan.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from sampler.process.reads import Memory, Read, UnreadableMemory

REACH = 1 << 20
"""How far past a base an offset may go and still explain an address (a field, an element)."""
MAX_WORDS_READ = 64
"""Reads longer than this (text) are not searched for pointers."""
MAX_SIZE = 4096
"""The longest read a length read at the hit may ask for (sampler's MAX_TEXT)."""
REGISTER_ORDER = ("rsp", "rbp", "rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "rbx", "r10", "r11",
                  "r12", "r13", "r14", "r15", "rip")
"""Where an address is looked for among the registers, first match wins."""

ReadMany = Callable[[list[tuple[int, int]]], list[Optional[bytes]]]


class PlanMiss(Exception):
    """The evaluation asked for a read the plan did not make at this hit."""


@dataclass(frozen=True)
class Step:
    kind: str
    """'reg' (register + offset), 'word' (a word of an earlier read + offset), 'fixed'."""
    source: str | int
    """The register's name, or the earlier read's index."""
    within: int
    """For 'word': where the word is in that read."""
    offset: int
    size: int
    size_from: tuple[int, int] | None = None
    """Where the size was read, (earlier read, position of the word): a string's length."""


class Recorder:
    """Reads live memory for a full evaluation and notes how each address came about."""

    def __init__(self, read: Read, registers: object, fixed: Sequence[tuple[int, int]] = ()) -> None:
        """``fixed``: [start, end) of the globals, whose addresses never move."""
        self._read = read
        self._fixed = fixed
        self._registers = {name: int(getattr(registers, name)) & (1 << 64) - 1 for name in REGISTER_ORDER}
        self._reads: list[tuple[int, int, bytes | None]] = []
        self.unstable = False
        """The evaluation took a way the data chose: no plan can stand for it."""

    def branched(self) -> None:
        self.unstable = True

    def read(self, address: int, size: int) -> bytes:
        try:
            data = self._read(address, size)
        except UnreadableMemory:
            self._reads.append((address, size, None))
            raise
        self._reads.append((address, size, data))
        return data

    def candidates(self) -> list[list[Step]]:
        """For each read, every way its address could have come about, the likeliest first."""
        return [self._explain(index, address, size) for index, (address, size, _) in enumerate(self._reads)]

    def plan(self, earlier: list[list[Step]] | None = None) -> ReadPlan | None:
        """The plan of this evaluation's reads. Given the candidates of an earlier hit's
        evaluation, each read keeps the likeliest way that explains it at both hits (a
        register that happened to lie just below a field at one hit rarely does at the
        next); None when the two evaluations did not read alike, or a read has no way that
        explains it at both (an address of two registers, ``$rbp + $rax * 8``: a guess would
        miss at a later hit and lose that row; the hits are evaluated in full instead)."""
        mine = self.candidates()
        if earlier is None:
            return ReadPlan([ways[0] for ways in mine])
        if len(earlier) != len(mine):
            return None
        steps = []
        for ways, before in zip(mine, earlier):
            seen = {_key(step) for step in before}
            both = next((step for step in ways if _key(step) in seen), None)
            if both is None:
                return None
            steps.append(both)
        return ReadPlan(steps)

    def _explain(self, index: int, address: int, size: int) -> list[Step]:
        """The bases below the address, nearest first: words read earlier (a pointer
        followed; a word wins a tie) and registers; then the address itself. Go's stacks and
        heap share one arena, so a stack pointer can lie a little below an unrelated heap
        object: nearness decides, and a second hit (``plan``) confirms."""
        size_from = self._text_length(index, address, size)
        length = size_from and size_from[:2]
        fixed = Step("fixed", 0, 0, address, size, length)
        if any(start <= address < end for start, end in self._fixed):
            return [fixed]
        ways: list[tuple[int, int, Step]] = []
        for earlier in range(index - 1, -1, -1):
            _, read_size, data = self._reads[earlier]
            if data is None or read_size > MAX_WORDS_READ:
                continue
            for within in range(0, read_size - 7, 8):
                word = int.from_bytes(data[within:within + 8], "little")
                if word and 0 <= address - word < REACH:
                    ways.append((address - word, 0, Step("word", earlier, within, address - word, size, length)))
        for name in REGISTER_ORDER:
            value = self._registers[name]
            if value and 0 <= address - value < REACH:
                ways.append((address - value, 1, Step("reg", name, 0, address - value, size, length)))
        ways.sort(key=lambda way: way[:2])
        return [step for _, _, step in ways] + [fixed]

    def _text_length(self, index: int, address: int, size: int) -> tuple[int, int, int] | None:
        """A string's text: read right after its pointer and its length (as the evaluator
        reads a string), so its size is that length at every hit."""
        if index < 2:
            return None
        (_, pointer_size, pointer), (_, length_size, length) = self._reads[index - 2], self._reads[index - 1]
        if pointer_size != 8 or length_size != 8 or pointer is None or length is None:
            return None
        if int.from_bytes(pointer, "little") != address:
            return None
        value = int.from_bytes(length, "little")
        return (index - 1, 0, value) if value == size or (value > MAX_SIZE and size == MAX_SIZE) else None


def _key(step: Step) -> tuple[object, ...]:
    """A step's way to its address (and its size, unless that is read at each hit)."""
    return (step.kind, step.source, step.within, step.offset, step.size_from,
            step.size if step.size_from is None else None)


SPAN = 256
"""Reads from one base (a register, a word read before, the globals) whose bytes lie within
this many are made as one read: b->w and b->r are one read of 16 bytes."""
MASK = (1 << 64) - 1


@dataclass(frozen=True)
class _Group:
    """One read of a level: the steps it serves, from one base."""
    kind: str
    source: str | int
    within: int
    start: int
    """Offset of the read from the base."""
    size: int
    members: tuple[tuple[int, int, int], ...]
    """(step index, where its bytes start in the read, its size)."""
    size_from: tuple[int, int] | None = None


class ReadPlan:
    def __init__(self, steps: list[Step]) -> None:
        self.steps = steps
        depth: list[int] = []
        for step in steps:
            needs = [int(step.source)] if step.kind == "word" else []
            if step.size_from is not None:
                needs.append(step.size_from[0])
            depth.append(1 + max((depth[n] for n in needs), default=-1))
        # the steps by how many reads each waits for: a level is one system call
        levels = [[i for i, d in enumerate(depth) if d == level] for level in range(max(depth, default=-1) + 1)]
        self._groups = [self._group(level) for level in levels]

    @property
    def levels(self) -> list[list[_Group]]:
        """Its reads by level (a level's reads wait only for those of the levels before it)."""
        return self._groups

    @classmethod
    def merged(cls, plans: Sequence[ReadPlan]) -> ReadPlan:
        """One plan making the reads of all ``plans`` (each level in one system call for all of them)."""
        steps: list[Step] = []
        for plan in plans:
            base = len(steps)
            for step in plan.steps:
                source = int(step.source) + base if step.kind == "word" else step.source
                size_from = (step.size_from[0] + base, step.size_from[1]) if step.size_from else None
                steps.append(Step(step.kind, source, step.within, step.offset, step.size, size_from))
        return cls(steps)

    def _group(self, level: list[int]) -> list[_Group]:
        """The level's reads: steps of fixed size from one base, within SPAN, share one."""
        groups: list[_Group] = []
        by_base: dict[tuple[str, str | int, int], list[int]] = {}
        for index in level:
            step = self.steps[index]
            if step.size_from is not None:  # its size is read at the hit
                groups.append(_Group(step.kind, step.source, step.within, step.offset, step.size,
                                     ((index, 0, step.size),), step.size_from))
            else:
                by_base.setdefault((step.kind, step.source, step.within), []).append(index)
        for (kind, source, within), indexes in by_base.items():
            indexes.sort(key=lambda i: self.steps[i].offset)
            run: list[int] = []
            for index in [*indexes, -1]:
                next_step = self.steps[index] if index >= 0 else None
                if run and (next_step is None or next_step.offset + next_step.size - self.steps[run[0]].offset > SPAN):
                    first = self.steps[run[0]].offset
                    end = max(self.steps[i].offset + self.steps[i].size for i in run)
                    groups.append(_Group(kind, source, within, first, end - first,
                                         tuple((i, self.steps[i].offset - first, self.steps[i].size) for i in run)))
                    run = []
                if next_step is not None:
                    run.append(index)
        return groups

    def run(self, registers: object, read_many: ReadMany) -> Snapshot:
        """The plan's reads at this hit: only reads (the caller's thread is stopped), each
        level in one system call, nearby reads from one base as one."""
        got: list[bytes | None] = [None] * len(self.steps)
        snapshot = Snapshot()
        for groups in self._groups:
            wanted: list[tuple[int, int]] = []
            made: list[_Group] = []
            for group in groups:
                if group.kind == "reg":
                    base = int(getattr(registers, str(group.source))) & MASK
                elif group.kind == "word":
                    read = got[int(group.source)]
                    if read is None:
                        continue
                    base = int.from_bytes(read[group.within:group.within + 8], "little")
                else:
                    base = 0
                address, size = base + group.start, group.size
                if group.size_from is not None:
                    where = got[group.size_from[0]]
                    if where is None:
                        continue
                    at = group.size_from[1]
                    size = min(int.from_bytes(where[at:at + 8], "little"), MAX_SIZE)
                    if size == 0:
                        got[group.members[0][0]] = b""
                        continue
                if not 0 < address < 1 << 63:
                    snapshot.spans.append((address, size, None))
                    continue
                wanted.append((address, size))
                made.append(group)
            for group, (address, size), data in zip(made, wanted, read_many(wanted)):
                if data is None and len(group.members) > 1:  # one of them crosses into unmapped memory
                    for index, at, part in group.members:
                        [got[index]] = read_many([(address + at, part)])
                        snapshot.spans.append((address + at, part, got[index]))
                    continue
                snapshot.spans.append((address, size, data))
                for index, at, part in group.members:
                    got[index] = data if data is None or len(group.members) == 1 else data[at:at + part]
        return snapshot


    def runner(self, memory: Memory) -> Callable[[object], Snapshot]:
        """``run`` made for one memory, for the hot path: each level's buffer and vectors are
        made now, and a hit makes one system call per level with nothing else around it. A
        plan whose sizes are read at the hit (a string), and any hit where a read fails or an
        address is out of range, run the careful way (``run``)."""
        def careful(registers: object) -> Snapshot:
            return self.run(registers, memory.read_many)

        if any(group.size_from is not None for groups in self._groups for group in groups):
            return careful
        levels = [(tuple((g.kind, g.source, g.within, g.start, g.size, g.members) for g in groups),
                   memory.batch([g.size for g in groups])) for groups in self._groups if groups]
        if len(levels) == 1 and len(levels[0][0]) == 1 and levels[0][0][0][0] != "word":
            (kind, source, _, start, size, _), = levels[0][0]
            batch = levels[0][1]
            name = str(source)

            def one(registers: object) -> Snapshot:  # the common case: one read from one register
                address = ((int(getattr(registers, name)) & MASK) if kind == "reg" else 0) + start
                data = batch.read([address]) if 0 < address < 1 << 63 else None
                if data is None:
                    return careful(registers)
                snapshot = Snapshot()
                snapshot.spans.append((address, size, data))
                return snapshot
            return one
        steps = len(self.steps)

        def levelled(registers: object) -> Snapshot:
            got: list[bytes] = [b""] * steps
            snapshot = Snapshot()
            spans = snapshot.spans
            for groups, batch in levels:
                addresses = []
                for kind, source, within, start, _, _ in groups:
                    if kind == "reg":
                        base = int(getattr(registers, str(source))) & MASK
                    elif kind == "word":
                        base = int.from_bytes(got[int(source)][within:within + 8], "little")
                    else:
                        base = 0
                    address = base + start
                    if not 0 < address < 1 << 63:
                        return careful(registers)
                    addresses.append(address)
                raw = batch.read(addresses)
                if raw is None:
                    return careful(registers)
                at = 0
                for (_, _, _, _, size, members), address in zip(groups, addresses):
                    data = raw[at:at + size]
                    at += size
                    spans.append((address, size, data))
                    for index, offset, part in members:
                        got[index] = data[offset:offset + part]
            return snapshot
        return levelled


class Snapshot:
    """The bytes a plan read at one hit, served to the evaluation after the thread went on."""

    def __init__(self, failed: UnreadableMemory | None = None) -> None:
        self.spans: list[tuple[int, int, bytes | None]] = []
        """(address, size, bytes or None: unreadable) of each read made."""
        self.missed = False
        self.failed = failed
        """The reads did not return in time (guard.py): every read says so."""

    def read(self, address: int, size: int) -> bytes:
        if self.failed is not None:
            raise UnreadableMemory(str(self.failed))
        for start, length, data in self.spans:
            if start <= address and address + size <= start + length:
                if data is None:
                    raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}")
                return data if (start, length) == (address, size) else data[address - start:address - start + size]
        self.missed = True
        raise PlanMiss(f"{size} bytes at {address:#x} were not read while the thread was stopped")
