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

import gc
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from sampler import notice
from sampler.backends.base import Note
from sampler.backends.cycle import miss
from sampler.backends.ptrace.latency import timed_notes
from sampler.backends.ptrace.parked import Parked
from sampler.backends.ptrace.placed import DRAIN_S, InProbes, demanded
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.backends.ptrace.site import Site
from sampler.backends.ptrace.sites import resolve
from sampler.backends.ptrace.timedprobes import LAG_S, TimedProbes
from sampler.config import SessionConfig
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.locate import ptrace_only
from sampler.debuginfo.modules import Modules
from sampler.errors import LocationNotFound, SamplerError, UsageError
from sampler.evaluation.plan import Snapshot
from sampler.probes.columns import value_columns
from sampler.probes.plan import Kind, Placement, Shows, Wants, choose, refused
from sampler.process.consistent import BUDGET_S, Moment, Torn
from sampler.process.guard import TIMEOUT_S, Guard
from sampler.process.instructions import MAX_FUNCTION, starts_instruction
from sampler.process.memory import Memory, MemoryHang
from sampler.process.reads import UnreadableMemory
from sampler.process.router import Router
from sampler.process.tasks import Hit
from sampler.process.tracer import DETACH_TIMEOUT_S, Tracer
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
from sampler.sample import Bulk, Reading
from sampler.stop import StopFlag
from sampler.target import procfs
from sampler.target.process import TargetProcess

if TYPE_CHECKING:  # numpy's rows, imported at a reading probe's first records (never in a run without one)
    from sampler.backends.ptrace.readrows import Pending

