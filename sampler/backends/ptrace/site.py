"""One breakpoint of a ptrace run and what its hits read: its place, what its names mean
there (scope.py) and the read plans learnt from its first hits (plan.py).

A probe (one --at) has a site per place its location resolves to: a function and each of
its compiler clones (``f.isra.0``, ``f.constprop.1``). Each site has its own scope, since
a clone keeps its parameters elsewhere. Without --at there is one site with no place: its
expressions are read while the target runs (zero-stop reads).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sampler.backends.ptrace.stackcopy import Copy, StackCopier
from sampler.debuginfo.locate import Place
from sampler.evaluation.plan import PlanMiss, ReadPlan, Recorder, Snapshot, Step
from sampler.evaluation.scope import Scope
from sampler.language.expr import Expression, ustack_depth
from sampler.process.guard import Guard
from sampler.process.memory import Memory, MemoryHang
from sampler.process.reads import Read, Stop, UnreadableMemory
from sampler.process.tasks import Hit
from sampler.python.objects import Unreadable
from sampler.python.probes import PyProbe
from sampler.sample import Reading, Value


class Site:
    def __init__(self, scope: Scope, label: str, slots: Sequence[int], width: int,
                 stacks: StackCopier | None = None) -> None:
        self.scope = scope
        """What the expressions' names mean at the breakpoint (scope.py)."""
        self.stacks = stacks
        """What copies and unwinds the stack of a hit, for its ``ustack`` expressions."""
        self.stack_depths = {index: depth for index, e in enumerate(scope.expressions)
                             if (depth := ustack_depth(e.tree)) is not None}
        """Its ``ustack`` expressions: how many frames each wants (0: all)."""
        self.place: Place | None = scope.place
        self.address: int | None = scope.address
        """Run-time address of the breakpoint (None: zero-stop reads)."""
        self.trap: int | None = None
        """Where its int3 is when not at ``address``: a filtering in-process probe's (a Python probe's
        place, whose jump goes to a test of the frame's code object that lets only its function's calls
        through to the int3)."""
        self.label = label
        """The probe column's text for its rows ('' when the run has no probe column)."""
        self.slots = tuple(slots)
        """Where each of its expressions goes among the run's columns."""
        self.width = width
        """How many value columns a row has (the probe column included)."""
        self.learnt: list[list[list[Step]]] | None = None
        """How the first hit's reads could have come about, for the second to confirm."""
        self.plans: list[ReadPlan | None] | None = None
        """The reads a hit needs, per expression, learnt at the first two hits (plan.py);
        None for an expression evaluated in full at every hit."""
        self.merged: ReadPlan | None = None
        """Every plan's reads and the thread column's as one plan (one system call per level)."""
        self.runner: Callable[[object], Snapshot] | None = None
        """The merged plan made for the hot path (Tracer.catch), when every expression has a plan."""
        self.warm: Hit | None = None
        """Its last hit, whose registers warm the hot path before the next arming."""

    @property
    def armed_at(self) -> int | None:
        """The address of its int3."""
        return self.trap if self.trap is not None else self.address

    @property
    def expressions(self) -> tuple[Expression, ...]:
        return self.scope.expressions

    # -- rows ------------------------------------------------------------------------

    def missed(self, error: str, wait_us: float) -> Reading:
        return Reading(self._laid_out([None] * len(self.expressions)), wait_us=wait_us, error=error)

    @property
    def python(self) -> PyProbe | None:
        """A Python function's probe (``--at py:...``): its code object and frame at a hit."""
        return self.scope.python

    def python_hit(self, hit: Hit, memory: Memory) -> bool:
        """The hit thread starts a frame of this probe's function (read while it waits); a frame
        that cannot be read is no hit of it."""
        probe = self.python
        assert probe is not None
        objects = probe.interpreter.objects
        objects.reading = memory.read
        try:
            return probe.started(hit.registers, hit.tid) is not None
        except Unreadable:
            return False
        finally:
            objects.reading = None

    def read_hit(self, memory: Memory, hit: Hit, since: float, let_go: Callable[[Hit], None],
                 guard: Guard | None = None) -> Reading:
        """The careful way: read at the hit, let the thread go on every way out, then
        evaluate; say how long it was held. The first hit, and the one after a plan missed,
        is evaluated in full while the thread waits, to make the read plans (plan.py); an
        expression whose reads the data chooses (an interface, a C string) is evaluated there
        in full at every hit, and the others from the plans' reads after the thread went on.
        What is read while the thread waits is read by ``guard``'s helper, TIMEOUT_S at most."""
        count = len(self.expressions)
        results: list[tuple[Value, str] | None] = [None] * count
        recorders: list[Recorder] = []
        plans, merged = self.plans, self.merged
        thread = str(hit.tid)
        snapshot = Snapshot()
        copies: dict[int, Copy] = {}

        def in_pause() -> tuple[str, Snapshot]:
            if self.stack_depths and self.stacks is not None:
                copies[0] = self.stacks.copy(hit.registers, memory, hit.tid)  # one read; unwound after it went on
            if plans is None or merged is None:
                fixed = self.scope.fixed_ranges()
                recorders[:] = [Recorder(memory.read, hit.registers, fixed) for _ in range(count)]
                for index, recorder in enumerate(recorders):
                    if index not in self.stack_depths:
                        results[index] = self.evaluate_one(memory, hit, index, recorder.read, recorder.branched)
                return self.thread_of(hit, memory.read), snapshot
            for index, plan in enumerate(plans[:count]):
                if plan is None:  # the data chooses its reads: in full, now
                    results[index] = self.evaluate_one(memory, hit, index)
            return thread, merged.run(hit.registers, memory.read_many)

        hang: MemoryHang | None = None
        try:
            thread, snapshot = guard.call(in_pause) if guard is not None else in_pause()
        except MemoryHang as e:  # the thread goes on; every expression says why it has no value
            hang = e
        finally:
            let_go(hit)
            hit.resumed = hit.resumed or time.monotonic()  # the thread vanished: no CONT
        if hang is not None:
            return self.row(hit, since, [(None, str(hang))] * count, str(hit.tid))
        self._stacks_of(memory, copies.get(0), results)
        if plans is None or merged is None:
            self._learn(memory, recorders)
            return self.row(hit, since, results, thread)
        self.warm = hit
        return self.reading(memory, hit, since, results, snapshot)

    def _stacks_of(self, memory: Memory, copy: Copy | None, results: list[tuple[Value, str] | None]) -> None:
        """The ``ustack`` values, from the copy made while the thread waited."""
        for index, depth in self.stack_depths.items():
            if copy is None or self.stacks is None:
                results[index] = (None, "no copy of the stack was made at this hit")
                continue
            try:
                results[index] = (self.stacks.folded(copy, memory, depth), "")
            except UnreadableMemory as e:
                results[index] = (None, f"the stack cannot be read ({e})")

    def reading(self, memory: Memory, hit: Hit, since: float, results: list[tuple[Value, str] | None],
                snapshot: Snapshot) -> Reading:
        """After the thread went on: the row, each expression with a plan evaluated against
        the bytes its plan read at the hit."""
        assert self.plans is not None
        for index, plan in enumerate(self.plans[:len(results)]):
            if plan is not None and index not in self.stack_depths:
                results[index] = self.evaluate_one(memory, hit, index, snapshot.read)
        if snapshot.missed:
            self.plans = self.merged = self.learnt = self.runner = None  # the next two hits in full
        return self.row(hit, since, results, self.thread_of(hit, snapshot.read))

    def row(self, hit: Hit, since: float, results: list[tuple[Value, str] | None], thread: str) -> Reading:
        values, errors = joined(self.expressions, results)
        return Reading(self._laid_out(list(values)), thread=thread, pause_us=(hit.resumed - hit.seen) * 1e6,
                       wait_us=(hit.seen - since) * 1e6, error="; ".join(errors))

    def recorded(self, memory: Memory, hit: Stop, snapshot: Snapshot, thread: str, at: float) -> Reading:
        """The row of an in-process probe's hit: each expression evaluated against the registers and
        bytes the probe recorded (a read it did not make is the row's error, as a plan's miss is)."""
        results: list[tuple[Value, str] | None] = [self.evaluate_one(memory, hit, index, snapshot.read)
                                                   for index in range(len(self.expressions))]
        values, errors = joined(self.expressions, results)
        if self.scope.goid_offset is not None:
            try:
                g = int(hit.registers.r14)
                thread = str(int.from_bytes(snapshot.read(g + self.scope.goid_offset, 8), "little"))
            except (UnreadableMemory, PlanMiss):
                pass
        return Reading(self._laid_out(list(values)), thread=thread, at=at, error="; ".join(errors))

    def recorded_values(self, values: list[Value], thread: str, at: float) -> Reading:
        """The row of an in-process probe's hit whose values were made in bulk (columns.py)."""
        return Reading(self._laid_out(values), thread=thread, at=at)

    def laid_out_columns(self, columns: Sequence[object]) -> list[object]:
        """Columns of its expressions' values (arrays: Bulk's) in the run's columns, as _laid_out."""
        out: list[object] = [None] * self.width
        if self.label:
            out[0] = self.label
        for slot, column in zip(self.slots, columns):
            out[slot] = column
        return out

    def counted(self) -> tuple[Value, ...]:
        """The values of a row of a hit with nothing read (an in-process probe's: its probe column)."""
        return self._laid_out([])

    def _laid_out(self, values: list[Value]) -> tuple[Value, ...]:
        """Its values in the run's columns: the probe column first when the run has one."""
        if not self.label and self.width == len(values):
            return tuple(values)
        row: list[Value] = [None] * self.width
        if self.label:
            row[0] = self.label
        for slot, value in zip(self.slots, values):
            row[slot] = value
        return tuple(row)

    # -- read plans ------------------------------------------------------------------

    def _learn(self, memory: Memory, recorders: list[Recorder]) -> None:
        """Make the read plans from this hit's full evaluation and the one before it (the
        first hit only notes how its reads came about)."""
        if self.python is not None:
            return  # (a Python probe's values are read in full at each hit: its frame is another each time)
        found = [recorder.candidates() for recorder in recorders]
        if self.learnt is None:
            self.learnt = found
            return
        made = [recorder.plan(earlier) for recorder, earlier in zip(recorders, self.learnt)]
        if any(plan is None for plan in made):  # the two hits read differently: try again
            self.learnt = found
            return
        self.plans = [None if r.unstable else p for r, p in zip(recorders, made)]
        self.merged = ReadPlan.merged([*(p for p in self.plans if p is not None), self._thread_plan])
        self.learnt = None
        if all(plan is not None for plan in self.plans) and not self.stack_depths:  # (ustack: a copy at each hit)
            self.runner = self.merged.runner(memory)

    @functools.cached_property
    def _thread_plan(self) -> ReadPlan:
        """The thread column's read, whose way is known: goid at R14 + its offset (Go)."""
        if self.scope.goid_offset is None:
            return ReadPlan([])
        return ReadPlan([Step("reg", "r14", 0, self.scope.goid_offset, 8)])

    def thread_of(self, hit: Hit, read: Read) -> str:
        """The thread column: for Go, the goroutine id (as Delve gives it), read from the
        current g (R14 under Go's register ABI); else the OS thread id."""
        if self.scope.goid_offset is not None:
            try:
                g = int(hit.registers.r14)
                return str(int.from_bytes(read(g + self.scope.goid_offset, 8), "little"))
            except (UnreadableMemory, PlanMiss):
                pass  # not on a goroutine's stack (a cgo or runtime thread): the OS thread id
        return str(hit.tid)

    # -- evaluation ------------------------------------------------------------------

    def evaluate(self, memory: Memory, hit: Hit | None, read: Read | None = None
                 ) -> tuple[tuple[Value, ...], list[str]]:
        """Every expression at the hit (None: globals only), laid out in the run's columns;
        ``read``: what reads the memory (memory.read when not given)."""
        results = [self.evaluate_one(memory, hit, index, read) for index in range(len(self.expressions))]
        values, errors = joined(self.expressions, results)
        return self._laid_out(list(values)), errors

    def evaluate_one(self, memory: Memory, hit: Stop | None, index: int, read: Read | None = None,
                     on_branch: Callable[[], None] | None = None) -> tuple[Value, str]:
        if index in self.stack_depths:  # ustack outside read_hit: the thread still waits, read it live
            if hit is None or self.stacks is None:
                return None, "ustack: the stack of a thread stopped at a breakpoint"
            try:
                return self.stacks.folded(self.stacks.copy(hit.registers, memory, getattr(hit, "tid", None)), memory,
                                          self.stack_depths[index]), ""
            except UnreadableMemory as e:
                return None, f"the stack cannot be read ({e})"
        if hit is not None and self.trap is not None and hit.address == self.trap and self.address is not None \
                and self.python is None:
            hit = AtSite(self.address, hit.registers)  # (an int3 in a stop of sampler's page: the site's own pc)
        return self.scope.evaluate(hit, index, read or memory.read, on_branch)


@dataclass(frozen=True)
class AtSite:
    """A hit at a site's int3 in a stop of sampler's page, as the expressions see it: at the site (every register
    is as there, the pc too: the tracer reads $rip as the site's)."""

    address: int
    registers: Any


def joined(expressions: Sequence[Expression], results: Sequence[tuple[Value, str] | None]
           ) -> tuple[tuple[Value, ...], list[str]]:
    """The row's values, and its errors as 'name: why'."""
    values: list[Value] = []
    errors: list[str] = []
    for expression, result in zip(expressions, results):
        value, error = result if result is not None else (None, "not evaluated")
        values.append(value)
        if error:
            errors.append(f"{expression.name}: {error}")
    return tuple(values), errors

