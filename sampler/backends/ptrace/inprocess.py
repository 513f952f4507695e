"""In-process probes in one process (issue 36): a jump at each site to a trampoline that counts the
hit and writes a record into a ring shared with sampler (sampler/inprocess/: probe.S, ring.py,
trampoline.py), so that no thread stops at a hit.

Putting them in, with every thread of the process held (the tracer's ``hold``, or freeze.py's
where sampler does not trace it): the data area and code pages made by the target's own system
calls (areas.py, inject.py; a code page within a rel32 jump of the sites it serves, another for
sites too far from it), each trampoline written through sampler's mapping of its page, a thread
whose pc is inside the bytes a jump takes moved to the same instruction in its trampoline, and the
jump written over the site, journaled first as any byte sampler patches (probes.py). Each held
thread's fs base is noted: a record names its thread by it.

Taking them out, the same way round: every thread held, the bytes back, a thread in a trampoline's
copy of the displaced instructions moved back to the site's own (one in its recording part, with
registers pushed, is let run out of it and looked at again), then the pages unmapped, unless a
word on a thread's stack points into them (a signal handler that interrupted a trampoline returns
there): then they stay, and the summary says so.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import signal
import struct
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Optional, Protocol, TypeVar

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.debuginfo.elffile import BadFile
from sampler.debuginfo.modules import Module
from sampler.errors import SamplerError
from sampler.inprocess import ring
from sampler.inprocess.clock import TscClock
from sampler.inprocess.outofline import COPY
from sampler.inprocess.reads import Layout
from sampler.inprocess.relocate import JUMP_SIZE, Displaced, Refused
from sampler.inprocess.ring import Ring
from sampler.inprocess.trampoline import Chain, filtering, jump, reading, recording, stop_only, stopping
from sampler.process import calls
from sampler.process.areas import PAGE, REACH, Area, Areas
from sampler.process.inject import InjectionError, Injector, find_syscall
from sampler.process.memory import Memory
from sampler.process.patchtable import ProbeTable
from sampler.process.reads import UnreadableMemory
from sampler.process.stepover import NotHeld
from sampler.target import procfs

if TYPE_CHECKING:  # numpy is imported by what reads records or stacks (a run with no in-process probe: never)
    import numpy as np

Hold = Callable[[Optional[list[int]]], AbstractContextManager[list[int]]]  # (3.9: no X | Y at run time)
"""Stops every thread (or those given) for the ``with``: the thread ids held, the best one for an
injected system call first."""
CODE_SIZE = 8 * PAGE
"""Bytes of one code area: room for every probe a data area counts (ring.MAX_PROBES)."""
TAKE_OUT_TRIES = 20
"""Times every thread is held to find none inside a trampoline's recording part, 1 ms apart."""
STACK_SCAN = 8 << 20
"""Bytes of each thread's stack, from its stack pointer up, looked at for a return into the pages, at most."""
GO_SIGNAL_SCAN = 32 << 10
"""A Go thread's signal stack (its gsignal's, 32 KiB), where its handler's signal frame lies: looked at from
the thread's stack pointer up for the pc the handler returns to (not further: other goroutines' stacks follow)."""
SIGNAL_SCAN = 256 << 10
"""How much of a held thread's stack, from its pointer up, is looked at for a signal handler's saved pc
inside a jump's bytes before the jump goes in (a handler's frames and its signal frame lie there)."""
AT_HWCAP2, HWCAP2_FSGSBASE = 26, 2
K = TypeVar("K")


