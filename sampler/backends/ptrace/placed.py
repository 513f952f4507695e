"""The in-process probes of one process's trace: each site's put in as the plan says at the first trace()
(probes/plan.py), a learning site promoted once its first hits made its read plan (a change of plan, said),
their ring drained into rows, and every jump taken out again at detach, the threads held.

The backend (backend.py) runs the int3s and the tracer's events; this holds what the jumps add to it."""

from __future__ import annotations

import copy
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sampler import notice
from sampler.backends.ptrace.inprocess import Inprocess, Plan, Read, plan
from sampler.backends.ptrace.keepalive import KeepAlive
from sampler.backends.ptrace.latency import Latency
from sampler.backends.ptrace.parked import Parked
from sampler.backends.ptrace.pylatency import PyLatency
from sampler.backends.ptrace.site import Site
from sampler.backends.ptrace.timedprobes import LAG_S, TimedProbes
from sampler.config import SessionConfig
from sampler.debuginfo.locate import names_function
from sampler.errors import DebuggerError, ProbeRefused, SamplerError
from sampler.evaluation.plan import ReadPlan
from sampler.inprocess.pyfilters import chain as python_chain
from sampler.inprocess.reads import Layout, Unfit
from sampler.inprocess.relocate import Displaced
from sampler.inprocess.trampoline import Chain
from sampler.probes.plan import Kind, Placement, int3_line
from sampler.process.memory import Memory
from sampler.process.stepover import HOLD_ALL_TIMEOUT_S, NotHeld
from sampler.process.tasks import PTRACE_EVENT_STOP
from sampler.process.tracer import Tracer
from sampler.sample import Bulk, Reading
from sampler.stop import StopFlag

if TYPE_CHECKING:  # numpy's rows, imported at a reading probe's first records (never in a run without one)
    from sampler.backends.ptrace.readrows import Pending, Rows

PROMOTE_HOLD_S = 0.05
"""How long the threads may take to stop for a learning site's jump: a vfork's parent does not stop
until its child execs (forker: a hold of 2 s stalled it, the row came after the run's end); the site
is tried again after its next hit, PROMOTE_TRIES times."""
PROMOTE_TRIES = 20
MANY_LINES = 20
"""Probes past which the summary says those that saw no call in one line (libc:*: 3,131 lines of "0 call(s)")."""
DRAIN_S = 0.01
"""How often the in-process probes' ring is read while nothing else happens: 65,536 records in 10 ms
is 6.5 million calls a second before one is dropped."""


def where(site: Site, config: SessionConfig) -> str:
    return probe_of(site, config) + (f" ({site.address:#x})" if site.address else "")


def probe_of(site: Site, config: SessionConfig) -> str:
    """``--at`` and the probe's label (a Python probe's places: one line for them all)."""
    return f"--at {site.label or config.location}"


def demanded(config: SessionConfig, site: Site, why: str, error: type[SamplerError] = ProbeRefused) -> None:
    """--probe inprocess, and ``site`` cannot take one (``why``): the run ends in one line. ``error``:
    DebuggerError where the target refused it during the run."""
    if config.probe_kind == "inprocess":
        raise error(f"--probe inprocess: no in-process probe at {where(site, config)}: {why}",
                    "give --probe auto (an int3 where in-process cannot go), or --probe int3")


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


