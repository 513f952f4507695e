"""The ptrace backend: breakpoints where only the hitting thread stops, or no stop at all.

With ``--at``: per sample, write int3 at the location, wait for the first thread
to hit it, read what the expressions need, put the byte back, rewind that thread
and let it go. Without ``--at`` every name must be a global, and nothing stops:
values are read from /proc/PID/mem while the target runs (zero-stop reads).

A location may be several breakpoints (a function and its compiler clones), and a run
several locations (probes): each breakpoint is a site (site.py). Sampling, each tick
samples every probe in turn, arming all of that probe's sites and taking the first hit;
tracing, every site stays armed.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import os
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from sampler import notice
from sampler.backends.base import Note
from sampler.backends.cycle import miss
from sampler.backends.ptrace.inprocess import Inprocess, Plan, Read, plan
from sampler.backends.ptrace.latency import Latency, names_retval, timed_notes
from sampler.backends.ptrace.parked import Parked
from sampler.backends.ptrace.pylatency import PyLatency
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.backends.ptrace.site import Site
from sampler.backends.ptrace.stackcopy import StackCopier
from sampler.backends.ptrace.timedprobes import LAG_S, TimedProbes
from sampler.config import Probe, SessionConfig
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.locate import Place, names_function, ptrace_only, resolve_all
from sampler.debuginfo.modules import Modules
from sampler.errors import DebuggerError, LocationNotFound, ProcessNotFound, SamplerError, UsageError
from sampler.evaluation.plan import ReadPlan, Snapshot
from sampler.evaluation.scope import Scope
from sampler.inprocess.pyfilters import chain as python_chain
from sampler.inprocess.reads import Layout, Unfit
from sampler.inprocess.relocate import Displaced
from sampler.inprocess.trampoline import Chain
from sampler.language.expr import Expression, ustack_depth
from sampler.places import is_python
from sampler.probes.columns import value_columns
from sampler.process.consistent import BUDGET_S, Moment, Torn
from sampler.process.guard import TIMEOUT_S, Guard
from sampler.process.instructions import MAX_FUNCTION, starts_instruction
from sampler.process.memory import Memory, MemoryHang
from sampler.process.reads import UnreadableMemory
from sampler.process.router import Router
from sampler.process.stepover import HOLD_ALL_TIMEOUT_S, NotHeld
from sampler.process.tasks import PTRACE_EVENT_STOP, Hit
from sampler.process.tracer import DETACH_TIMEOUT_S, Tracer
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
from sampler.sample import Bulk, Reading
from sampler.stop import StopFlag
from sampler.target import permission, procfs
from sampler.target.process import TargetProcess

if TYPE_CHECKING:  # numpy's rows, imported at a reading probe's first records (never in a run without one)
    from sampler.backends.ptrace.readrows import Pending, Rows

DRAIN_S = 0.01
"""How often the in-process probes' ring is read while nothing else happens: 65,536 records in 10 ms
is 6.5 million calls a second before one is dropped."""
PROMOTE_HOLD_S = 0.05
"""How long the threads may take to stop for a learning site's jump: a vfork's parent does not stop
until its child execs (forker: a hold of 2 s stalled it, the row came after the run's end); the site
is tried again after its next hit, PROMOTE_TRIES times."""
PROMOTE_TRIES = 20
SERVE_S = 0.0005
"""How long a thread's stop (a signal) may wait at most while in-process rows are written."""


SECCOMP = ("the process has a seccomp filter: {what} system call (process_vm_readv) could be refused, or kill "
           "the process")
"""Why a probe that reads in the target does not go in where a seccomp filter is."""

class PtraceBackend:
    def __init__(self, config: SessionConfig, modules: Modules, is_go: bool = False,
                 company: Company | None = None) -> None:
        self.config = config
        self.company = company
        """In a run of many processes (fleet.py): what it shares with the others."""
        self.router: Router | None = company.router if company is not None else None
        self.closes_modules = company is None
        """False in a run of many, where processes of one program share their modules."""
        self.is_go = is_go
        self.modules = modules
        probes = config.probe_list()
        placed = [(probe, _python_places(modules, config.pid, probe.location, config.quiet)
                   if is_python(probe.location)
                   else resolve_all(modules, probe.location, config.max_probes)) for probe in probes]
        self.probe_column = len(probes) > 1 or any(len(places) > 1 for _, places in placed)
        """Rows say which probe and site they came from (a 'probe' column first)."""
        offset = 1 if self.probe_column else 0
        width = offset + len(config.expressions)
        columns = {e.name: offset + index for index, e in enumerate(config.expressions)}
        timed = config.timing is not None
        at_return: dict[int, list[tuple[int, Expression]]] = {}
        """--latency: each probe's expressions that name retval (read at the return), with their slot."""
        if timed:
            width += 1  # latency_us, last
        self.probes: list[list[Site]] = []
        """The sites of each probe, in the order of the --at options."""
        self.stacks = StackCopier(config.pid, modules) \
            if any(ustack_depth(e.tree) is not None for e in config.expressions) else None
        """What reads the stack of a hit, when an expression is ``ustack``."""
        for number, (probe, places) in enumerate(placed):
            at_entry = tuple(e for e in probe.expressions if not names_retval(e))
            at_return[number] = [(columns[e.name], e) for e in probe.expressions if names_retval(e)]
            scoped = dataclasses.replace(config, location=probe.location, expressions=at_entry, probes=())
            slots = [columns[e.name] for e in at_entry]
            self.probes.append([Site(Scope(scoped, modules, place, is_go),
                                     _label(probe, place, len(places)) if self.probe_column else "", slots, width,
                                     self.stacks)
                                for place in places])
        labels = Counter(site.label for sites in self.probes for site in sites)
        for sites in self.probes:
            for site in sites:
                if labels[site.label] > 1 and site.address is not None:  # two static functions of one name
                    site.label += f" at {site.address:#x}"
        if not probes:  # zero-stop reads: one site with no place
            self.probes.append([Site(Scope(config, modules, None, is_go), "", range(len(config.expressions)),
                                     width)])
        self.sites = [site for sites in self.probes for site in sites]
        self.per_tick = len(self.probes)
        """Samples per tick: one of each probe."""
        self.columns = value_columns(config.expressions, self.probe_column, timed)
        """The value columns of its readings (the Backend interface)."""
        self.latency: Latency | None = None
        """--latency and --to: the open calls, and where they end (latency.py)."""
        python = [site for site in self.sites if site.python is not None]
        if timed and python:
            if any(at_return.values()) or len(python) < len(self.sites) or len(self.probes) > 1:
                raise UsageError("--latency of a Python function: one --at py:..., and no retval yet",
                                 "e.g. sampler trace --pid P --at py:app.handle --latency")
            self.latency = PyLatency(width - 1, python)
        elif timed and probes:
            self.latency = Latency(width - 1, {site: at_return[number] for number, sites in enumerate(self.probes)
                                               for site in sites}, is_go, config.latency_to is not None)
        self.timed: TimedProbes | None = TimedProbes(self.latency, config, modules, is_go) \
            if self.latency is not None and config.probe_kind != "int3" else None
        """--latency with in-process probes: the sites timed in the target (timedprobes.py)."""
        if config.probe_kind != "int3" and probes and (config.every_hit or python):
            import numpy  # noqa: F401  # in-process probes' records: loaded before the target is touched (a
            # first import at a probe's promotion, 0.1 s, kept the threads at its int3 waiting: test_budget)
        self._at: dict[int, Site] = {}
        """Each breakpoint address's site."""
        self._turn = 0
        """The probe the next sample is of."""
        self.memory: Memory | None = None
        self.zero_stop_guard = Guard(config.pid)
        """What makes the zero-stop reads, TIMEOUT_S at most a row (guard.py)."""
        self.moment: Moment | None = None
        """What makes each zero-stop row's reads agree (consistent.py)."""
        self.tracer: Tracer | None = None
        self.guardian: Guardian | None = None
        self.tally = Tally()
        """What the summary says, counted at detach."""
        self.trapped: list[Site] = self.sites
        """The sites with an int3 (every-hit mode: those without an in-process probe)."""
        self.inprocess: Inprocess[Site] | None = None
        self._stopped = False
        """The process was stopped (SIGSTOP) when sampler came: no jump goes in (its threads must run)."""
        self._serve_at = 0.0
        """When the tracer's events are next served while in-process rows go out."""
        """The in-process probes (trace --probe auto|inprocess), once placed."""
        self._placed = False
        self._rows: deque[tuple[Site | None, Reading | Pending]] = deque()
        """In-process probes' rows read out of their ring (with their site), not yet handed over; a
        reading probe's evaluated as it is handed over (a drain holds thousands)."""
        self._hold_timeout_s = HOLD_ALL_TIMEOUT_S
        """How long every thread may take to stop for a jump (shorter while a site is promoted)."""
        self._promotions: dict[int, int] = {}
        """Tries of each learning site's promotion that found a thread that would not stop."""
        self._parked: Parked | None = None
        """Go: the goroutines, looked at for returns into a jump's bytes (parked.py)."""
        self._readers: dict[int, Rows] = {}
        """Each reading probe's rows (by its site's id)."""
        self._counting_until = 0.0
        """--max-overhead: the in-process probes only count until then (monotonic; 0: they record)."""
        self._learning: list[Site] = []
        """Sites whose in-process probe reads: an int3 until their first hits make their read plan."""

    @property
    def nothing_stops(self) -> bool:
        """Every site has an in-process probe: no thread of the target ever waits for sampler (the
        session then lets a slow reader of the rows slow it down: the ring counts what it drops)."""
        return self.inprocess is not None and not self._stops_anywhere()

    def _stops_anywhere(self) -> bool:
        """An int3 is left: a site's, or (--latency) a return's that took no in-process probe (its hits
        must be served as hits: the nothing-stops path would resume them onto their int3 again and again)."""
        return bool(self.trapped) or (self.latency is not None and bool(self.latency.ends))

    @property
    def address(self) -> int | None:
        """The first site's breakpoint address (None: zero-stop reads)."""
        return self.sites[0].address

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess, alike: Modules | None = None,
               company: Company | None = None) -> PtraceBackend:
        """``alike``: the modules of another process of the run, used as they are when this one
        maps the same files at the same addresses (read once for a server's workers)."""
        if alike is not None and alike.mapped_alike(target.pid):
            return cls(config, alike, target.is_go, company)
        say = notice.quiet if config.quiet else notice.say
        modules = Modules(target.pid, DebugFinder(target.pid, config.debug_dirs, say, notice.say),
                          config.symbols_file)
        try:
            return cls(config, modules, target.is_go, company)
        except BaseException:
            modules.close()
            raise

    # -- the Backend interface -------------------------------------------------

    def begin_tick(self) -> int:
        return self.per_tick

    def attach(self, forked: bool = False) -> None:
        """``forked``: the process is a child a traced process just forked, traced and stopped
        already (--follow-forks): taken over, not seized."""
        zero_stop = self.address is None
        self.memory = Memory(self.config.pid, writable=not zero_stop)
        for site in self.sites:
            site.scope.check()  # without --at every name must be a global: others refused now
        if zero_stop:
            site, memory = self.sites[0], self.memory
            self.zero_stop_guard.on_hang = memory.mark_hung
            self.moment = Moment(memory)
            if site.scope.is_go:
                site.scope.prepare_go(self.memory.read)
            site.scope.prepare_python(self.memory.read)
            try:
                self.zero_stop_guard.call(lambda: site.evaluate(memory, None))
            except MemoryHang:
                pass  # the rows say it
            return
        for site in self.sites:
            assert site.address is not None
            self._check_instruction(site)
            if site.scope.is_go:
                site.scope.prepare_go(self.memory.read)
            site.scope.prepare_python(self.memory.read)
            self._at[site.address] = site
        if len(self._at) < len(self.sites):
            raise UsageError("two --at give the same breakpoint address", "give each place once")
        if self.latency is not None:
            self.latency.find_ends(self.config, self.modules, self._at, self._check_instruction)
        if self.stacks is not None:
            self.stacks.refresh(self.memory)  # the modules' code mapped now, before any thread waits
            self.stacks.python(self.memory)  # (a CPython's ustack is Python too: found before any hit)
        if not forked:  # (a forked child's parent waits at its fork event meanwhile)
            # what the DWARF parse left behind: collected now, and frozen so that no collection
            # of those objects falls inside a pause
            gc.collect()
            gc.freeze()
        self._refuse_before_seizing()
        journal = Journal(self.config.pid)
        guardian: Guardian | Ward | None = None
        if self.company is not None and self.company.guardian is not None:
            guardian = Ward(self.company.guardian, self.config.pid)
        elif self.config.guardian and self.company is None:
            guardian = self.guardian = Guardian(PatchRescue(self.config.pid, self.memory.fd))
        adopt = self.company.adopt if self.company is not None else None
        self.tracer = Tracer(self.config.pid, self.memory, journal, guardian, go=self.is_go, router=self.router,
                             switches=self.config.switches, adopt=partial(adopt, self) if adopt is not None else None)
        if not forked:  # (stopped by SIGSTOP, seen before sampler's own stops can look alike: "t")
            self._stopped = any(procfs.thread_state(self.config.pid, tid) == "T"
                                for tid in procfs.tasks(self.config.pid))
        # counted in before the threads are seized: a child forked before that is none of the run's, one
        # forked after has the count in its copy (taken off as it is let go: children.py)
        self._count_in_semaphores()
        try:
            self.tracer.take_over() if forked else self.tracer.seize()
        except BaseException:
            self.tracer.probes.count_out_all()
            raise

    def _count_in_semaphores(self) -> None:
        """A USDT probe with a semaphore fires only while it is non-zero: sampler counts itself in
        (semaphores.py), once per semaphore, for the whole run."""
        assert self.tracer is not None
        ends = self.latency.end_places if self.latency is not None else []
        mappings: list[procfs.Mapping] | None = None
        for label, place in [(f"--at {site.label or self.config.location}", site.place) for site in self.sites] + \
                [(f"--to {self.config.latency_to}", place) for place in ends]:
            if place is None or place.usdt is None or not place.usdt.semaphore or place.module is None:
                continue
            address = place.usdt.semaphore + place.module.bias
            mappings = mappings if mappings is not None else procfs.maps(self.config.pid)
            mapping = next((m for m in mappings if m.start <= address < m.end - 1), None)
            if mapping is None or mapping.path != place.module.path or "w" not in mapping.perms:
                why = "it lies in no writable mapping of its own file"  # (a note's address is the target's word)
            else:
                why = self.tracer.probes.count_in(address)
            if why:
                notice.say(f"{label}: its semaphore at {address:#x} is not counted in ({why}): the probe "
                           "fires only while another reader counts on it")

    def _check_instruction(self, site: Site) -> None:
        """Refuse a breakpoint address that does not start an instruction of its function
        (a corrupted line table, a wrong *ADDR): an int3 there would change the program."""
        assert site.address is not None and self.memory is not None
        where, address = site.scope.config.location, site.address
        module = site.place.module if site.place is not None else None
        start = module.function_start(address - module.bias) if module is not None else None
        if module is None or start is None:
            raise LocationNotFound(f"--at {where}: cannot tell whether {address:#x} starts an instruction "
                                   "(no symbol or unwind entry of a loaded file covers it); no breakpoint "
                                   "was written", "give a function name, an address inside a known function, or "
                                   "an address as the program's file has it (objdump -d, nm) as MODULE:0xADDR, "
                                   "e.g. nginx:0x4e03a")
        begin = start + module.bias
        if address - begin + 16 > MAX_FUNCTION:
            raise LocationNotFound(f"--at {where}: {address:#x} is over 1 MiB past the start of its function "
                                   f"at {begin:#x}; no breakpoint was written", "give a function name")
        try:
            code = self.memory.read(begin, address - begin + 16)
        except UnreadableMemory as e:
            raise LocationNotFound(f"--at {where}: the code at {begin:#x} cannot be read ({e})") from None
        if code[address - begin] == 0xCC and not self._own_int3(address) and \
                module.file.byte_at(address - module.bias) != 0xCC:
            raise LocationNotFound(f"--at {where}: an int3 is at {address:#x} already, not sampler's: another "
                                   "tool's breakpoint (a kernel uprobe of bpftrace or perf probe, a debugger's) takes "
                                   "the hits there and sampler would see none; no breakpoint was written",
                                   "stop the other tool, or give a place past it (--at '*ADDR' of a later "
                                   "instruction, or FILE:LINE); one left by a killed debugger: sampler repair "
                                   "--pid PID --code-from-file puts the file's byte back")
        if not starts_instruction(code, begin, address):
            raise LocationNotFound(f"--at {where}: {address:#x} is not the start of an instruction (decoded "
                                   f"from its function at {begin:#x}); no breakpoint was written",
                                   "give the address of an instruction (objdump -d)" if where and
                                   (where.lstrip().startswith("*") or _by_address(where)) else
                                   "the debug info's line table may be "
                                   "corrupted: give a function name, another line, or *ADDR of an instruction")

    def _own_int3(self, address: int) -> bool:
        """The int3 at ``address`` is one sampler knows (a forked child's copy of its own)."""
        return bool(self.tracer is not None and address in self.tracer.patches)

    def sample(self, stop: StopFlag) -> Reading:
        if self.tracer is None or self.address is None:
            return self.read_globals()
        turn = self.begin_turn()
        reading = self.take_turn(turn, turn.armed + self.config.hit_timeout_s, stop)
        return reading if reading is not None else self.end_turn(turn, stop)

    def read_globals(self) -> Reading:
        """Zero-stop reads: nothing stops (a read that does not return in time is the row's error)."""
        memory, moment = self.memory, self.moment
        assert memory is not None and moment is not None
        site = self.sites[0]
        try:
            values, errors = self.zero_stop_guard.call(
                lambda: moment.read(lambda read: site.evaluate(memory, None, read)))
        except (MemoryHang, Torn) as e:
            return Reading(site.missed(str(e), 0.0).values, error="; ".join(
                f"{expression.name}: {e}" for expression in site.expressions))
        if errors:  # reads fail once it is gone
            memory.check_alive()
        return Reading(values, error="; ".join(errors))

    # a sample in three steps, for a run of many processes (fleet.py) that waits for all at once

    def begin_turn(self) -> Turn:
        """Arm the next probe's breakpoints."""
        tracer = self.tracer
        assert tracer is not None
        sites = self.probes[self._turn]
        self._turn = (self._turn + 1) % len(self.probes)
        holds = _holds(sites)
        if holds is not None:
            for site in sites:
                if site.runner is not None and site.warm is not None:
                    tracer.warm(site.runner, site.warm)
        if not self._placed and any(site.python is not None for site in self.sites):
            self._placed = True
            self._put_inprocess()  # (a Python probe's places: the test in the target, its int3 armed for each turn)
        for site in sites:
            tracer.arm(site.armed_at)  # type: ignore[arg-type]  # journaled at the first sample: not in wait_us
        return Turn(sites, holds, time.monotonic())

    def take_turn(self, turn: Turn, deadline: float, stop: StopFlag) -> Reading | None:
        """Serve the target until a thread hits one of the turn's breakpoints (its reading, the
        breakpoints out) or ``deadline`` (None, the breakpoints still in: a deadline passed
        already only serves the events there are)."""
        tracer, memory, sites = self.tracer, self.memory, turn.sites
        assert tracer is not None and memory is not None
        if turn.holds is not None:  # the hot path: only the plans' reads while the thread waits
            try:
                caught = tracer.catch(turn.holds, deadline, stop)
            except BaseException:
                self._disarm(sites)
                raise
            if caught is None:
                return None
            self._disarm(sites)  # the hit one's byte is back already
            tracer.let_run()
            caught_hit, held = caught
            snapshot = Snapshot(held) if isinstance(held, MemoryHang) else held
            site = self._at[caught_hit.address]
            site.warm = caught_hit
            return site.reading(memory, caught_hit, turn.armed, [None] * len(site.expressions), snapshot)
        try:
            while True:
                hit = tracer.wait_for_hit(deadline, stop)
                if hit is None or not self._other_python_call(hit):
                    break
        except BaseException:
            self._disarm(sites)
            raise
        if hit is None:
            return None
        try:
            self._disarm(sites)  # the bytes go back before the thread does
        finally:
            tracer.rewind(hit)  # and the thread onto its instruction, before anything else is read
        return self._at[hit.address].read_hit(memory, hit, turn.armed, self._resume, tracer.guard)

    def end_turn(self, turn: Turn, stop: StopFlag) -> Reading:
        """No hit by the deadline: the breakpoints out, a miss."""
        self._disarm(turn.sites)
        return self._missed(turn.sites, stop, turn.armed)

    def arm_all(self) -> None:
        """Tracing: every breakpoint in (fleet.py; trace() does it itself)."""
        assert self.tracer is not None
        for address in self.latency.ends if self.latency is not None else ():  # (a call seen to start is
            self.tracer.arm(address)                                             # seen to end)
        for site in self.sites:
            self.tracer.arm(site.armed_at)  # type: ignore[arg-type]

    def disarm_all(self) -> None:
        self._disarm(self.sites)
        self._rest_returns()

    def _rest_returns(self) -> None:
        """--max-overhead's rest with --latency: the int3s where calls end go too (a return's stop would
        cost as much as an entry's), and the calls under way lose their end (counted)."""
        if self.latency is not None and self.tracer is not None:
            for address in self.latency.ends:
                self.tracer.disarm(address)
            self.latency.rested(time.monotonic())

    def _disarm(self, sites: list[Site]) -> None:
        assert self.tracer is not None
        for site in sites:
            self.tracer.disarm(site.armed_at)  # type: ignore[arg-type]

    def _missed(self, sites: list[Site], stop: StopFlag, armed: float) -> Reading:
        return sites[0].missed(miss(stop, self.config.hit_timeout_s), (time.monotonic() - armed) * 1e6)

    def _resume(self, hit: Hit) -> None:
        assert self.tracer is not None
        self.tracer.resume(hit)
        self.tracer.let_run()

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if self.tracer is None or self.address is None:
            raise UsageError("every-hit tracing needs --at")
        tracer, memory = self.tracer, self.memory
        assert memory is not None
        if not self._placed:
            self._placed = True
            self._put_inprocess()
        self._end_rest()
        if self._rows:
            now = time.monotonic()
            if self.inprocess is not None and now >= self._serve_at:
                # the threads' own stops (a signal: Go sends SIGURG to preempt) served while rows
                # queued from the ring are written: ringbuf-go, its threads left stopped at them while
                # 65,536 rows went out, kept 1-4 % of its reads/s
                self._serve_at = now + SERVE_S
                tracer.serve_until(now, stop)
            return self._next_row()
        if self.inprocess is not None:
            if not self._stops_anywhere():  # nothing stops: the ring is read while the tracer serves its events
                while True:
                    self._drain()
                    if self._rows:
                        return self._next_row()
                    now = time.monotonic()
                    if now >= until or stop.is_set():
                        return None
                    tracer.serve_until(min(until, now + DRAIN_S), stop)
                    self._end_rest()
            until = min(until, time.monotonic() + DRAIN_S)
            reading = self._trace_int3(stop, until)
            self._drain()
            if reading is not None:
                self._rows.append((None, reading))
            if self._learning:
                self._promote()
            return self._next_row() if self._rows else None
        reading = self._trace_int3(stop, until)
        if self._learning:
            self._promote()
        return reading

    def _trace_int3(self, stop: StopFlag, until: float) -> Reading | None:
        tracer, memory = self.tracer, self.memory
        assert tracer is not None and memory is not None
        # --max-overhead: while a rest is on, only a site still learning its read plan is armed (a rest that
        # began while every site was learning is on still when one becomes an int3 of its own: armed then, it
        # stopped the target at every call until the rest's end, 97 % of stall's time by its clock)
        resting = time.monotonic() < self._counting_until
        if self.latency is not None and not resting:  # (the ends first: a call seen to start must be seen to end)
            for address in self.latency.ends:
                tracer.arm(address)
        for site in self.trapped:
            if not resting or site in self._learning:
                tracer.arm(site.armed_at)  # type: ignore[arg-type]  # stays armed between hits; detach takes it out
            elif site.armed_at in tracer.probes.armed:
                # it was learning when the rest began (so the rest left it in), and is an int3 of its own now
                # (its jump could not go in): it rests too (left in, it stopped the target at every call
                # until the rest's end: 449 calls in 0.16 s, 97 % of stall's time by its clock, test_budget)
                tracer.disarm(site.armed_at)
        waiting = time.monotonic()
        if self.latency is not None:
            hit = tracer.wait_for_hit(until, stop)
            if hit is None:
                return None
            row = self.latency.hit(hit, self._at.get(hit.address), memory, waiting, self._step_over, tracer.guard)
            self._rows.extend(self.latency.extra)  # (a tail call's chain: the other calls it ended)
            self.latency.extra.clear()
            return row
        holds = _holds(self.trapped)
        if holds is not None:
            caught = tracer.catch(holds, until, stop, keep=True)
            if caught is None:
                return None
            if self.config.max_overhead is not None:
                # the hit thread runs before the row is made: it waited 430-540 us a hit behind the
                # worker without this, 190-210 us with it (bench/stall.py's target, 1 %); at full
                # speed (no budget) the pause between hits costs the rate more than it saves
                tracer.let_run()
            caught_hit, held = caught
            snapshot = Snapshot(held) if isinstance(held, MemoryHang) else held
            site = self._at[caught_hit.address]
            return site.reading(memory, caught_hit, waiting, [None] * len(site.expressions), snapshot)
        hit = tracer.wait_for_hit(until, stop)
        if hit is None:
            return None
        if self._other_python_call(hit):
            return None
        return self._at[hit.address].read_hit(memory, hit, waiting, self._step_over, tracer.guard)

    def _other_python_call(self, hit: Hit) -> bool:
        """A Python probe's hit of another function's frame: let go at once (its breakpoint stays in), no
        row."""
        site = self._at[hit.address]
        if site.python is None or self.memory is None or site.python_hit(hit, self.memory):
            return False
        self._step_over(hit)
        return True

    # -- in-process probes (trace --probe auto|inprocess) ----------------------------------------

    def _put_inprocess(self) -> None:
        """At the first trace(): each site's in-process probe where --probe wants one and the site
        takes it; the others keep their int3. One line says which each site got."""
        kind, tracer, memory = self.config.probe_kind, self.tracer, self.memory
        if kind == "int3" or tracer is None or memory is None:
            return
        say = notice.quiet if self.config.quiet else notice.say
        wanted: list[tuple[Site, Displaced, bool]] = []
        said: list[str] = []
        layouts: dict[Site, Layout] = {}
        timed: dict[Site, list[Site]] = {}
        filters: dict[Site, Chain] = {}
        clear: Site | None = None
        for site in self.sites:
            if site.python is not None:
                self._python_inprocess(site, wanted, filters, said)
                clear = clear or self._clear_inprocess(site, wanted, filters)
                continue
            if not self.config.every_hit:
                continue  # (attach: a Python probe's places only; the others' int3s are armed for each turn)
            why = self._why_no_inprocess(site)
            planned = None
            if not why and self.latency is not None:
                why = self.timed.why_not(site) if self.timed is not None else "--to's places are int3s"
                if not why and self.timed is not None and site.expressions:  # (learning: its entry's jump is
                    why = self.timed.return_jumps(site, self._program().read)[1]  # placed after, so checked then)
            if not why and site.expressions:  # its reads are learnt at its first hits, by its int3
                self._learning.append(site)
                said.append(f"{self._where(site)}: an int3 for its first hits, then in-process once they show "
                            "what it reads")
                continue
            if not why:
                planned = self._plan(site)  # (a count, or a call timed: at the function's entry)
                why = planned.why_not
            returns: list[tuple[Site, Displaced, Layout]] = []
            if not why and self.timed is not None and planned is not None and planned.displaced is not None:
                taken = (planned.displaced.site, planned.displaced.back)
                returns, why = self.timed.return_jumps(site, self._program().read, taken)
                self.timed.entry_at[id(site)] = planned.displaced.site
            if why:
                self._demanded(site, why)
                if site.python is not None and site is not next(s for s in self.sites if s.python is not None):
                    continue  # (a Python probe's other places: said once, with its first)
                said.append(f"{self._where(site)}: an int3 ({why})")
                continue
            assert planned is not None and planned.displaced is not None
            wanted.append((site, planned.displaced, planned.entry))
            if self.timed is not None:  # the entry and every return, each a probe that records the registers
                layouts[site] = Layout(ReadPlan([]), planned.displaced.site)
                timed[site] = [ret for ret, _, _ in returns]
                for ret, displaced, layout in returns:
                    wanted.append((ret, displaced, False))
                    layouts[ret] = layout
        if wanted:
            inprocess = self._new_inprocess()
            putting = time.monotonic()
            try:
                refused = inprocess.put(wanted, layouts, filters=filters)
            except SamplerError as e:
                inprocess.close()
                if kind == "inprocess":
                    raise
                refused = {site: e.message for site, _, _ in wanted}
            if self.latency is not None:
                self.latency.putting(putting, time.monotonic() - putting)
            placed = [site for site, _, _ in wanted if site not in refused]
            if placed:
                self.inprocess = inprocess
            for site, why in refused.items():
                self._demanded(site, why, DebuggerError)
                said.append(f"{self._where(site)}: an int3 ({why})")
            self._traps(inprocess, [site for site in placed if site in filters and site is not clear], said)
            if clear is not None and clear in placed and isinstance(self.latency, PyLatency):
                trap = next(p.trap for p in inprocess.placed if p.key is clear)
                assert trap is not None
                self.latency.tested_at(trap)
                said.append(f"{self._probe(clear)} --latency: the frame clear's test in-process too "
                            "(only its function's frames stop there)")
            self.trapped = [site for site in self.sites if site not in placed or site in filters]
            said[:0] = [f"{self._where(site)}: in-process (a jump at {displaced.site:#x}; no thread stops)"
                        for site, displaced, _ in wanted if site in placed and site not in layouts
                        and site not in filters]
            for site, ends in timed.items():
                self._timed_placed(site, ends, placed, said.append)
        say("probes: " + "; ".join(said))

    def _python_inprocess(self, site: Site, wanted: list[tuple[Site, Displaced, bool]], filters: dict[Site, Chain],
                          said: list[str]) -> None:
        """A Python probe's place: a filtering probe wanted there (``wanted``, ``filters``), whose test in the
        target lets only its function's calls through to an int3; or why not, said (once for its places)."""
        probe = site.python
        assert probe is not None and site.address is not None
        why = self._why_no_inprocess(site)
        if not why and procfs.seccomp(self.config.pid):
            why = SECCOMP.format(what="the test's")
        chain: Chain | str = why or python_chain(probe, site.address)
        if isinstance(chain, str):
            why = chain
        else:
            planned = self._plan(site, site.address)
            why = planned.why_not
        if why:
            self._demanded(site, why)
            said.append(f"{self._where(site)}: an int3 ({why}: every Python call of the process stops there "
                        "while it is in, a few hundred microseconds each, see docs/cost.md)")
            return
        assert planned.displaced is not None and isinstance(chain, Chain)
        wanted.append((site, planned.displaced, planned.entry))
        filters[site] = chain

    def _clear_inprocess(self, site: Site, wanted: list[tuple[Site, Displaced, bool]], filters: dict[Site, Chain]
                         ) -> Site | None:
        """--latency of a Python function, 3.11 and later: the frame clear's entry tested in the target as the
        frame's start is (the frame in rdi); its key in ``wanted``, a copy of the Python probe's first site (no
        row is its: its stop is one of the latency's ends). None: not wanted, or it keeps its int3."""
        latency, probe = self.latency, site.python
        if not isinstance(latency, PyLatency) or latency.clear_at is None or probe is None or site not in filters \
                or any(key.python is not None for key in filters if key is not site):
            return None  # (once, with the first place of the probe that took its test)
        module = probe.interpreter.module
        span = module.function_span(latency.clear_at - module.bias)
        if span is None:
            return None
        planned = plan(self._program(), span[0] + module.bias, span[1], latency.clear_at)
        if planned.displaced is None:
            return None
        key = copy.copy(site)
        wanted.append((key, planned.displaced, planned.entry))
        filters[key] = Chain("rdi", (probe.code_offset,), probe.code)
        return key

    def _traps(self, inprocess: Inprocess[Site], sites: list[Site], said: list[str]) -> None:
        """The filtering probes placed: each site's int3 goes where its test lets its calls through."""
        if not sites:
            return
        for placed in inprocess.placed:
            if placed.key in sites and placed.trap is not None:
                placed.key.trap = placed.trap
                self._at[placed.trap] = placed.key
        said.append(f"{self._probe(sites[0])}: in-process, at {len(sites)} place(s) of the eval loop: a test in the "
                    "target lets only its function's calls through to an int3 (every other Python call goes on; "
                    "docs/cost.md)")

    def _new_inprocess(self) -> Inprocess[Site]:
        tracer, memory = self.tracer, self.memory
        assert tracer is not None and memory is not None
        parked = self._goroutines().inside if self.is_go else None
        return Inprocess(self.config.pid, memory, tracer.probes, self._hold,
                         lambda seconds: tracer.serve_until(time.monotonic() + seconds, StopFlag()), self.is_go,
                         parked)

    def _promote(self) -> None:
        """Each learning site whose read plan is made: its int3 out, a reading probe in at the same
        address (or why not, said; the int3 stays)."""
        ready = [site for site in self._learning if site.runner is not None and site.merged is not None]
        if not ready or self.tracer is None:
            return
        if self.tracer.sharing or self.tracer.probes.suspended:
            # a vfork child runs in the memory: its parent waits in vfork() and stops for no
            # interrupt until the child execs or exits (forker's hold waited 2 s): after the next hit
            return
        say = notice.quiet if self.config.quiet else notice.say
        for site in ready:
            self._learning.remove(site)
            assert site.merged is not None and site.address is not None
            try:
                layout = Layout(site.merged, site.address)
            except Unfit as e:
                self._not_promoted(site, str(e))
                continue
            planned = self._plan(site, site.address)
            if planned.displaced is None:
                self._not_promoted(site, planned.why_not)
                continue
            inprocess = self.inprocess or self._new_inprocess()
            if self._counting_until and inprocess is not self.inprocess:
                # --max-overhead rests, and this is the process's first probe: it rests too (the rest
                # began with no in-process probe to tell; one put in then read at every call: 97 % of a
                # million-calls-a-second target's time, test_budget)
                inprocess.only_count(True)

            def swap(site: Site, out: bool, tracer: Tracer = self.tracer) -> int | None:  # (threads held: no
                assert site.address is not None                                          # call passes between)
                was = site.address in tracer.probes.armed
                (tracer.disarm if out else tracer.arm)(site.address)
                return site.address if out and was else None
            self._hold_timeout_s = PROMOTE_HOLD_S
            pieces: list[tuple[Site, Displaced, bool]] = [(site, planned.displaced, planned.entry)]
            layouts = {site: layout}
            returns: list[Site] = []
            if self.timed is not None and self.latency is not None:
                assert self.memory is not None
                jumps, why = self.timed.return_jumps(site, self._program().read,
                                                     (planned.displaced.site, planned.displaced.back))
                why = self.timed.why_not(site) or why
                if why:  # (a timed entry without its returns would write rows with no time)
                    self._not_promoted(site, why)
                    continue
                for ret, displaced, ret_layout in jumps:
                    pieces.append((ret, displaced, False))
                    layouts[ret] = ret_layout
                    returns.append(ret)
            putting = time.monotonic()
            try:
                refused = inprocess.put(pieces, layouts, swap)
            except NotHeld as e:  # (a vfork's parent, waiting for its child: after the next hit)
                tries = self._promotions[id(site)] = self._promotions.get(id(site), 0) + 1
                if tries < PROMOTE_TRIES:
                    if self.inprocess is None:
                        inprocess.close()
                    self._learning.append(site)
                    continue
                refused = {site: e.message}
            except SamplerError as e:
                refused = {site: e.message}
            finally:
                self._hold_timeout_s = HOLD_ALL_TIMEOUT_S
                if self.latency is not None:
                    self.latency.putting(putting, time.monotonic() - putting)
            if site in refused:
                if returns and any(ret not in refused for ret in returns):  # (those in place are timed)
                    self.inprocess = inprocess
                    self._timed_placed(site, returns, [s for s, _, _ in pieces if s not in refused], say)
                elif self.inprocess is None:
                    inprocess.close()
                self._not_promoted(site, refused[site])
                continue
            self.inprocess = inprocess
            self.trapped = [s for s in self.trapped if s is not site]
            if returns:
                self._timed_placed(site, returns, [s for s, _, _ in pieces if s not in refused], say)
                continue
            say(f"probes: {self._where(site)}: in-process from now on (its reads learnt at its first hits: a jump "
                f"at {planned.displaced.site:#x}, {len(layout.reads)} read(s) in the target at each call; no thread "
                "stops)")

    def _timed_placed(self, site: Site, returns: list[Site], placed: Sequence[Site], say: Callable[[str], None]
                      ) -> None:
        """--latency in the target: the entry and the returns that took their probes (the others keep their
        int3s, their hits taken in time order with the records), said."""
        assert self.timed is not None
        out = [ret for ret in returns if ret in placed]
        self.timed.placed(site if site in placed else None, out)
        kept = len(returns) - len(out)
        say(f"{self._where(site)} --latency: "
            + ("in-process, clocked in the target (its entry" if site in placed else "an int3 at its entry (")
            + f" and {len(out)} of its {len(returns)} return(s) in-process; no thread stops there)"
            + (f"; {kept} return(s) keep their int3s" if kept else ""))

    def _demanded(self, site: Site, why: str, error: type[SamplerError] = UsageError) -> None:
        """--probe inprocess, and ``site`` cannot take one (``why``): the run ends in one line. ``error``:
        DebuggerError where the target refused it during the run."""
        if self.config.probe_kind == "inprocess":
            raise error(f"--probe inprocess: no in-process probe at {self._where(site)}: {why}",
                        "give --probe auto (an int3 where in-process cannot go), or --probe int3")

    def _not_promoted(self, site: Site, why: str) -> None:
        self._demanded(site, why, DebuggerError)
        say = notice.quiet if self.config.quiet else notice.say
        say(f"probes: {self._where(site)}: an int3 (its reads cannot run in the target: {why})")

    def _goroutines(self) -> Parked:
        if self._parked is None:
            assert self.memory is not None
            self._parked = Parked(self.config.pid, self.modules, self.memory.read)
        return self._parked

    def _refuse_before_seizing(self) -> None:
        """--probe inprocess: what rules a site's in-process probe out and shows in /proc and the program alone
        is refused now, before a thread is seized (the rest, at the first trace())."""
        if self.config.probe_kind != "inprocess" or not self.config.every_hit:
            return
        for site in self.sites:
            why = self._why_not_in_this_process(site) if site.python is None else ""
            if why:
                self._demanded(site, why)

    def _why_not_in_this_process(self, site: Site) -> str:
        """Why a reading probe cannot go in, from the expressions and /proc alone (before anything is seized)."""
        if site.expressions and site.stack_depths:
            return "ustack is read by copying the thread's stack at each hit"
        if site.expressions and procfs.seccomp(self.config.pid):
            return SECCOMP.format(what="an in-process probe's reading")
        if site.expressions and procfs.has_userfaultfd(self.config.pid):
            return "the process uses userfaultfd: a read of a page it serves could wait for good"
        return ""

    def _why_no_inprocess(self, site: Site) -> str:
        if self.is_go and site.expressions and self._goroutines().why_not:  # (a count goes at an entry)
            return f"a goroutine parked inside a jump's bytes could not be seen: {self._goroutines().why_not}"
        why = self._why_not_in_this_process(site)
        if why:
            return why
        if site.expressions and (self.zero_stop_guard.on or (self.tracer is not None and self.tracer.guard.on)):
            return ("the process's mounts hold a FUSE or network file system: a read of a page of its files "
                    "could wait in the kernel for good, and the target's thread with it")
        if self._stopped:
            return "the process is stopped (SIGSTOP): a jump goes in only while its threads run"
        if self.company is not None:
            return "in-process probes trace one process (not --follow-forks, --exe or several) yet"
        return ""

    def _plan(self, site: Site, at: int | None = None) -> Plan:
        """Where the site's jump goes (``at``: there; else a count's own choice)."""
        assert site.address is not None and self.memory is not None
        module = site.place.module if site.place is not None else None
        span = module.function_span(site.address - module.bias) if module is not None else None
        if module is None or span is None:
            return Plan(why_not="no symbol or unwind entry says where its function starts and ends")
        start = span[0] + module.bias
        location = site.scope.config.location or ""
        # a count at a function by name: its entry (every call passes there; the int3 goes past the
        # prologue, where the arguments are read)
        inlined = site.place is not None and site.place.symbol.startswith("inlined in")
        if at is None:
            at = start if names_function(location) and not inlined else site.address
        return plan(self._program(), start, span[1], at)

    def _program(self) -> AsProgram:
        """The process's memory as the program's bytes: sampler's int3s read as the bytes they cover."""
        assert self.memory is not None
        armed = self.tracer.probes.armed if self.tracer is not None else {}
        return AsProgram(self.memory, {address: byte[0] for address, byte in armed.items()})

    def _where(self, site: Site) -> str:
        return self._probe(site) + (f" ({site.address:#x})" if site.address else "")

    def _probe(self, site: Site) -> str:
        """``--at`` and the probe's label (a Python probe's places: one line for them all)."""
        return f"--at {site.label or self.config.location}"

    @contextmanager
    def _hold(self, tids: list[int] | None) -> Iterator[list[int]]:
        """Every thread (or ``tids``) stopped by the tracer, those stopped by its interrupt first
        (the best for an injected system call)."""
        assert self.tracer is not None
        began = time.monotonic()
        held = self.tracer.hold(tids, self._hold_timeout_s)
        try:
            if not held:
                raise DebuggerError(f"no thread of process {self.config.pid} could be held")
            interrupted = [tid for tid, _ in sorted(held, key=lambda h: h[1] >> 16 != PTRACE_EVENT_STOP)]
            # and those stopped already with an event still to serve (a signal's stop: Go's SIGURG
            # comes often): they stay stopped, but may stand inside a jump's bytes or a trampoline
            yield interrupted + [tid for tid in self.tracer.stopped_already() if tid not in interrupted]
        finally:
            self.tracer.let_go(held)
            if self.latency is not None:  # (a call under way meanwhile waited for sampler that long)
                self.latency.held(began, time.monotonic() - began)

    def _drain(self) -> None:
        """The in-process probes' records as rows (in the order their threads took them)."""
        inprocess, tracer = self.inprocess, self.tracer
        if inprocess is None or tracer is None:
            return
        cutoff = time.monotonic() - LAG_S  # (--latency in the target: every record of before then is in)
        drained = inprocess.drain(lambda: sorted(tracer.threads))
        rows = self._rows
        if drained is not None:
            values = {p.number: p.key.counted() for p in inprocess.placed if p.trap is None}
            sites = {p.number: p.key for p in inprocess.placed}
            for number, thread, at in zip(drained.numbers.tolist(), drained.threads, drained.seconds.tolist()):
                rows.append((sites[number], Reading(values[number], thread=thread, at=at)))
        self._rows_of(inprocess.drain_read(lambda: sorted(tracer.threads)))
        if self.latency is not None and self.latency.queued:
            self._rows.extend(self.latency.rows(cutoff))
            if self.timed is not None:
                self.timed.taken_until(cutoff)

    def _rows_of(self, reads: list[Read]) -> None:
        """A reading probe's records as rows (readrows.py): made in bulk, or queued to evaluate one by
        one as they are handed over."""
        timed = self.timed
        for read in reads:
            if timed is not None and timed.owns(read):  # (--latency: into the queue, rows at the returns)
                assert self.memory is not None and self.inprocess is not None and self.inprocess.clock is not None
                timed.ns_per_tick = self.inprocess.clock.ns_per_tick
                site, entry = read.placed.key, id(read.placed.key) in timed.entries
                if entry and not site.expressions:  # (nothing read: the row is its probe column)
                    rows = [Reading(site.counted(), thread=thread, at=at)
                            for thread, at in zip(read.threads, read.seconds.tolist())]
                else:
                    rows = [row if isinstance(row, Reading) else row.reading()
                            for row in self._rows_for(read).of(read)] if entry else []
                timed.take(read, rows, self.memory)
                continue
            self._rows.extend((read.placed.key, row) for row in self._rows_for(read).of(read))

    def trace_bulk(self, stop: StopFlag, until: float) -> list[Reading | Bulk]:
        """As trace() where every site is in-process and the rows are only counted (session.py): the
        records of a drain as Bulks (numpy), those of a reading probe whose values are no columns as
        rows; [] when none came by ``until``."""
        tracer, inprocess = self.tracer, self.inprocess
        assert tracer is not None and inprocess is not None and self.memory is not None
        if self.latency is not None:  # (a row at each return, paired in order: one at a time)
            row = self.trace(stop, until)
            return [row] if row is not None else []
        if self._rows:
            return [self._next_row() for _ in range(len(self._rows))]
        while True:
            out: list[Reading | Bulk] = []
            drained = inprocess.drain(lambda: sorted(tracer.threads))
            if drained is not None:
                for placed in inprocess.placed:
                    if placed.layout is None:
                        mine = drained.numbers == placed.number
                        count = int(mine.sum())
                        if count:
                            threads = [t for t, m in zip(drained.threads, mine.tolist()) if m]
                            out.append(Bulk(count, list(placed.key.counted()), threads))
            for read in inprocess.drain_read(lambda: sorted(tracer.threads)):
                bulk, alone = self._rows_for(read).bulk(read)
                out.extend(alone)
                if bulk is not None:
                    out.append(bulk)
            now = time.monotonic()
            if out or now >= until or stop.is_set():
                return out
            tracer.serve_until(min(until, now + DRAIN_S), stop)

    def _rows_for(self, read: Read) -> Rows:
        """The rows of a reading probe (by its site), made at its first records."""
        site, layout = read.placed.key, read.placed.layout
        assert layout is not None and self.memory is not None
        rows = self._readers.get(id(site))
        if rows is None:
            from sampler.backends.ptrace.readrows import Rows

            rows = self._readers[id(site)] = Rows(site, layout, self.memory)
        return rows

    def _next_row(self) -> Reading:
        _, row = self._rows.popleft()
        return row if isinstance(row, Reading) else row.reading()

    def _take_inprocess_out(self) -> list[str]:
        """At detach, while the tracer holds the threads: every jump out, the counts read; what the
        summary says of them."""
        inprocess = self.inprocess
        if inprocess is None:
            return []
        unwritten = Counter(id(site) for site, _ in self._rows if site is not None)
        self._rows.clear()
        if self.tracer is not None:
            for placed in inprocess.placed:
                if placed.trap is not None:  # (its byte is the nop again before its page can go)
                    self.tracer.disarm(placed.trap)
        try:
            inprocess.take_out()
        except SamplerError as e:
            inprocess.left = (f"the in-process probes' jumps could not be taken out of process {self.config.pid} "
                              f"({e}): they keep counting; sampler repair --pid {self.config.pid} takes them out")
        drained = inprocess.drain()
        read: Counter[int] = Counter()
        for r in inprocess.drain_read():
            read[id(r.placed.key)] += len(r.records)
        said = self._tested(inprocess)
        for placed in inprocess.placed:
            site = placed.key
            if placed.trap is not None:
                continue
            counts = inprocess.counts[placed.number]
            late = unwritten[id(site)] + read[id(site)]
            if drained is not None:
                late += int((drained.numbers == placed.number).sum())
            rows = counts.recorded - late
            line = f"in-process at {self._where(site)}: {counts.hits} call(s), counted in the target; {rows} row(s)"
            if counts.dropped:
                line += f"; {counts.dropped} not recorded (the ring was full: sampler read it too slowly)"
            if counts.only_counted:
                line += (f"; {counts.only_counted} only counted (--max-overhead: the probe rested, "
                         f"{'no read, ' if placed.layout is not None else ''}no record)")
            if late:
                line += f"; {late} recorded after the run's end (not written)"
            own = inprocess.read_ns(placed.number) if placed.layout is not None else None
            if own is not None:
                line += f"; {own / 1e3:.2f} us a recorded call in the probe (clocked in the target)"
            if placed.layout is not None:
                line += " (from the jump on: the calls before it were its int3's rows)"
            said.append(line)
        if self.tracer is not None and self.tracer.shared_children:
            said.append(f"{self.tracer.shared_children} child process(es) ran in the target's memory (vfork, or "
                        "clone with CLONE_VM) during the run: the in-process probes counted the calls they made "
                        "before their exec as the calls of the thread that started them")
        if inprocess.forged:
            said.append(f"{inprocess.forged} record(s) in the in-process probes' ring named no probe of sampler's "
                        "(written there by the target itself): dropped, not rows")
        if inprocess.left:
            said.append(inprocess.left)
        inprocess.close()
        return said

    def _tested(self, inprocess: Inprocess[Site]) -> list[str]:
        """What the filtering probes' tests did (a Python probe's places: one line)."""
        tested = [placed for placed in inprocess.placed if placed.trap is not None and placed.key in self.sites]
        clears = [placed for placed in inprocess.placed if placed.trap is not None and placed.key not in self.sites]
        if not tested:
            return []
        calls = sum(inprocess.counts[placed.number].hits for placed in tested)
        unread = sum(inprocess.counts[placed.number].dropped for placed in tested)
        line = (f"in-process at {self._probe(tested[0].key)}: {calls} Python call(s) tested in the "
                f"target at {len(tested)} place(s) of the eval loop, only its function's stopped")
        if unread:
            line += (f"; {unread} whose frame's code object the test could not read (process_vm_readv failed): "
                     "let go untested, not counted (some may have been its calls)")
        for placed in clears:
            counts = inprocess.counts[placed.number]
            line += f"; {counts.hits} frame clear(s) tested there (--latency's ends)"
            if counts.dropped:
                line += f", {counts.dropped} not readable (let go: a call's end may be missed)"
        return [line]

    def _step_over(self, hit: Hit) -> None:
        assert self.tracer is not None
        self.tracer.step_over(hit)  # (its emulation's memory through the guard)
        if self.config.max_overhead is not None:
            self.tracer.let_run()  # as in trace()'s hot path

    def idle(self, seconds: float, stop: StopFlag) -> None:
        """Between samples (attach), or with the breakpoints out for a while (trace under
        --max-overhead: the next trace() puts them back; an in-process probe only counts meanwhile)."""
        if self.tracer is None:
            stop.wait(seconds)
            return
        if not self.config.every_hit:
            self.tracer.serve_until(time.monotonic() + seconds, stop)
            return
        # a site learning its read plan keeps its int3 (two hits, then its jump goes in: it rests then)
        resting = [site for site in self.trapped if site not in self._learning]
        for site in resting:
            self.tracer.disarm(site.armed_at)  # type: ignore[arg-type]
        if resting or self.inprocess is not None:
            self._rest_returns()
        if self.inprocess is not None:
            self.inprocess.only_count(True)
        self._counting_until = time.monotonic() + seconds
        if not resting:
            return  # (nothing waits: the rows recorded before go on being written, trace() ends the rest)
        self.tracer.serve_until(self._counting_until, stop)
        self._end_rest(force=True)

    def _end_rest(self, force: bool = False) -> None:
        """The in-process probes record and read again once --max-overhead's rest is over."""
        if self._counting_until and (force or time.monotonic() >= self._counting_until):
            self._counting_until = 0.0
            if self.inprocess is not None:
                self.inprocess.only_count(False)

    def probe_time_s(self) -> float:
        """The in-process probes' own time in the target so far (inprocess.py's spent_s); 0 without."""
        return self.inprocess.spent_s() if self.inprocess is not None else 0.0

    def notes(self) -> list[Note]:
        return self.tally.notes(self.config.every_hit)

    @property
    def pids(self) -> list[int]:
        return [self.config.pid]

    def resume_first_stop(self) -> None:
        """--follow-forks: a child taken in (attach(forked=True)) runs its first instruction."""
        assert self.tracer is not None
        self.tracer.resume_first_stop()

    def let_go_at_first_stop(self) -> None:
        """--follow-forks: a child that could not be taken in after all, let go from its first stop
        (no other stop comes to detach at), every byte back, then detached as any."""
        if self.tracer is not None:
            tracer, self.tracer = self.tracer, None
            tracer.let_go_at_first_stop()
        self.detach()

    def detach(self) -> None:
        try:
            self.tally.hangs = self.zero_stop_guard.hangs
            if self.moment is not None:
                self.tally.torn, self.tally.read_again = self.moment.torn, self.moment.again
            inprocess: list[str] = []
            if self.tracer is not None:
                try:
                    if self.timed is not None and self.inprocess is not None:  # (before they go)
                        self.timed.dropped = sum(c.dropped for c in self.inprocess.counts.values())
                    inprocess = self._take_inprocess_out()
                except SamplerError as e:
                    inprocess = [f"the in-process probes: {e}"]
                tracer, self.tracer = self.tracer, None
                try:
                    tracer.detach()
                finally:
                    stats = tracer.stats
                    self.tally = Tally(tracer.children.released, stats.unsure, stats.vfork_windows,
                                       stats.emulated, stats.stepped,
                                       stats.checked if self.config.switches.check_emulation else None,
                                       list(stats.mismatches), tracer.guard.hangs + self.zero_stop_guard.hangs,
                                       len(stats.waiting_in_kernel), len(stats.given_up),
                                       len(stats.left_stepping), inprocess=inprocess,
                                       timed=Counter(self.latency.counts(self.timed.late if self.timed else 0,
                                                                        self.timed.dropped if self.timed else 0))
                                       if self.latency is not None else Counter())
            if self.guardian is not None:  # only once every byte is back
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()
        finally:
            if self.memory is not None:
                self.memory.close()
                self.memory = None
            if self.closes_modules:
                self.modules.close()