def fsgsbase() -> bool:
    """The kernel lets user code read its fs base (rdfsbase): Linux 5.9 and later, on CPUs with it."""
    try:
        with open("/proc/self/auxv", "rb") as f:
            auxv = f.read()
    except OSError:
        return False
    for key, value in struct.iter_unpack("<QQ", auxv[:len(auxv) // 16 * 16]):
        if key == AT_HWCAP2:
            return bool(value & HWCAP2_FSGSBASE)
    return False


@dataclass
class Placed(Generic[K]):
    """One in-process probe in place."""

    key: K
    """The caller's name for it (the backend's Site)."""
    number: int
    """Its counters' and records' number in the data area."""
    displaced: Displaced
    trampoline: int
    moved_at: int
    """Where in the trampoline the displaced instructions start."""
    layout: Layout | None = None
    """A reading probe's record and reads (reads.py); None: it counts."""
    ring: Ring | None = None
    """A reading probe's own ring, in its own data area (``area``)."""
    area: Area | None = None
    trap: int | None = None
    """A filtering probe's: the byte its int3 goes on (the calls it lets through stop there); an int3 probe's
    (``stops``): the same, every call stops there."""
    tested: bool = False
    """A filtering probe (its calls tested in the target), not an int3 probe."""


@dataclass
class Drained:
    """Records read out of the ring: by probe number, thread and time."""

    numbers: np.ndarray
    threads: list[str]
    seconds: np.ndarray
    """CLOCK_MONOTONIC seconds of each hit."""


@dataclass
class Read:
    """A reading probe's records read out of its ring."""

    placed: Placed[Any]
    records: np.ndarray
    threads: list[str]
    seconds: np.ndarray


@dataclass
class Counts:
    hits: int = 0
    """Calls counted by the target (exact)."""
    recorded: int = 0
    dropped: int = 0
    """Records not written: the ring was full."""
    ticks: int = 0
    """A reading probe's own time in the target, its records' TSC ticks summed."""

    @property
    def only_counted(self) -> int:
        """Calls counted, neither recorded nor dropped: the probe only counted them (--max-overhead's
        rests), once every record is read."""
        return max(0, self.hits - self.recorded - self.dropped)


class Inprocess(Generic[K]):
    """The in-process probes of one process, each known by the caller's key (K: the backend's Site)."""

    def __init__(self, pid: int, memory: Memory, table: ProbeTable, hold: Hold,
                 wait: Callable[[float], None] = time.sleep, go: bool = False,
                 parked: Callable[[int, int, list[Any]], str] | None = None) -> None:
        self.pid = pid
        self.go = go
        self.parked = parked
        """Go: why a jump may not go over (start, end) now (a goroutine parked, or one of the held
        threads, with a return into them: parked.py); '' when it may."""
        """A Go program: a thread's stack is its goroutine's (``_stack_top``)."""
        self.memory = memory
        self.table = table
        self.hold = hold
        self.wait = wait
        """Lets the threads run for a while (the tracer's: serving their events, a signal's stop too)."""
        self.fsgsbase = fsgsbase()
        self.placed: list[Placed[K]] = []
        self.codes: list[Area] = []
        self._used: dict[int, int] = {}
        """Each code area's address -> bytes of it used."""
        self.data: Area | None = None
        self.stops: Area | None = None
        """The filtering probes' stops (STOP bytes each)."""
        self._stops_used = 0
        self.ring: Ring | None = None
        self.areas: Areas | None = None
        self._syscall_at: int | None = None
        self.clock: TscClock | None = None
        self.threads: dict[int, int] = {}
        """fs base -> thread id, for the records."""
        self.counts: dict[int, Counts] = {}
        self._last: Drained | None = None
        """The records drained as the data area went (the ring's last)."""
        self._last_read: list[Read] = []
        """The same of the reading probes' rings."""
        self._open = False
        """Probes are in, or their pages still mapped (their rings readable)."""
        """Probe number -> what was counted (read at each drain, and at the end)."""
        self.left = ""
        """What stayed in the target when sampler let go (said in the summary); '' when nothing."""
        self.forged = 0
        """Records in the shared ring that named no probe of sampler's: written by the target, dropped."""
        self._only_counting = False
        """--max-overhead's rest: the probes only count (probes put in meanwhile too)."""
        self.batches = 0
        """Holds of the threads that put probes in."""
        self.copies: list[int] = []
        """Where each int3's out-of-line copy starts (keepalive.py), in order: no page goes while a thread runs one."""

    # -- in --------------------------------------------------------------------------------------

    def put(self, wanted: Sequence[tuple[K, Displaced, bool]], layouts: dict[K, Layout] | None = None,
            swap: Callable[[K, bool], int | None] | None = None, filters: dict[K, Chain] | None = None,
            follows: frozenset[K] | None = None, stops: frozenset[K] = frozenset()) -> dict[K, str]:
        """Each (key, displaced instructions, whether the site is a function's entry) in place, in batches
        with the threads held for each (BATCH_S of work at most: they run between); {key: why not} for each
        that could not be (it gets an int3).
        ``layouts``: the keys whose probes read (a reading probe each, with its own data area); their
        sites have an int3, so no thread may stand just past one (its trap not yet reported), and
        ``swap(key, True)`` takes it out with the threads held, right before the jump goes in, and says
        where it was (None: none was in); ``swap(key, False)`` puts it back if the jump cannot: no call
        passes between the two. ``filters``: the keys whose probes let only some calls through, to an
        int3 the caller arms at their ``trap`` (filtering probes: a Python probe's places). ``stops``: keys whose
        probe is only that int3, in a stop of sampler's page the site jumps to (an int3 probe). ``follows``: keys
        that go in in the same batch as the one before them (a timed entry's returns). When a batch fails
        after others went in, those stay in (``placed``) and the rest are refused with its reason."""
        refused: dict[K, str] = {}
        if not wanted:
            return refused
        if self.clock is None:
            self.clock = TscClock()
        remaining = list(wanted)
        before = len(self.placed)
        while remaining:
            try:
                done = self._batch(remaining, layouts or {}, swap, filters or {}, refused, follows or frozenset(),
                                   stops)
            except SamplerError as e:
                if len(self.placed) == before:
                    raise
                # (a later batch failed: those in already stay in, and are taken out at the end as any; the
                # rest get their int3s)
                refused.update((key, e.message) for key, _, _ in remaining)
                return refused
            remaining = remaining[done:]
            self.batches += 1
            if remaining:
                self.wait(BETWEEN_S)  # (the threads run between two batches: their stops meanwhile served)
        return refused

    def _batch(self, wanted: Sequence[tuple[K, Displaced, bool]], layouts: dict[K, Layout],
               swap: Callable[[K, bool], int | None] | None, filters: dict[K, Chain], refused: dict[K, str],
               follows: frozenset[K], stops: frozenset[K]) -> int:
        """One batch put in, tried again while no thread is ready (PUT_TRIES times); how many were done."""
        last = ""
        for _ in range(PUT_TRIES):
            try:
                return self._put(wanted[:MAX_BATCH], layouts, swap, filters, refused, follows, stops)
            except NoThreadReady as e:
                last = e.message
                self.wait(e.wait_s)  # (a thread in a system call's event stop: the tracer serves it)
        raise NoThreadReady(f"{last} ({PUT_TRIES} tries)")

    def _put(self, wanted: Sequence[tuple[K, Displaced, bool]], layouts: dict[K, Layout],
             swap: Callable[[K, bool], int | None] | None, filters: dict[K, Chain], refused: dict[K, str],
             follows: frozenset[K], stops: frozenset[K]) -> int:
        """The first of ``wanted`` in place with the threads held once, as many as BATCH_S of work puts in
        (MIN_BATCH at least; a key of ``follows`` with the one before it: a timed entry's returns with it); how
        many were done (``refused``: why not, of those that could not be)."""
        with self.hold(None) as tids:
            began = time.monotonic()
            handlers = [tid for tid in tids if _in_go_handler(self.pid, tid)] if self.go else []
            for _, displaced, _ in wanted if handlers else []:  # (a signal comes at any instruction, entries too)
                handling = self._saved_pc_inside(handlers, displaced, GO_SIGNAL_SCAN)
                if handling is not None:  # (let go: its handler returns, and then the jump may go in)
                    raise NoThreadReady(f"no jump at {displaced.site:#x} in process {self.pid}: thread {handling} "
                                        "runs a signal handler that returns into its bytes", wait_s=PARKED_WAIT_S)
            # (Go: not at a function's entry, whose stack check Go never preempts in: an unsafe point)
            for _, displaced, entry in wanted if self.parked is not None else []:
                assert self.parked is not None
                why = "" if entry else self.parked(displaced.site, displaced.back, self._registers(tids))
                if why:  # (let go: the goroutine may run on out of there, once it has a thread again)
                    raise NoThreadReady(f"no jump at {displaced.site:#x} in process {self.pid}: {why}",
                                        wait_s=PARKED_WAIT_S)
            areas = self.areas_for(tids)
            self._learn(tids)
            try:
                counting = [displaced.site for key, displaced, _ in wanted if key not in layouts and key not in stops]
                if self.data is None and counting:
                    self.data = areas.data_area(counting[0], ring.SIZE)
                    assert self.data.local is not None
                    self.ring = Ring(self.data.local)
                    self.ring.initialise()
                    self.ring.only_count(self._only_counting)
                done = 0
                with self.table.batch():  # (the batch's jumps journaled at once, then written: threads held)
                    for key, displaced, entry in wanted:
                        if done >= MIN_BATCH and key not in follows and time.monotonic() - began >= BATCH_S:
                            break  # (the rest in the next batch: the threads run meanwhile)
                        done += 1
                        swapped = swap is not None and key in layouts
                        was = swap(key, True) if swap is not None and swapped else None
                        try:
                            self.table.check_free(displaced.site, JUMP_SIZE)  # (before any thread is moved)
                            if not entry and self.parked is None:  # (Go: its parked goroutines are looked at)
                                self._no_saved_pc_inside(tids, displaced)
                            self._place(key, displaced, entry, tids, areas, layouts.get(key), was, filters.get(key),
                                        key in stops)
                        except (Refused, InjectionError, ValueError) as e:
                            refused[key] = e.message if isinstance(e, InjectionError) else str(e)
                            if swap is not None and swapped:
                                swap(key, False)
            finally:
                areas.close()  # (the scratch page of the names)
                self._open = self._open or bool(self.placed)
        return done

    def areas_for(self, tids: list[int]) -> Areas:
        if self._syscall_at is None:
            self._syscall_at = find_syscall(self.pid, self.memory.read)
        # only a thread the tracer's interrupt stopped makes the calls: one stopped at a fork's or an
        # exec's event is inside the program's own system call, whose result the call would replace
        # (forker's fork() returned ENOSYS)
        ready = next((tid for tid in tids if _stopped_by_interrupt(tid)), None)
        if ready is None:
            raise NoThreadReady(f"no thread of process {self.pid} is stopped where it can make a system call")
        injector = Injector(ready, self._syscall_at)
        if self.areas is None:
            self.areas = Areas(self.pid, injector, self.memory)
        self.areas.injector = injector
        return self.areas

    def _place(self, key: K, displaced: Displaced, entry: bool, tids: list[int], areas: Areas,
               layout: Layout | None = None, trapped: int | None = None, chain: Chain | None = None,
               stops: bool = False) -> None:
        """``trapped``: where an int3 stood until now (the site's own, or a return's inside the bytes the
        jump takes); a thread one byte past it has just run it
        (no other way leads there while it is in) and its trap is still to be served: it stays, and
        the tracer rewinds it onto the site, where the jump then is (its call counted there)."""
        number = len(self.placed)
        ring.hits_at(number)  # (ValueError past the last)
        own: Area | None = None
        if layout is not None:
            own = areas.data_area(displaced.site, layout.size)
            assert own.local is not None
            probe_ring = Ring(own.local, layout.record_type, layout.slots)
            probe_ring.initialise()
            probe_ring.only_count(self._only_counting)  # (put in while the budget rests: it rests too)
            pid = procfs.own_pid(self.pid)

            def made(at: int) -> tuple[bytes, int]:
                assert own is not None and layout is not None
                return reading(displaced, at, own.address, number, entry, layout, pid, self.fsgsbase)
        elif stops:
            stop = self._stop(displaced.site, areas)

            def made(at: int) -> tuple[bytes, int]:
                return stop_only(displaced, at, stop)

            def ready(at: int, moved_at: int) -> None:  # (its stop written and armed before the jump goes in)
                self.memory.write(stop, stopping(stop, at + moved_at))
                self.table.arm(stop)
        elif chain is not None:
            pid = procfs.own_pid(self.pid)
            stop = self._stop(displaced.site, areas)

            def made(at: int) -> tuple[bytes, int]:
                assert self.data is not None and chain is not None
                return filtering(displaced, at, self.data.address, number, entry, chain, pid, stop, self.fsgsbase)

            def ready(at: int, moved_at: int) -> None:  # (its stop written and armed before the jump goes in:
                self.memory.write(stop, stopping(stop, at + moved_at))  # no call it lets through goes unseen)
                self.table.arm(stop)
        else:
            def made(at: int) -> tuple[bytes, int]:
                assert self.data is not None
                return recording(displaced, at, self.data.address, number, entry, self.fsgsbase)
        try:
            self._place_code(key, displaced, number, made, tids, areas, trapped + 1 if trapped is not None else None,
                             ready if chain is not None or stops else None)
        except BaseException:
            if own is not None:
                with contextlib.suppress(InjectionError):
                    areas.remove(own)
            if chain is not None or stops:
                self.table.disarm(stop)  # (armed by ready(), its jump never in: its page may go at the end)
            raise
        if own is not None:
            self.placed[-1].layout, self.placed[-1].ring, self.placed[-1].area = layout, probe_ring, own
        if chain is not None or stops:
            self.placed[-1].trap = stop
            self.placed[-1].tested = chain is not None
            self._stops_used += STOP

    def _stop(self, near: int, areas: Areas) -> int:
        """Where the next filtering probe's stop goes (the stops' page made at the first)."""
        if self.stops is not None and self._stops_used + STOP > self.stops.size:
            raise Refused(f"no room for more than {self.stops.size // STOP} filtering probes")
        if self.stops is None:
            self.stops = areas.stops_page(near)
        return self.stops.address + self._stops_used

    def room(self, near: int, size: int, areas: Areas) -> tuple[Area, int]:
        """Where ``size`` bytes of code go within a rel32's reach of ``near`` (a code area made when none
        has room), taken: the area, and the address."""
        code = next((c for c in self.codes if abs(c.address - near) < REACH
                     and self._used[c.address] + size <= c.size), None)
        if code is None:
            code = areas.code_page(near, CODE_SIZE)
            self.codes.append(code)
            self._used[code.address] = 0
        at = code.address + self._used[code.address]
        self._used[code.address] += (size + 15) // 16 * 16
        return code, at

    def own_area(self, area: Area) -> None:
        """An area made through ``areas_for``'s Areas that goes with the code areas (unmapped with them, its
        words on a stack keeping them), no code of the probes' put in it."""
        self.codes.append(area)
        self._used[area.address] = area.size

    def _place_code(self, key: K, displaced: Displaced, number: int, made: Callable[[int], tuple[bytes, int]],
                    tids: list[int], areas: Areas, past_int3: int | None = None,
                    ready: Callable[[int, int], None] | None = None) -> None:
        size = len(made(displaced.site)[0])
        code, at = self.room(displaced.site, size, areas)
        body, moved_at = made(at)
        assert code.local is not None
        code.local[at - code.address:at - code.address + len(body)] = body
        for tid in tids:  # a thread inside the bytes the jump takes: on to its instruction's copy
            try:
                regs = calls.get_registers(tid)
                if displaced.site < int(regs.rip) < displaced.back and int(regs.rip) != past_int3:
                    regs.rip = at + moved_at + (int(regs.rip) - displaced.site)
                    calls.set_registers(tid, regs)
            except (SamplerError, PtraceError) as e:
                if self._alive(tid):  # (not one that ended meanwhile)
                    raise InjectionError(f"thread {tid} of process {self.pid} cannot be looked at ({e}): "
                                         "no jump goes in while it could stand in its bytes") from None
        if ready is not None:
            ready(at, moved_at)
        self.table.write_jump(displaced.site, jump(displaced.site, at))
        self.placed.append(Placed(key, number, displaced, at, moved_at))
        self.counts[number] = Counts()

    def _learn(self, tids: list[int]) -> None:
        """The fs base of each held thread (a record names its thread by it)."""
        for tid in tids:
            with contextlib.suppress(SamplerError, OSError):
                self.threads[int(calls.get_registers(tid).fs_base)] = tid

    # -- the records -----------------------------------------------------------------------------

    def drain(self, live: Callable[[], list[int]] | None = None) -> Drained | None:
        """The records written since the last drain (None when there are none); a thread not known
        yet is learnt by holding it (``live``: the threads sampler traces)."""
        if self.ring is None or self.clock is None:
            last, self._last = self._last, None
            return last
        records = self.ring.drain()
        self._count()
        if not len(records):
            return None
        import numpy as np

        # the ring is memory the target can write: a record that names no counting probe of sampler's (a
        # thread of the target took a ticket and wrote it) is dropped and counted, never looked up (the
        # numbers a drain holds are counted anyway: only a drain with a stranger among them is filtered)
        counting = {p.number for p in self.placed if p.ring is None and p.trap is None}
        numbers, recorded = np.unique(records["probe"], return_counts=True)
        if not set(numbers.tolist()) <= counting:
            ours = np.isin(records["probe"], np.array(sorted(counting), dtype="<u4"))
            self.forged += int((~ours).sum())
            records = records[ours]
            if not len(records):
                return None
        self.clock.update()
        threads = self._names(records["fs"], live)
        for number, count in zip(numbers.tolist(), recorded.tolist()):
            if number in counting and number in self.counts:
                self.counts[number].recorded += count
        return Drained(records["probe"], threads, self.clock.seconds(records["tsc"]))

    def _names(self, bases: np.ndarray, live: Callable[[], list[int]] | None) -> list[str]:
        """The thread of each fs base (its id; one not known yet learnt by holding the threads ``live``
        gives that are new)."""
        import numpy as np

        unique, inverse = np.unique(bases, return_inverse=True)
        if set(unique.tolist()) - set(self.threads) and live is not None:
            known = set(self.threads.values())
            new = [tid for tid in live() if tid not in known]
            if new:
                with contextlib.suppress(SamplerError), self.hold(new) as tids:
                    self._learn(tids)
        names = np.array([str(self.threads[base]) if base in self.threads else f"fs {base:#x}"
                          for base in unique.tolist()], dtype=object)
        threads: list[str] = names[inverse].tolist()
        return threads

    def drain_read(self, live: Callable[[], list[int]] | None = None) -> list[Read]:
        """The reading probes' records written since the last drain (threads as ``drain`` names them)."""
        if not self._open or self.clock is None:
            last, self._last_read = self._last_read, []
            return last
        out = []
        self._count()
        for placed in self.placed:
            if placed.ring is None:
                continue
            records = placed.ring.drain()
            if not len(records):
                continue
            self.clock.update()
            self.counts[placed.number].recorded += len(records)
            self.counts[placed.number].ticks += int(records["flags"].sum(dtype="u8"))
            out.append(Read(placed, records, self._names(records["fs"], live), self.clock.seconds(records["tsc"])))
        return out

    def _count(self) -> None:
        hits, drops = self.ring.counters(len(self.placed)) if self.ring is not None else (None, None)
        for placed in self.placed:
            counts = self.counts[placed.number]
            if placed.ring is not None:
                counts.hits, counts.dropped = placed.ring.hits(0), placed.ring.drops(0)
            elif hits is not None and drops is not None:
                counts.hits, counts.dropped = int(hits[placed.number]), int(drops[placed.number])

    def only_count(self, on: bool) -> None:
        """Every probe only counts its hits (``on``: no record, no read: the cheapest they can be), or
        records and reads again."""
        self._only_counting = on
        for counted in [self.ring, *(placed.ring for placed in self.placed)]:
            if counted is not None:
                counted.only_count(on)

    def spent_s(self) -> float:
        """The probes' own time in the target so far: a reading probe's from its records (each clocks
        itself with the TSC; those not read yet at the mean of those read, READ_NS before any), a
        counting probe's estimated (RECORDED_NS, COUNTED_NS a hit)."""
        if self.clock is None:
            return 0.0
        self._count()
        ns = 0.0
        for placed in self.placed:
            counts = self.counts[placed.number]
            if placed.ring is not None:
                pending = max(0, placed.ring.head() - placed.ring.tail)
                own = counts.ticks * self.clock.ns_per_tick
                mean = own / counts.recorded if counts.recorded else READ_NS
                ns += own + pending * mean + max(0, counts.hits - counts.recorded - pending) * COUNTED_NS
            else:
                ns += counts.recorded * RECORDED_NS + max(0, counts.hits - counts.recorded) * COUNTED_NS
        return ns / 1e9

    def read_ns(self, number: int) -> float | None:
        """A reading probe's mean time a recorded call, clocked in the target (None: none recorded)."""
        counts = self.counts[number]
        if not counts.recorded or self.clock is None:
            return None
        return counts.ticks * self.clock.ns_per_tick / counts.recorded

    def key_of(self, number: int) -> K:
        return self.placed[number].key

    # -- out -------------------------------------------------------------------------------------

    def take_out(self) -> None:
        """Every jump out (the code as it was), then the pages unmapped when no thread can be in
        them or return into them; what stays is said in ``left``."""
        for attempt in range(TAKE_OUT_HOLDS):
            try:
                self._take_out()
                return
            except NotHeld:  # (a vfork's parent waits for its child, whose first stop is still to serve: served,
                if attempt == TAKE_OUT_HOLDS - 1:  # then again; what is out already stays out)
                    raise
                self.wait(VFORK_WAIT_S)

    def _take_out(self) -> None:
        if not self.placed and not self.codes and self.data is None:
            return
        jumps = [placed.displaced.site for placed in reversed(self.placed)]
        while jumps:  # (in batches as they went in, the threads let go between: BATCH_S held at most)
            with self.hold(None):
                began = time.monotonic()
                while jumps and (time.monotonic() - began < BATCH_S):
                    self.table.take_jump_out(jumps.pop())
            if jumps:
                self.wait(BETWEEN_S)
        for attempt in range(TAKE_OUT_TRIES):
            with self.hold(None) as tids:
                if self._out_of_trampolines(tids):
                    self._count()
                    why = self._returns_into_pages(tids) or (GO_STAYS.format(pid=self.pid, pages=self._pages())
                                                             if self.go else "")
                    if why:
                        self.left = why
                        return
                    try:
                        self._unmap(tids)
                        return
                    except NoThreadReady:  # (its stop served meanwhile, a thread is held by the interrupt next)
                        if attempt == TAKE_OUT_TRIES - 1:
                            self.left = (f"the in-process probes' pages could not be unmapped in process {self.pid} "
                                         f"(no thread of it could make a system call): {self._pages()} stay, unused")
                            return
            self.wait(0.001)  # (the thread in a trampoline runs out of it: a stop of its own served too)
        self._count()
        self.left = (f"a thread of process {self.pid} stayed inside an in-process probe's trampoline for "
                     f"{TAKE_OUT_TRIES} ms: the probes' pages stay mapped ({self._pages()}), unused")

    def _out_of_trampolines(self, tids: list[int]) -> bool:
        """Threads in a trampoline's copy of the displaced instructions moved back to the site's own;
        False when one is in a recording part (it must run out of it first)."""
        clear = True
        for tid in tids:
            try:
                regs = calls.get_registers(tid)
            except (SamplerError, PtraceError):
                clear = clear and not self._alive(tid)  # (alive and not held: where it is is not known)
                continue
            pc = int(regs.rip)
            at = bisect.bisect_right(self.copies, pc) - 1
            if at >= 0 and pc < self.copies[at] + COPY:
                clear = False  # (in an int3's out-of-line copy: it runs out of it, on to the program's code)
                continue
            for placed in self.placed:
                start = placed.trampoline + placed.moved_at
                if placed.trampoline <= pc < start or (placed.trap is not None and
                                                        placed.trap <= pc <= placed.trap + STOP):
                    clear = False  # (one at a filtering probe's stop: its trap served, it goes back on)
                elif start <= pc <= start + placed.displaced.size:
                    regs.rip = placed.displaced.site + (pc - start)  # (its end: the jump back's target)
                    try:
                        calls.set_registers(tid, regs)
                    except (SamplerError, PtraceError):
                        clear = False
        return clear

    def _registers(self, tids: list[int]) -> list[Any]:
        """The registers of each held thread that can be read."""
        found = []
        for tid in tids:
            with contextlib.suppress(SamplerError, PtraceError):
                found.append(calls.get_registers(tid))
        return found

    def _alive(self, tid: int) -> bool:
        return os.path.exists(f"/proc/{self.pid}/task/{tid}")

    def _returns_into_pages(self, tids: list[int]) -> str:
        """Why the pages must stay: a word on a thread's stack that points into a code area (a
        signal frame's saved pc: its handler returns there); '' when none does."""
        if not self.codes:
            return ""
        maps = procfs.maps(self.pid)
        for tid in tids:
            try:
                regs = calls.get_registers(tid)
            except SamplerError:
                continue
            sp = int(regs.rsp)
            top = self._stack_top(sp, int(regs.fs_base), maps)
            if top is None:
                continue
            start = sp // 8 * 8
            try:
                words = _words(self.memory.read(start, top - start))
            except UnreadableMemory:
                continue
            for code in self.codes:
                if bool(((words >= code.address) & (words < code.address + code.size)).any()):
                    return (f"thread {tid}'s stack holds a return into an in-process probe's trampoline (a "
                            f"signal handler that interrupted it?): the probes' pages stay mapped in process "
                            f"{self.pid} ({self._pages()}), unused")
        return ""

    def _no_saved_pc_inside(self, tids: list[int], displaced: Displaced) -> None:
        """ValueError when a held thread's stack, near its top, holds an address inside the bytes the jump
        would take (past the first): a signal handler's saved pc, which its sigreturn would resume in the
        middle of the jump (a thread stopped there itself is moved; one in a handler cannot be). At a
        function's entry no thread can be (no pc between a call and its first instruction)."""
        tid = self._saved_pc_inside(tids, displaced, SIGNAL_SCAN)
        if tid is not None:
            raise ValueError(f"thread {tid}'s stack holds an address inside the bytes the jump at "
                             f"{displaced.site:#x} would take (a signal handler's saved pc?)")

    def _saved_pc_inside(self, tids: list[int], displaced: Displaced, scan: int) -> int | None:
        """The first of ``tids`` whose stack, ``scan`` bytes from its pointer up (within its mapping), holds an
        address inside the jump's bytes, past the first; None when none does."""
        maps = procfs.maps(self.pid)
        for tid in tids:
            try:
                regs = calls.get_registers(tid)
            except (SamplerError, PtraceError):
                continue
            sp = int(regs.rsp) // 8 * 8
            mapping = next((m for m in maps if m.start <= sp < m.end), None)
            if mapping is None:
                continue
            try:
                words = _words(self.memory.read(sp, min(mapping.end, sp + scan) - sp))
            except UnreadableMemory:
                continue
            if bool(((words > displaced.site) & (words < displaced.back)).any()):
                return tid
        return None

    def _stack_top(self, sp: int, fs_base: int, maps: list[procfs.Mapping]) -> int | None:
        """Where the stack the thread runs on ends: a Go thread's, its goroutine's (g.stack.hi: the
        g is the word below its fs base; goroutine and signal stacks lie among other data, whose stale
        words would say nothing); another's, its mapping's end (STACK_SCAN at most)."""
        if self.go and fs_base:
            with contextlib.suppress(UnreadableMemory):
                g = int.from_bytes(self.memory.read(fs_base - 8, 8), "little")
                low, high = struct.unpack("<QQ", self.memory.read(g, 16))
                if low <= sp < high and high - sp <= STACK_SCAN:
                    return int(high)
            return None
        mapping = next((m for m in maps if m.start <= sp < m.end), None)
        return None if mapping is None else min(mapping.end, sp // 8 * 8 + STACK_SCAN)

    def _unmap(self, tids: list[int]) -> None:
        """The pages unmapped; NoThreadReady (nothing done) when no held thread can make the calls (every one
        stopped at an event of its own still to serve: an int3's hit at the run's end)."""
        areas = self.areas_for(tids)
        self._last = self.drain()  # (what the threads wrote since the last drain: drain() gives it once more)
        self._last_read = self.drain_read()
        self._open = False
        self.ring = None  # (its view of the data area goes first: a mapping with a view cannot close)
        for placed in self.placed:
            placed.ring = None
        try:
            for area in self._areas_made():
                areas.remove(area)
        except InjectionError as e:
            self.left = (f"the in-process probes' pages could not be unmapped in process {self.pid} ({e}): "
                         f"{self._pages()} stay, unused")
            return
        self.codes, self.data, self.ring, self.stops = [], None, None, None
        for placed in self.placed:
            placed.area = None

    def _areas_made(self) -> list[Area]:
        return [*self.codes, *([self.data] if self.data is not None else []),
                *([self.stops] if self.stops is not None else []),
                *(placed.area for placed in self.placed if placed.area is not None)]

    def _pages(self) -> str:
        areas = self._areas_made()
        return ", ".join(f"{a.size >> 10} KiB at {a.address:#x}" for a in areas)

    def close(self) -> None:
        """Sampler's own views of the pages closed (the target's stay as ``take_out`` left them)."""
        self.ring = None
        self._open = False
        for placed in self.placed:
            placed.ring = None
        for area in self._areas_made():
            if area.local is not None:
                with contextlib.suppress(BufferError):
                    area.local.close()
        self.codes, self.data, self.ring, self.stops = [], None, None, None
        for placed in self.placed:
            placed.area = None


GO_STAYS = ("the in-process probes' pages stay mapped in process {pid} ({pages}), unused: a goroutine Go "
            "preempted inside a trampoline keeps its return there on its own stack, not a thread's, and may run "
            "again at any time")
"""Go's asynchronous preemption (SIGURG) pushes the interrupted pc onto the goroutine's stack and parks the
goroutine: burst-go, its pages unmapped, died at a trampoline's address when one ran again."""
PUT_TRIES = 50
TAKE_OUT_HOLDS = 5
"""Times the take-out is tried when a thread would not stop for it (a vfork's parent: interrupted traces of
forker left its jump in, 1 of 70)."""
VFORK_WAIT_S = 0.05
BATCH_S = 0.015
"""The work of putting probes in (or taking them out) with the threads held once, at most: the hold, with
its journal's write, stopping them and letting them go, stays under 50 ms as the target clocks it."""
MAX_BATCH = 256
"""Sites a batch looks at, at most (Go's checks of its held threads run over each of them)."""
MIN_BATCH = 8
"""Sites a batch puts in whatever its time: a few go in at once, counting from the same moment (a function's
clones, its inlined copies)."""
BETWEEN_S = 0.01
"""How long the threads run between two batches: let go and held again at once, a thread the scheduler
had not run yet saw the two holds as one (62 ms by stall's clock, two batches of 28 ms)."""
STOP = 16
"""Bytes of a filtering probe's stop (6 used: the nop sampler arms and a jump back)."""
RECORDED_NS = 17.0
COUNTED_NS = 5.0
"""A counting probe's hit, recorded or only counted (the ring full, or the budget resting): the most
bench/inprocess.py measured (docs/cost.md: 6-17 ns recorded, 3 ns counted, 1 and 8 threads); a hit
only counted while the budget rests cost burst's calls 4.9 ns (1 thread, 2026-12-05)."""
READ_NS = 3000.0
"""A reading probe's hit before any of its records is read (then: their mean): the most bench/inprocess.py
measured of two fields (1.2-2.8 us)."""
INTERRUPTED = signal.SIGTRAP | (0x80 << 8)
"""si_code of a stop by PTRACE_INTERRUPT (PTRACE_EVENT_STOP)."""


def _words(data: bytes) -> np.ndarray:
    """Bytes as little-endian 64-bit words."""
    import numpy as np

    return np.frombuffer(data, "<u8")


class NoThreadReady(InjectionError):
    """Every held thread was stopped inside a system call of its own (an event's stop), or a Go
    goroutine is parked inside a site's bytes: the threads are let go ``wait_s`` and held again."""

    def __init__(self, message: str, hint: str | None = None, wait_s: float = 0.001) -> None:
        super().__init__(message, hint)
        self.wait_s = wait_s


PARKED_WAIT_S = 0.02
"""Between tries while a goroutine is parked inside a site's bytes: Go gives a goroutine 10 ms a turn,
and on 2 cores 8 busy goroutines each wait their turn for 30 ms and more."""


SIGURG_BIT = 1 << (signal.SIGURG - 1)


def _in_go_handler(pid: int, tid: int) -> bool:
    """A Go thread held inside a signal handler (Go blocks every signal while one runs, SIGURG among them; its
    threads run with SIGURG open otherwise): the pc its sigreturn goes back to, in the signal frame on the
    signal stack, is where the signal came. A preemption's SIGURG came at any instruction: in a jump's bytes
    too (a thread stepped past an int3 stands there), and no thread's registers or parked goroutine says
    so; burst-go died at the site + 4 once so."""
    blocked = procfs.blocked_signals(pid, tid)
    return blocked is not None and bool(blocked & SIGURG_BIT)


def _stopped_by_interrupt(tid: int) -> bool:
    try:
        info = calls.get_siginfo(tid)
    except SamplerError:
        return False
    if info is None:
        return False
    signo, _, code = struct.unpack_from("<iii", info)
    return bool(signo == signal.SIGTRAP and code == INTERRUPTED)


class Reader(Protocol):
    def read(self, address: int, size: int) -> bytes: ...


@dataclass
class Plan:
    """Whether a site can take an in-process probe, decided before anything is held."""

    displaced: Displaced | None = None
    entry: bool = False
    why_not: str = ""
    notes: list[str] = field(default_factory=list)


def branched_into(module: Module, displaced: Displaced) -> str:
    """Why the jump cannot go in: a direct branch from elsewhere in the module lands inside the bytes it takes
    (the function's own are displace()'s); '' when none does."""
    try:
        found = module.branch_into(displaced.site - module.bias, displaced.back - module.bias)
    except BadFile as e:
        return f"the code of {module.name} cannot be looked at for branches into the jump's bytes ({e})"
    if found is None:
        return ""
    return (f"a branch elsewhere in {module.name} lands at {found + module.bias:#x}, inside the bytes the jump "
            f"would take ({displaced.site:#x}-{displaced.back:#x})")


def plan(memory: Memory | Reader, start: int, size: int, site: int, module: Module | None = None) -> Plan:
    """The instructions a jump at ``site`` displaces, in the function at ``start`` (``size`` bytes),
    or why it cannot take one (``module``: the function's, whose other code may branch into it)."""
    from sampler.inprocess.relocate import MAX_FUNCTION, displace

    if size <= 0 or size > MAX_FUNCTION:
        return Plan(why_not=f"the size of the function holding {site:#x} is not known")
    try:
        code = memory.read(start, size)
        displaced = displace(code, start, site, memory.read)
    except UnreadableMemory as e:
        return Plan(why_not=f"its code cannot be read ({e})")
    except Refused as e:
        return Plan(why_not=str(e))
    why = branched_into(module, displaced) if module is not None else ""
    if why:
        return Plan(why_not=why)
    entry = site == start or (code[:4] == b"\xf3\x0f\x1e\xfa" and displaced.site == start + 4)
    return Plan(displaced, entry)
