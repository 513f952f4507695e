"""The ptrace backend: breakpoints where only the hitting thread stops, or no stop at all.

With ``--at``: per sample, write int3 at the location, wait for the first thread
to hit it, read what the expressions need, put the byte back, rewind that thread
and let it go. Without ``--at`` every name must be a global, and nothing stops:
values are read from /proc/PID/mem while the target runs (zero-stop reads).
"""

from __future__ import annotations

import functools
import gc
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

from sampler import notice
from sampler.backends.base import Capabilities
from sampler.backends.cycle import miss
from sampler.backends.ptrace.instructions import MAX_FUNCTION, starts_instruction
from sampler.backends.ptrace.memory import Memory, Read, UnreadableMemory
from sampler.backends.ptrace.plan import PlanMiss, ReadPlan, Recorder, Snapshot, Step
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.backends.ptrace.scope import Scope
from sampler.backends.ptrace.tracer import Hit, Tracer
from sampler.config import SessionConfig
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.locate import resolve
from sampler.debuginfo.modules import Modules
from sampler.errors import LocationNotFound, UsageError
from sampler.language.expr import Expression
from sampler.safety.guardian import Guardian
from sampler.safety.journal import Journal
from sampler.sample import Reading, Value
from sampler.stop import StopFlag
from sampler.target.process import TargetProcess