@dataclass
class Company:
    """What the processes of a run of many share (fleet.py): the router of their events, the one
    guardian (made at attach, before the first is traced) and the fleet's adoption of the children
    they fork; a member of a company leaves its modules to the fleet to close (shared with others)."""

    router: Router
    guardian: Guardian | None = None
    adopt: Callable[[PtraceBackend, int], bool] | None = None
    """--follow-forks: offered each child a process of the run forks (Fleet._adopt)."""


@dataclass(frozen=True)
class AsProgram:
    """The target's memory as its program has it: each of sampler's int3s read as the byte it covers."""

    memory: Memory
    originals: dict[int, int]

    def read(self, address: int, size: int) -> bytes:
        data = self.memory.read(address, size)
        covered = [(at, byte) for at, byte in self.originals.items() if address <= at < address + size]
        if not covered:
            return data
        out = bytearray(data)
        for at, byte in covered:
            out[at - address] = byte
        return bytes(out)


@dataclass
class Tally:
    """What a run's summary says of the processes it traced (summed over a run of many)."""

    released: int = 0
    """Forked children let go clean."""
    unsure: int = 0
    """Steps over the breakpoint while a thread could not be held."""
    vfork_windows: int = 0
    """Times the breakpoint was out for an untraced vfork child."""
    emulated: int = 0
    """Every-hit hits whose instruction was emulated."""
    stepped: int = 0
    """Every-hit hits single-stepped."""
    checked: int | None = None
    """With Switches.check_emulation (SAMPLER_CHECK_EMULATION=1): hits checked."""
    differed: list[str] = field(default_factory=list)
    """Where the emulation differed from the CPU."""
    hangs: int = 0
    """Reads of the target's memory that did not return in time (guard.py)."""
    waiting: int = 0
    """Threads waiting in the kernel (state D) when sampler let go: the kernel detaches them."""
    given_up: int = 0
    """Every-hit breakpoints taken out: their instruction's memory did not answer."""
    left_stepping: int = 0
    """Threads left inside a single-step that never ended (their trap flag set)."""
    torn: int = 0
    """Zero-stop rows whose reads never agreed (consistent.py): no values."""
    read_again: int = 0
    """Times zero-stop rows were read again because a value changed while read."""
    inprocess: list[str] = field(default_factory=list)
    """What the in-process probes counted, and what of them stayed in the target."""
    timed: Counter[str] = field(default_factory=Counter)
    """--latency and --to: the calls that got no row or a bound, counted (latency.timed_notes)."""

    def __add__(self, other: Tally) -> Tally:
        checked = None if self.checked is None and other.checked is None else \
            (self.checked or 0) + (other.checked or 0)
        return Tally(self.released + other.released, self.unsure + other.unsure,
                     self.vfork_windows + other.vfork_windows, self.emulated + other.emulated,
                     self.stepped + other.stepped, checked, self.differed + other.differed,
                     self.hangs + other.hangs, self.waiting + other.waiting, self.given_up + other.given_up,
                     self.left_stepping + other.left_stepping, self.torn + other.torn,
                     self.read_again + other.read_again, self.inprocess + other.inprocess,
                     self.timed + other.timed)

    def notes(self, every_hit: bool, many: bool = False) -> list[Note]:
        """``many``: of a run of many processes. Said under --quiet too: what changes what the rows mean
        (calls missed, values missed, the in-process probes' counts) and harm (SIGTRAP)."""
        said = [Note(text, matters=True) for text in self.inprocess] + timed_notes(self.timed)

        def add(text: str, matters: bool = False, let_go: int = 0) -> None:
            said.append(Note(text, matters, let_go))

        if self.released:
            whose = "targets" if many else "target"
            add(f"{self.released} child process(es) the {whose} forked were let go with "
                        "sampler's breakpoints taken out of their copy of its memory: their calls were not "
                        "traced (missed; --follow-forks traces them)"
                        + ("; in-process probes' jumps out too, their pages left mapped in them, unused"
                           if self.inprocess else ""), matters=True, let_go=self.released)
        if self.unsure:
            add(f"in {self.unsure} step(s) over the breakpoint a thread of the target could not be "
                        "held: calls it made then may have been missed (at most one each)", matters=True)
        if self.vfork_windows and every_hit:
            add(f"the breakpoint was out {self.vfork_windows} time(s) while a vfork child ran untraced "
                        "(sampler lacks CAP_SYS_PTRACE, and a traced exec would lose its set-user-ID): calls "
                        "other threads made then may have been missed", matters=True)
        if (self.emulated or self.stepped) and self.checked is None:
            add(f"every hit: {self.emulated} ran on without a single-step, {self.stepped} single-stepped"
                        + (" (the instruction under the breakpoint is not one sampler emulates: each hit "
                           "stops the thread twice)" if self.stepped and not self.emulated else ""))
        if self.hangs:
            add(f"{self.hangs} read(s) of the target's memory did not return within "
                        f"{TIMEOUT_S * 1000:.0f} ms (memory backed by a file system that does not answer?): their "
                        "values are missed, the rows say so, those pages were not read again, and sampler's threads "
                        "waiting on them stay until they return", matters=True)
        if self.waiting:
            add(f"{self.waiting} thread(s) of the {'targets' if many else 'target'} waited in the kernel "
                        "(uninterruptible: a file system that does not answer?) and could not stop for sampler to "
                        "let go: every breakpoint byte was back first, and the kernel lets each go on untraced as "
                        "sampler's tracer ends")
        if self.given_up:
            add(f"{self.given_up} breakpoint(s) were taken out for the rest of the run: the memory the "
                        f"instruction there reads did not answer within {TIMEOUT_S * 1000:.0f} ms, and a thread "
                        "single-stepped on it could not be let go safely; calls after that were missed",
                matters=True)
        if self.left_stepping:
            add(f"{self.left_stepping} thread(s) of the {'targets' if many else 'target'} were inside a "
                        "single-step whose memory did not answer for "
                        f"{DETACH_TIMEOUT_S:.0f} s: Linux keeps their trap flag when sampler exits, so each dies "
                        "of SIGTRAP if that memory comes (SAMPLER_GUARD=1 checks the memory before each step)",
                matters=True)
        if self.read_again:
            add(f"zero-stop rows were read again {self.read_again} time(s) because a value changed "
                        "while read: every row kept is of one moment")
        if self.torn:
            add(f"{self.torn} row(s) were torn: the target changed the values they read every time "
                        f"they were read (for {BUDGET_S * 1e3:.1f} ms each), so their values are missed and the "
                        "rows say \"torn\" (a value that changes faster than it can be read twice: use --at)",
                matters=True)
        if self.checked is not None:
            add(f"emulation checked against the CPU at {self.checked} hit(s): {len(self.differed)} differed"
                        + (f" (first: {self.differed[0]})" if self.differed else ""))
        return said