class InProbes:
    """One traced process's in-process probes, and the sites that keep an int3 (``trapped``)."""

    def __init__(self, config: SessionConfig, sites: list[Site], plan: dict[Site, Placement[Site]],
                 tracer: Tracer, memory: Memory, latency: Latency | None, timed: TimedProbes | None,
                 at: dict[int, Site], rows: deque[tuple[Site | None, Reading | Pending]],
                 parked: Callable[[], Parked], is_go: bool) -> None:
        self.config = config
        self.sites = sites
        self.plan = plan
        self.tracer = tracer
        self.memory = memory
        self.latency = latency
        self.timed = timed
        self.at = at
        """Each breakpoint address's site (the backend's: a filtering probe's int3 is added)."""
        self.rows = rows
        """The rows read out of the ring (with their site), not yet handed over (the backend's queue)."""
        self.parked = parked
        self.is_go = is_go
        self.trapped: list[Site] = sites
        """The sites with an int3 (every-hit mode: those without an in-process probe)."""
        self.inprocess: Inprocess[Site] | None = None
        """The in-process probes, once placed."""
        self.placed = False
        self.learning: list[Site] = []
        """Sites whose in-process probe reads: an int3 until their first hits make their read plan."""
        self.counting_until = 0.0
        """--max-overhead: the in-process probes only count until then (monotonic; 0: they record)."""
        self._hold_timeout_s = HOLD_ALL_TIMEOUT_S
        """How long every thread may take to stop for a jump (shorter while a site is promoted)."""
        self._promotions: dict[int, int] = {}
        """Tries of each learning site's promotion that found a thread that would not stop."""
        self._readers: dict[int, Rows] = {}
        """Each reading probe's rows (by its site's id)."""
        self.keepalive: KeepAlive | None = None
        """The int3s' out-of-line copies and the target's SIGTRAP handler (keepalive.py), once made."""
        self.longest_hold_s = 0.0
        """The longest the threads were held for the probes (sampler's clock, from the interrupt to the let-go)."""

    def _where(self, site: Site) -> str:
        return where(site, self.config)

    def _probe(self, site: Site) -> str:
        return probe_of(site, self.config)

    def _demanded(self, site: Site, why: str, error: type[SamplerError] = ProbeRefused) -> None:
        demanded(self.config, site, why, error)

    def put(self) -> None:
        """At the first trace(): each site's in-process probe where --probe wants one and the site
        takes it; the others keep their int3. One line says which each site got."""
        self.placed = True
        kind = self.config.probe_kind
        if kind == "int3":
            said = [self._in_stops(), self._keep_alive()]
            if any(said):
                (notice.quiet if self.config.quiet else notice.say)("probes: " + "; ".join(filter(None, said)))
            return
        say = notice.quiet if self.config.quiet else notice.say
        wanted: list[tuple[Site, Displaced, bool]] = []
        lines: list[str] = []
        layouts: dict[Site, Layout] = {}
        timed: dict[Site, list[Site]] = {}
        filters: dict[Site, Chain] = {}
        clear: Site | None = None
        for site in self.sites:
            if site.python is not None:
                self._python_inprocess(site, wanted, filters, lines)
                clear = clear or self._clear_inprocess(site, wanted, filters)
                continue
            placement = self.plan[site]
            if placement.kind is Kind.INT3 and not placement.reason:
                continue  # (attach: a Python probe's places only; the others' int3s are armed for each turn)
            why, planned = placement.reason, None
            if placement.kind is Kind.LEARN and self.timed is not None:  # (learning: its entry's jump is
                why = self.timed.return_jumps(site, self._program().read)[1]  # placed after, so checked now)
            if not why and placement.kind is Kind.LEARN:  # its reads are learnt at its first hits, by its int3
                self.learning.append(site)
                lines.append(int3_line(placement, self._where(site)))
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
                lines.append(f"{self._where(site)}: an int3 ({why})")
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
                taken_out = inprocess.put(wanted, layouts, filters=filters,
                                          follows=frozenset(ret for ends in timed.values() for ret in ends))
            except SamplerError as e:
                inprocess.close()
                if kind == "inprocess":
                    raise
                taken_out = {site: e.message for site, _, _ in wanted}
            if self.latency is not None:
                self.latency.putting(putting, time.monotonic() - putting)
            placed = [site for site, _, _ in wanted if site not in taken_out]
            if inprocess.batches > 1:
                say(f"probes: {len(placed)} in-process probes put in, {inprocess.batches} batches in "
                    f"{time.monotonic() - putting:.1f} s, the threads let go between (the longest hold "
                    f"{self.longest_hold_s * 1e3:.0f} ms, by sampler's clock)")
            if placed:
                self.inprocess = inprocess
            for site, why in taken_out.items():
                self._demanded(site, why, DebuggerError)
                lines.append(f"{self._where(site)}: an int3 ({why})")
            self._traps(inprocess, [site for site in placed if site in filters and site is not clear], lines)
            if clear is not None and clear in placed and isinstance(self.latency, PyLatency):
                trap = next(p.trap for p in inprocess.placed if p.key is clear)
                assert trap is not None
                self.latency.tested_at(trap)
                lines.append(f"{self._probe(clear)} --latency: the frame clear's test in-process too "
                            "(only its function's frames stop there)")
            self.trapped = [site for site in self.sites if site not in placed or site in filters]
            lines[:0] = [f"{self._where(site)}: in-process (a jump at {displaced.site:#x}; no thread stops)"
                        for site, displaced, _ in wanted if site in placed and site not in layouts
                        and site not in filters]
            for site, ends in timed.items():
                self._timed_placed(site, ends, placed, lines.append)
        kept = self._keep_alive()
        say("probes: " + "; ".join(lines + ([kept] if kept else [])))

    def _in_stops(self) -> str:
        """--probe int3: each site's int3 in a stop of sampler's page that a jump at the site leads to (then a jump
        on to the instructions the jump displaced), where the site takes a jump: a thread stopped at it stands
        where it can go on, whatever becomes of sampler (the kernel lets a thread stopped at an int3 in the code
        go on one byte past it, mid-instruction, when its tracer dies). The others keep theirs in the code.
        What the probes line says ('' when nothing went in)."""
        tracer = self.tracer
        if tracer is None or not _keeps_alive(tracer):
            return ""
        wanted: list[tuple[Site, Displaced, bool]] = []
        for site in self.sites:
            if site.python is None and site.address is not None and site.trap is None:
                planned = self._plan(site, site.address)
                if planned.displaced is not None and planned.displaced.site == site.address:
                    wanted.append((site, planned.displaced, planned.entry))
        if not wanted:
            return ""
        inprocess = self.inprocess if self.inprocess is not None else self._new_inprocess()
        try:
            refused = inprocess.put(wanted, stops=frozenset(site for site, _, _ in wanted))
        except SamplerError:
            if inprocess is not self.inprocess:
                inprocess.close()
            return ""
        keys = {site for site, _, _ in wanted}
        placed = [p for p in inprocess.placed if p.key in keys and p.trap is not None]
        for p in placed:
            stop = p.trap
            assert stop is not None
            p.key.trap = stop
            self.at[stop] = p.key
            tracer.stands_for[stop] = p.displaced.site
            tracer.outofline[stop] = stop + 1  # (past the int3 onto the stop's jump)
        if placed and self.inprocess is None:
            self.inprocess = inprocess
        if not placed:
            return ""
        return (f"{len(placed)} int3(s) in stops of sampler's page, each site a jump there"
                + (f"; {len(refused)} in the code ({next(iter(refused.values()))}: a thread stopped at one when "
                   "sampler is killed is let go mid-instruction)" if refused else ""))

    def _keep_alive(self) -> str:
        """Each int3 of the run with its out-of-line copy and the target's SIGTRAP handler in (keepalive.py),
        before the first goes in: a tracer killed while a thread stands at one no longer kills the target.
        What the probes line says of the int3s that have no copy ('' when all have one)."""
        tracer = self.tracer
        if tracer is None or not _keeps_alive(tracer):
            return ""
        stops = {p.trap for p in self.inprocess.placed if p.trap is not None} if self.inprocess is not None else set()
        addresses = [site.armed_at for site in self.trapped if site.armed_at is not None and site.armed_at not in stops]
        addresses += list(self.latency.ends) if self.latency is not None else []
        if not addresses and not stops:
            return ""
        if self.keepalive is None:
            inprocess = self.inprocess if self.inprocess is not None else self._new_inprocess()
            self.keepalive = KeepAlive(inprocess, self._hold, self.memory, self._program().read, self.config.pid)
        keep = self.keepalive
        try:
            tracer.outofline.update(keep.cover(addresses, {stop: stop + 1 for stop in stops}))
        except SamplerError as e:
            return (f"no int3 has an out-of-line copy ({e.message}): if sampler's tracing worker is killed "
                    "while a thread stands at one, the target dies of its SIGTRAP")
        if not keep.refused:
            return ""
        first = next(iter(keep.refused.items()))
        return (f"{len(keep.refused)} int3(s) without an out-of-line copy (at {first[0]:#x}: {first[1]}): each hit "
                "is emulated or stepped, and if sampler's tracing worker is killed while a thread stands at one, "
                "the target dies of its SIGTRAP")

    def _python_inprocess(self, site: Site, wanted: list[tuple[Site, Displaced, bool]], filters: dict[Site, Chain],
                          lines: list[str]) -> None:
        """A Python probe's place: a filtering probe wanted there (``wanted``, ``filters``), whose test in the
        target lets only its function's calls through to an int3; or why not, said (once for its places)."""
        probe = site.python
        assert probe is not None and site.address is not None
        why = self.plan[site].reason
        chain: Chain | str = why or python_chain(probe, site.address)
        if isinstance(chain, str):
            why = chain
        else:
            planned = self._plan(site, site.address)
            why = planned.why_not
        if why:
            self._demanded(site, why)
            lines.append(f"{self._where(site)}: an int3 ({why}: every Python call of the process stops there "
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
        planned = plan(self._program(), span[0] + module.bias, span[1], latency.clear_at, module)
        if planned.displaced is None:
            return None
        key = copy.copy(site)
        wanted.append((key, planned.displaced, planned.entry))
        filters[key] = Chain("rdi", (probe.code_offset,), probe.code)
        return key

    def _traps(self, inprocess: Inprocess[Site], sites: list[Site], lines: list[str]) -> None:
        """The filtering probes placed: each site's int3 goes where its test lets its calls through."""
        if not sites:
            return
        for placed in inprocess.placed:
            if placed.key in sites and placed.trap is not None:
                placed.key.trap = placed.trap
                self.at[placed.trap] = placed.key
        lines.append(f"{self._probe(sites[0])}: in-process, at {len(sites)} place(s) of the eval loop: a test in the "
                    "target lets only its function's calls through to an int3 (every other Python call goes on; "
                    "docs/cost.md)")

    def _new_inprocess(self) -> Inprocess[Site]:
        tracer, memory = self.tracer, self.memory
        assert tracer is not None and memory is not None
        parked = self.parked().inside if self.is_go else None
        return Inprocess(self.config.pid, memory, tracer.probes, self._hold,
                         lambda seconds: tracer.serve_until(time.monotonic() + seconds, StopFlag()), self.is_go,
                         parked)

    def promote(self) -> None:
        """Each learning site whose read plan is made: its int3 out, a reading probe in at the same
        address (or why not, said; the int3 stays)."""
        ready = [site for site in self.learning if site.runner is not None and site.merged is not None]
        if not ready or self.tracer is None:
            return
        if self.tracer.sharing or self.tracer.probes.suspended:
            # a vfork child runs in the memory: its parent waits in vfork() and stops for no
            # interrupt until the child execs or exits (forker's hold waited 2 s): after the next hit
            return
        say = notice.quiet if self.config.quiet else notice.say
        for site in ready:
            self.learning.remove(site)
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
            if self.counting_until and inprocess is not self.inprocess:
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
                refused = inprocess.put(pieces, layouts, swap, follows=frozenset(returns))
            except NotHeld as e:  # (a vfork's parent, waiting for its child: after the next hit)
                tries = self._promotions[id(site)] = self._promotions.get(id(site), 0) + 1
                if tries < PROMOTE_TRIES:
                    if self.inprocess is None:
                        inprocess.close()
                    self.learning.append(site)
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

    def _not_promoted(self, site: Site, why: str) -> None:
        self._demanded(site, why, DebuggerError)
        say = notice.quiet if self.config.quiet else notice.say
        say(f"probes: {self._where(site)}: an int3 (its reads cannot run in the target: {why})")

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
        return plan(self._program(), start, span[1], at, module)

    def _program(self) -> AsProgram:
        """The process's memory as the program's bytes: sampler's int3s read as the bytes they cover."""
        assert self.memory is not None
        armed = self.tracer.probes.armed if self.tracer is not None else {}
        return AsProgram(self.memory, {address: byte[0] for address, byte in armed.items()})

    @contextmanager
    def _hold(self, tids: list[int] | None) -> Iterator[list[int]]:
        """Every thread (or ``tids``) stopped by the tracer, those stopped by its interrupt first
        (the best for an injected system call)."""
        assert self.tracer is not None
        began = time.monotonic()
        held = self.tracer.hold(tids, self._hold_timeout_s)
        try:
            interrupted = [tid for tid, _ in sorted(held, key=lambda h: h[1] >> 16 != PTRACE_EVENT_STOP)]
            # and those stopped already with an event still to serve (a signal's stop: Go's SIGURG
            # comes often; an int3's hit not yet served): they stay stopped, but may stand inside a jump's
            # bytes or a trampoline (every thread may be one: the run's last hit, at its end)
            stopped = [tid for tid in self.tracer.stopped_already() if tid not in interrupted]
            if not interrupted and not stopped:
                raise DebuggerError(f"no thread of process {self.config.pid} could be held")
            yield interrupted + stopped
        finally:
            self.tracer.let_go(held)
            self.longest_hold_s = max(self.longest_hold_s, time.monotonic() - began)
            if self.latency is not None:  # (a call under way meanwhile waited for sampler that long)
                self.latency.held(began, time.monotonic() - began)

    def drain(self, end: float | None = None) -> None:
        """The in-process probes' records as rows (in the order their threads took them); ``end``: the run's
        (monotonic), every record of before it in the rings (--latency: every call that ended by then)."""
        inprocess, tracer = self.inprocess, self.tracer
        if inprocess is None or tracer is None:
            return
        # (--latency in the target: every record of before the cutoff is in)
        cutoff = end if end is not None else time.monotonic() - LAG_S
        drained = inprocess.drain(lambda: sorted(tracer.threads))
        rows = self.rows
        if drained is not None:
            values = {p.number: p.key.counted() for p in inprocess.placed if p.trap is None}
            sites = {p.number: p.key for p in inprocess.placed}
            for number, thread, at in zip(drained.numbers.tolist(), drained.threads, drained.seconds.tolist()):
                rows.append((sites[number], Reading(values[number], thread=thread, at=at)))
        self._rows_of(inprocess.drain_read(lambda: sorted(tracer.threads)))
        if self.latency is not None and self.latency.queued:
            self.rows.extend(self.latency.rows(cutoff))
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
            self.rows.extend((read.placed.key, row) for row in self._rows_for(read).of(read))

    def _rows_for(self, read: Read) -> Rows:
        """The rows of a reading probe (by its site), made at its first records."""
        site, layout = read.placed.key, read.placed.layout
        assert layout is not None and self.memory is not None
        rows = self._readers.get(id(site))
        if rows is None:
            from sampler.backends.ptrace.readrows import Rows

            rows = self._readers[id(site)] = Rows(site, layout, self.memory)
        return rows

    def take_out(self) -> list[str]:
        """At detach, while the tracer holds the threads: every jump out, the counts read; what the
        summary says of them."""
        kept = self._take_keepalive_out()
        inprocess = self.inprocess
        if inprocess is None:
            return kept
        unwritten = Counter(id(site) for site, _ in self.rows if site is not None)
        self.rows.clear()
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
        idle: list[Site] = []
        """Sites whose probe saw no call (a run of many: one line for them all)."""
        for placed in inprocess.placed:
            site = placed.key
            if placed.trap is not None:
                continue
            counts = inprocess.counts[placed.number]
            if not counts.hits and len(inprocess.placed) > MANY_LINES:
                idle.append(site)
                continue
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
        if idle:
            shown = ", ".join(site.place.symbol if site.place is not None else site.label or "" for site in idle[:3]) \
                + (", ..." if len(idle) > 3 else "")
            said.append(f"in-process at --at {self.config.location}: {len(idle)} other site(s) saw no call ({shown})")
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
        return kept + said

    def _take_keepalive_out(self) -> list[str]:
        """Every int3 with a copy out, the program's SIGTRAP handler back, and (where no in-process probe shares
        them) the copies' pages away; what stays is said."""
        keep, tracer = self.keepalive, self.tracer
        if keep is None or tracer is None:
            return []
        for address in keep.copies:
            tracer.disarm(address)
        tracer.outofline.clear()
        keep.restore()
        said = [keep.left] if keep.left else []
        if keep.inprocess is not self.inprocess:
            try:
                keep.inprocess.take_out()
            except SamplerError as e:
                keep.inprocess.left = (f"the int3s' out-of-line copies could not be taken out of process "
                                       f"{self.config.pid} ({e}): their pages stay, unused")
            if keep.inprocess.left:
                said.append(keep.inprocess.left)
            keep.inprocess.close()
        return said

    def _tested(self, inprocess: Inprocess[Site]) -> list[str]:
        """What the filtering probes' tests did (a Python probe's places: one line)."""
        tested = [placed for placed in inprocess.placed if placed.tested and placed.key in self.sites]
        clears = [placed for placed in inprocess.placed if placed.tested and placed.key not in self.sites]
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

    def end_rest(self, force: bool = False) -> None:
        """The in-process probes record and read again once --max-overhead's rest is over."""
        if self.counting_until and (force or time.monotonic() >= self.counting_until):
            self.counting_until = 0.0
            if self.inprocess is not None:
                self.inprocess.only_count(False)

    def bulk(self, stop: StopFlag, until: float) -> list[Reading | Bulk]:
        """The records of a drain as Bulks (numpy), those of a reading probe whose values are no columns as
        rows; [] when none came by ``until`` (the backend's trace_bulk: every site in-process, the rows only
        counted)."""
        tracer, inprocess = self.tracer, self.inprocess
        assert inprocess is not None
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


def _keeps_alive(tracer: Tracer) -> bool:
    """Whether a run's int3s get stops, copies and the target's SIGTRAP handler (keepalive.py): not with
    SAMPLER_OUTOFLINE=0 (or a check of the emulation); not yet in a run of many processes (as their in-process
    probes); not where the memory may never answer (a FUSE or network mount: each hit's memory is looked at
    before the thread goes on)."""
    return tracer.switches.outofline and tracer.router is None and not tracer.guard.on