class PtraceBackend:
    name: ClassVar[str] = "ptrace"
    capabilities: ClassVar[Capabilities] = Capabilities(
        stops_all_threads=False, languages=("c", "c++", "rust", "go"))

    def __init__(self, config: SessionConfig, modules: Modules, is_go: bool = False) -> None:
        self.config = config
        self.modules = modules
        place = resolve(modules, config.location) if config.location is not None else None
        self.scope = Scope(config, modules, place, is_go)
        """What the expressions' names mean at the breakpoint (scope.py)."""
        self.place = place
        self.address = place.address if place is not None else None
        """Run-time address of the breakpoint (None: zero-stop reads)."""
        self.memory: Memory | None = None
        self.tracer: Tracer | None = None
        self.guardian: Guardian | None = None
        self._learnt: list[list[list[Step]]] | None = None
        """How the first hit's reads could have come about, for the second to confirm."""
        self._plans: list[ReadPlan | None] | None = None
        """The reads a hit needs, per expression, learnt at the first two hits (plan.py);
        None for an expression evaluated in full at every hit."""
        self._merged: ReadPlan | None = None
        """Every plan's reads and the thread column's as one plan (one system call per level)."""
        self._warm: Hit | None = None
        self._released = 0
        """Forked children let go clean (for the summary)."""
        self._unsure = 0
        """Steps over the breakpoint while a thread could not be held (for the summary)."""
        self._vfork_windows = 0
        """Times the breakpoint was out for an untraced vfork child (for the summary)."""
        self._runner: Callable[[object], Snapshot] | None = None
        """The merged plan made for the hot path (Tracer.catch), when every expression has a plan."""

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess) -> PtraceBackend:
        say = notice.quiet if config.quiet else notice.say
        modules = Modules(target.pid, DebugFinder(target.pid, config.debug_dirs, say, notice.say),
                          config.symbols_file)
        try:
            return cls(config, modules, target.is_go)
        except BaseException:
            modules.close()
            raise

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        zero_stop = self.address is None
        self.memory = Memory(self.config.pid, writable=not zero_stop)
        self.scope.check()  # without --at every name must be a global: others refused now
        self.config = self.scope.config  # names the short form rewrote
        if zero_stop:
            if self.scope.is_go:
                self.scope.prepare_go(self.memory.read)
            self._evaluate(None)
            return
        self._check_instruction()
        if self.scope.is_go:
            self.scope.prepare_go(self.memory.read)
        # what the DWARF parse left behind: collected now, and frozen so that no collection
        # of those objects falls inside a pause
        gc.collect()
        gc.freeze()
        journal = Journal(self.config.pid)
        if self.config.guardian:
            self.guardian = Guardian(PatchRescue(self.config.pid))
        self.tracer = Tracer(self.config.pid, self.memory, journal, self.guardian)
        self.tracer.seize()

    def _check_instruction(self) -> None:
        """Refuse a breakpoint address that does not start an instruction of its function
        (a corrupted line table, a wrong *ADDR): an int3 there would change the program."""
        assert self.address is not None and self.memory is not None
        where, address = self.config.location, self.address
        module = self.place.module if self.place is not None else None
        start = module.function_start(address - module.bias) if module is not None else None
        if module is None or start is None:
            raise LocationNotFound(f"--at {where}: cannot tell whether {address:#x} starts an instruction "
                                   "(no symbol or unwind entry of a loaded file covers it); no breakpoint "
                                   "was written", "give a function name, or an address inside a known function")
        begin = start + module.bias
        if address - begin + 16 > MAX_FUNCTION:
            raise LocationNotFound(f"--at {where}: {address:#x} is over 1 MiB past the start of its function "
                                   f"at {begin:#x}; no breakpoint was written", "give a function name")
        try:
            code = self.memory.read(begin, address - begin + 16)
        except UnreadableMemory as e:
            raise LocationNotFound(f"--at {where}: the code at {begin:#x} cannot be read ({e})") from None
        if not starts_instruction(code, begin, address):
            raise LocationNotFound(f"--at {where}: {address:#x} is not the start of an instruction (decoded "
                                   f"from its function at {begin:#x}); no breakpoint was written",
                                   "give the address of an instruction (objdump -d)" if where and
                                   where.lstrip().startswith("*") else "the debug info's line table may be "
                                   "corrupted: give a function name, another line, or *ADDR of an instruction")

    def sample(self, stop: StopFlag) -> Reading:
        if self.tracer is None or self.address is None:
            values, errors = self._evaluate(None)
            if errors:  # reads fail once it is gone
                assert self.memory is not None
                self.memory.check_alive()
            return Reading(values, error="; ".join(errors))
        tracer, address = self.tracer, self.address
        runner = self._runner
        if runner is not None and self._warm is not None:
            tracer.warm(runner, self._warm)
        tracer.arm(address)  # journaled at the first sample (fsynced): not counted in wait_us
        armed = time.monotonic()
        deadline = armed + self.config.hit_timeout_s
        if runner is not None:  # the hot path: only the plan's reads while the thread waits
            caught = None
            try:
                caught = tracer.catch(address, deadline, stop, runner)
            finally:
                if caught is None:
                    tracer.disarm(address)
            if caught is None:
                return self._missed(stop, armed)
            self._warm = caught[0]
            return self._reading(caught[0], armed, [None] * len(self.config.expressions), caught[1])
        hit = None
        try:
            hit = tracer.wait_for_hit(deadline, stop)
        finally:
            tracer.disarm(address)  # the byte goes back before the thread does
            if hit is not None:
                tracer.rewind(hit)  # and the thread onto it, before anything else is read
        if hit is None:
            return self._missed(stop, armed)
        return self._read_hit(hit, armed, tracer.resume)

    def _missed(self, stop: StopFlag, armed: float) -> Reading:
        return Reading((None,) * len(self.config.expressions), wait_us=(time.monotonic() - armed) * 1e6,
                       error=miss(stop, self.config.hit_timeout_s))

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if self.tracer is None or self.address is None:
            raise UsageError("every-hit tracing needs --at")
        tracer = self.tracer
        tracer.arm(self.address)  # stays armed between hits; detach takes it out
        waiting = time.monotonic()
        runner = self._runner
        if runner is not None:
            caught = tracer.catch(self.address, until, stop, runner, keep=True)
            if caught is None:
                return None
            return self._reading(caught[0], waiting, [None] * len(self.config.expressions), caught[1])
        hit = tracer.wait_for_hit(until, stop)
        if hit is None:
            return None
        return self._read_hit(hit, waiting, tracer.step_over)

    def _read_hit(self, hit: Hit, since: float, let_go: Callable[[Hit], None]) -> Reading:
        """The careful way: read at the hit, let the thread go on every way out, then
        evaluate; say how long it was held. The first hit, and the one after a plan missed,
        is evaluated in full while the thread waits, to make the read plans (plan.py); an
        expression whose reads the data chooses (an interface, a C string) is evaluated there
        in full at every hit, and the others from the plans' reads after the thread went on."""
        memory = self.memory
        assert memory is not None
        count = len(self.config.expressions)
        results: list[tuple[Value, str] | None] = [None] * count
        recorders: list[Recorder] = []
        plans, merged = self._plans, self._merged
        try:
            if plans is None or merged is None:
                fixed = self.scope.fixed_ranges()
                recorders = [Recorder(memory.read, hit.registers, fixed) for _ in range(count)]
                for index, recorder in enumerate(recorders):
                    results[index] = self._evaluate_one(hit, index, recorder.read, recorder.branched)
                thread = self._thread_of(hit, memory.read)
            else:
                for index, plan in enumerate(plans[:count]):
                    if plan is None:  # the data chooses its reads: in full, now
                        results[index] = self._evaluate_one(hit, index)
                snapshot = merged.run(hit.registers, memory.read_many)
        finally:
            let_go(hit)
            hit.resumed = hit.resumed or time.monotonic()  # the thread vanished: no CONT
        if plans is None or merged is None:
            self._learn(recorders)
            return self._row(hit, since, results, thread)
        self._warm = hit
        return self._reading(hit, since, results, snapshot)

    def _reading(self, hit: Hit, since: float, results: list[tuple[Value, str] | None],
                 snapshot: Snapshot) -> Reading:
        """After the thread went on: the row, each expression with a plan evaluated against
        the bytes its plan read at the hit."""
        assert self._plans is not None
        for index, plan in enumerate(self._plans[:len(results)]):
            if plan is not None:
                results[index] = self._evaluate_one(hit, index, snapshot.read)
        if snapshot.missed:
            self._plans = self._merged = self._learnt = self._runner = None  # the next two hits in full
        return self._row(hit, since, results, self._thread_of(hit, snapshot.read))

    def _row(self, hit: Hit, since: float, results: list[tuple[Value, str] | None], thread: str) -> Reading:
        values, errors = _joined(self.config.expressions, results)
        return Reading(values, thread=thread, pause_us=(hit.resumed - hit.seen) * 1e6,
                       wait_us=(hit.seen - since) * 1e6, error="; ".join(errors))

    def _learn(self, recorders: list[Recorder]) -> None:
        """Make the read plans from this hit's full evaluation and the one before it (the
        first hit only notes how its reads came about)."""
        found = [recorder.candidates() for recorder in recorders]
        if self._learnt is None:
            self._learnt = found
            return
        made = [recorder.plan(earlier) for recorder, earlier in zip(recorders, self._learnt)]
        if any(plan is None for plan in made):  # the two hits read differently: try again
            self._learnt = found
            return
        self._plans = [None if r.unstable else p for r, p in zip(recorders, made)]
        self._merged = ReadPlan.merged([*(p for p in self._plans if p is not None), self._thread_plan])
        self._learnt = None
        if self.memory is not None and all(plan is not None for plan in self._plans):
            self._runner = self._merged.runner(self.memory)

    @functools.cached_property
    def _thread_plan(self) -> ReadPlan:
        """The thread column's read, whose way is known: goid at R14 + its offset (Go)."""
        if self.scope.goid_offset is None:
            return ReadPlan([])
        return ReadPlan([Step("reg", "r14", 0, self.scope.goid_offset, 8)])

    def _thread_of(self, hit: Hit, read: Read) -> str:
        """The thread column: for Go, the goroutine id (as Delve gives it), read from the
        current g (R14 under Go's register ABI); else the OS thread id."""
        if self.scope.goid_offset is not None:
            try:
                g = int(hit.registers.r14)
                return str(int.from_bytes(read(g + self.scope.goid_offset, 8), "little"))
            except (UnreadableMemory, PlanMiss):
                pass  # not on a goroutine's stack (a cgo or runtime thread): the OS thread id
        return str(hit.tid)

    def idle(self, seconds: float, stop: StopFlag) -> None:
        if self.tracer is None:
            stop.wait(seconds)
        else:
            self.tracer.serve_until(time.monotonic() + seconds, stop)

    def notes(self) -> list[str]:
        said = []
        if self._released:
            said.append(f"{self._released} child process(es) the target forked were let go with "
                        "sampler's breakpoints taken out of their copy of its memory")
        if self._unsure:
            said.append(f"in {self._unsure} step(s) over the breakpoint a thread of the target could not be "
                        "held: calls it made then may have been missed (at most one each)")
        if self._vfork_windows and self.config.every_hit:
            said.append(f"the breakpoint was out {self._vfork_windows} time(s) while a vfork child ran untraced "
                        "(sampler lacks CAP_SYS_PTRACE, and a traced exec would lose its set-user-ID): calls "
                        "other threads made then may have been missed")
        return said

    def detach(self) -> None:
        try:
            if self.tracer is not None:
                tracer, self.tracer = self.tracer, None
                try:
                    tracer.detach()
                finally:
                    self._released, self._unsure = tracer.children.released, tracer.unsure
                    self._vfork_windows = tracer.vfork_windows
            if self.guardian is not None:  # only once every byte is back
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()
        finally:
            if self.memory is not None:
                self.memory.close()
                self.memory = None
            self.modules.close()

    # -- evaluation ---------------------------------------------------------------

    def _evaluate(self, hit: Hit | None, read: Read | None = None) -> tuple[tuple[Value, ...], list[str]]:
        """Every expression at the hit (None: globals only), reading with ``read`` (the
        target's memory unless given)."""
        results = [self._evaluate_one(hit, index, read) for index in range(len(self.config.expressions))]
        return _joined(self.config.expressions, results)

    def _evaluate_one(self, hit: Hit | None, index: int, read: Read | None = None,
                      on_branch: Callable[[], None] | None = None) -> tuple[Value, str]:
        assert self.memory is not None
        return self.scope.evaluate(hit, index, read or self.memory.read, on_branch)



def _joined(expressions: Sequence[Expression], results: Sequence[tuple[Value, str] | None]
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