@dataclass(frozen=True)
class Turn:
    """One probe's breakpoints armed for a sample."""

    sites: list[Site]
    holds: dict[int, Callable[[object], Snapshot]] | None
    armed: float
    """When (monotonic seconds): the sample's wait starts there."""


def _python_places(modules: Modules, pid: int, location: str, quiet: bool) -> list[Place]:
    """``--at py:module.function``: the interpreter's frame start, each place with its filter (the
    function is found in the process's memory before it is seized; at a hit the filter reads through
    the hit's own reads)."""
    from sampler.process.snapshot import pread_exactly
    from sampler.python import probes as python_probes

    try:
        fd = procfs.open_mem(pid)
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessNotFound(f"process {pid} exited while sampler looked at it") from None
    except PermissionError:
        raise permission.denied(pid, "read the memory of") from None

    def read(address: int, size: int) -> bytes:
        if fd < 0:
            raise UnreadableMemory("the process's memory is read at a hit only")
        return pread_exactly(fd, address, size)

    try:
        found = python_probes.resolve(modules, read, location, notice.quiet if quiet else notice.say)
    finally:
        os.close(fd)
        fd = -1
    return [dataclasses.replace(place, python=probe) for place, probe in found]


def _holds(sites: list[Site]) -> dict[int, Callable[[object], Snapshot]] | None:
    """Each site's hot-path reads by address, when every site has them; else None."""
    holds = {site.address: site.runner for site in sites if site.runner is not None and site.address is not None}
    return holds if len(holds) == len(sites) else None


def _by_address(location: str) -> bool:
    """FUNCTION+OFFSET or MODULE:0xADDR: the user gave the address, not the line table."""
    return ptrace_only(location) in ("FUNCTION+OFFSET", "MODULE:0xADDR")


def _label(probe: Probe, place: Place, places: int) -> str:
    """The probe column: the location as given, and which of its breakpoints when it has several."""
    if places > 1 and place.symbol:
        return f"{probe.location} [{place.symbol}]"
    return probe.location