SERVE_S = 0.0005
"""How long a thread's stop (a signal) may wait at most while in-process rows are written."""


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
        resolved = resolve(config, modules, is_go)
        self.probes = resolved.probes
        """The sites of each probe, in the order of the --at options."""
        self.probe_column = resolved.probe_column
        """Rows say which probe and site they came from (a 'probe' column first)."""
        self.stacks = resolved.stacks
        """What reads the stack of a hit, when an expression is ``ustack``."""
        self.sites = [site for sites in self.probes for site in sites]
        self.per_tick = len(self.probes)
        """Samples per tick: one of each probe."""
        self.columns = value_columns(config.expressions, self.probe_column, config.timing is not None)
        """The value columns of its readings (the Backend interface)."""
        self.latency = resolved.latency
        """--latency and --to: the open calls, and where they end (latency.py)."""
        probes = bool(config.probe_list())
        python = any(site.python is not None for site in self.sites)
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
        self.inside: InProbes | None = None
        """The in-process probes, and the sites that keep an int3 (placed.py): made at attach."""
        self._stopped = False
        """The process was stopped (SIGSTOP) when sampler came: no jump goes in (its threads must run)."""
        self._serve_at = 0.0
        """When the tracer's events are next served while in-process rows go out."""
        self._rows: deque[tuple[Site | None, Reading | Pending]] = deque()
        """In-process probes' rows read out of their ring (with their site), not yet handed over; a
        reading probe's evaluated as it is handed over (a drain holds thousands)."""
        self._parked: Parked | None = None
        """Go: the goroutines, looked at for returns into a jump's bytes (parked.py)."""
        self.plan: dict[Site, Placement[Site]] = {}
        """Each site's probe kind, chosen at attach before anything is seized (probes/plan.py)."""

    @property
    def nothing_stops(self) -> bool:
        """Every site has an in-process probe: no thread of the target ever waits for sampler (the
        session then lets a slow reader of the rows slow it down: the ring counts what it drops)."""
        return self.inside is not None and self.inside.inprocess is not None and not self._stops_anywhere()

    def _stops_anywhere(self) -> bool:
        """An int3 is left: a site's, or (--latency) a return's that took no in-process probe (its hits
        must be served as hits: the nothing-stops path would resume them onto their int3 again and again)."""
        trapped = self.inside.trapped if self.inside is not None else self.sites
        return bool(trapped) or (self.latency is not None and bool(self.latency.ends))

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
        if not forked:  # (stopped by SIGSTOP, seen before sampler's own stops can look alike: "t")
            self._stopped = any(procfs.thread_state(self.config.pid, tid) == "T"
                                for tid in procfs.tasks(self.config.pid))
        self._choose()  # (--probe inprocess refused here, before a thread is seized)
        journal = Journal(self.config.pid)
        guardian: Guardian | Ward | None = None
        if self.company is not None and self.company.guardian is not None:
            guardian = Ward(self.company.guardian, self.config.pid)
        elif self.config.guardian and self.company is None:
            guardian = self.guardian = Guardian(PatchRescue(self.config.pid, self.memory.fd))
        adopt = self.company.adopt if self.company is not None else None
        self.tracer = Tracer(self.config.pid, self.memory, journal, guardian, go=self.is_go, router=self.router,
                             switches=self.config.switches, adopt=partial(adopt, self) if adopt is not None else None)
        self.inside = InProbes(self.config, self.sites, self.plan, self.tracer, self.memory, self.latency, self.timed,
                               self._at, self._rows, self._goroutines, self.is_go)
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
        inside = self.inside
        assert inside is not None
        if not inside.placed and any(site.python is not None for site in self.sites):
            inside.put()  # (a Python probe's places: the test in the target, its int3 armed for each turn)
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
        with self.tracer.probes.batch():  # (journaled at once)
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
        inside = self.inside
        assert inside is not None
        if not inside.placed:
            inside.put()
        inside.end_rest()
        if self._rows:
            now = time.monotonic()
            if inside.inprocess is not None and now >= self._serve_at:
                # the threads' own stops (a signal: Go sends SIGURG to preempt) served while rows
                # queued from the ring are written: ringbuf-go, its threads left stopped at them while
                # 65,536 rows went out, kept 1-4 % of its reads/s
                self._serve_at = now + SERVE_S
                tracer.serve_until(now, stop)
            return self._next_row()
        if inside.inprocess is not None:
            if not self._stops_anywhere():  # nothing stops: the ring is read while the tracer serves its events
                while True:
                    inside.drain()
                    if self._rows:
                        return self._next_row()
                    now = time.monotonic()
                    if now >= until or stop.is_set():
                        return None
                    tracer.serve_until(min(until, now + DRAIN_S), stop)
                    inside.end_rest()
            until = min(until, time.monotonic() + DRAIN_S)
            reading = self._trace_int3(stop, until)
            inside.drain()
            if reading is not None:
                self._rows.append((None, reading))
            if inside.learning:
                inside.promote()
            return self._next_row() if self._rows else None
        reading = self._trace_int3(stop, until)
        if inside.learning:
            inside.promote()
        return reading

    def _trace_int3(self, stop: StopFlag, until: float) -> Reading | None:
        tracer, memory = self.tracer, self.memory
        assert tracer is not None and memory is not None
        # --max-overhead: while a rest is on, only a site still learning its read plan is armed (a rest that
        # began while every site was learning is on still when one becomes an int3 of its own: armed then, it
        # stopped the target at every call until the rest's end, 97 % of stall's time by its clock)
        inside = self.inside
        assert inside is not None
        resting = time.monotonic() < inside.counting_until
        with tracer.probes.batch():  # (those not armed yet journaled at once: 8,000 int3s, one write)
            if self.latency is not None and not resting:  # (the ends first: a call seen to start must be seen to end)
                for address in self.latency.ends:
                    tracer.arm(address)
            for site in inside.trapped:
                if not resting or site in inside.learning:
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
        holds = _holds(inside.trapped)
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

    def _goroutines(self) -> Parked:
        if self._parked is None:
            assert self.memory is not None
            self._parked = Parked(self.config.pid, self.modules, self.memory.read)
        return self._parked

    def _choose(self) -> None:
        """The plan: each site's probe kind (probes/plan.py), from what it asks and what the process shows, read
        once; under --probe inprocess a site that cannot take one ends the run now, in one line."""
        pid, kind = self.config.pid, self.config.probe_kind
        if kind == "int3" or not (self.config.every_hit or any(site.python is not None for site in self.sites)):
            self.plan = {site: Placement(site, Kind.INT3) for site in self.sites}  # (as choose() gives)
            return
        reads = any(site.expressions for site in self.sites)
        shows = Shows(many=True) if self.company is not None else Shows(  # (many: an int3 at every site, no /proc
            seccomp=procfs.seccomp(pid) != 0, userfaultfd=reads and procfs.has_userfaultfd(pid),  # read while a
            slow_files=self.zero_stop_guard.on, stopped=self._stopped,  # forked child's parent waits)
            unseen_goroutines=self._goroutines().why_not if self.is_go and reads and self.config.every_hit else "")
        timed = self.timed
        wants = [(site, Wants(reads=bool(site.expressions), ustack=bool(site.stack_depths),
                              python=site.python is not None,
                              untimed=None if self.latency is None else
                              timed.why_not(site) if timed is not None else "--to's places are int3s"))
                 for site in self.sites]
        self.plan = {p.site: p for p in choose(wants, shows, kind, self.config.every_hit)}
        refusal = refused(list(self.plan.values()), kind)
        if refusal is not None:
            demanded(self.config, refusal.site, refusal.reason)

    def trace_bulk(self, stop: StopFlag, until: float) -> list[Reading | Bulk]:
        """As trace() where every site is in-process and the rows are only counted (session.py): the
        records of a drain as Bulks (numpy), those of a reading probe whose values are no columns as
        rows; [] when none came by ``until``."""
        assert self.inside is not None
        if self.latency is not None:  # (a row at each return, paired in order: one at a time)
            row = self.trace(stop, until)
            return [row] if row is not None else []
        if self._rows:
            return [self._next_row() for _ in range(len(self._rows))]
        return self.inside.bulk(stop, until)

    def last_rows(self, stop: StopFlag, bulk: bool) -> Iterator[Reading | Bulk]:
        """The run's end: the in-process probes' ring drained once every record of before now is in it (their
        threads' records take microseconds: LAG_S), the rows queued from it handed over one by one, the threads'
        own stops served meanwhile (as trace() does); those recorded after the drain are counted at detach."""
        inside, tracer = self.inside, self.tracer
        if inside is not None and inside.inprocess is not None and tracer is not None:
            end = time.monotonic()
            while time.monotonic() < end + LAG_S:  # (a stop asked: the end is now, the wait as short; an int3's
                tracer.serve_until(end + LAG_S, StopFlag())  # hit meanwhile, after the end, goes on unwritten)
            if bulk and self.latency is None:
                yield from inside.bulk(stop, 0.0)
            else:
                inside.drain(end)
        while self._rows:
            now = time.monotonic()
            if tracer is not None and self.tracer is tracer and now >= self._serve_at:
                # (ringbuf-go, its threads left stopped at their SIGURGs while 65,536 rows were written: a
                # second of reads/s=0)
                self._serve_at = now + SERVE_S
                tracer.serve_until(now, StopFlag())
            yield self._next_row()

    def _next_row(self) -> Reading:
        _, row = self._rows.popleft()
        return row if isinstance(row, Reading) else row.reading()

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
        inside = self.inside
        assert inside is not None
        # a site learning its read plan keeps its int3 (two hits, then its jump goes in: it rests then)
        resting = [site for site in inside.trapped if site not in inside.learning]
        for site in resting:
            self.tracer.disarm(site.armed_at)  # type: ignore[arg-type]
        if resting or inside.inprocess is not None:
            self._rest_returns()
        if inside.inprocess is not None:
            inside.inprocess.only_count(True)
        inside.counting_until = time.monotonic() + seconds
        if not resting:
            return  # (nothing waits: the rows recorded before go on being written, trace() ends the rest)
        self.tracer.serve_until(inside.counting_until, stop)
        inside.end_rest(force=True)

    def probe_time_s(self) -> float:
        """The in-process probes' own time in the target so far (inprocess.py's spent_s); 0 without."""
        inprocess = self.inside.inprocess if self.inside is not None else None
        return inprocess.spent_s() if inprocess is not None else 0.0

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
                    if self.inside is not None and self.inside.inprocess is not None and self.timed is not None:
                        # (before they go)
                        self.timed.dropped = sum(c.dropped for c in self.inside.inprocess.counts.values())
                    inprocess = self.inside.take_out() if self.inside is not None else []
                except SamplerError as e:
                    inprocess = [f"the in-process probes: {e}"]
                tracer, self.tracer = self.tracer, None
                try:
                    tracer.detach()
                finally:
                    stats = tracer.stats
                    self.tally = Tally(tracer.children.released, stats.unsure, stats.vfork_windows,
                                       stats.emulated + stats.moved, stats.stepped,
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


def _holds(sites: list[Site]) -> dict[int, Callable[[object], Snapshot]] | None:
    """Each site's hot-path reads by address, when every site has them; else None."""
    holds = {site.armed_at: site.runner for site in sites if site.runner is not None and site.armed_at is not None}
    return holds if len(holds) == len(sites) else None


def _by_address(location: str) -> bool:
    """FUNCTION+OFFSET or MODULE:0xADDR: the user gave the address, not the line table."""
    return ptrace_only(location) in ("FUNCTION+OFFSET", "MODULE:0xADDR")

