"""How long each call of a Python function took: trace --at py:F --latency (int3s).

A call starts where the interpreter starts F's frame (python/probes.py: the Python probe's places,
filtered by code object) and is keyed by its frame's address. It ends:

- where its own call of _PyEval_EvalFrameDefault returns, the one whose stack pointer is the entry's
  (returns.py finds every ``ret``): 3.8-3.10 run every frame in a call of its own; 3.11 and later
  those started from C (a generator resumed by next(), a callback; the probe's place at the eval
  loop's entry);
- 3.11 and later, where its frame is cleared: the entry of _PyFrame_Clear (3.11) or
  _PyFrame_ClearExceptCode (3.12, 3.13), the frame in rdi. A Python-to-Python call returns inside
  the same call of the eval loop, and its frame is cleared there (by a return or by an exception
  leaving it). Debian's LTO build of 3.11 also has that function inlined in a dozen places (its
  generators' end among them): the eval loop's return is the end those frames are seen by.

A frame that left the eval loop by a yield or an await (3.8/3.9: its f_stacktop kept; 3.10: its
f_state; 3.11 and later: its generator's gi_frame_state) is still open: its next run goes on with the
same call; a run that is not its first (3.8-3.10: f_lasti not -1; 3.11 and later: left at a YIELD_VALUE,
not at the RETURN_GENERATOR that made it) of a frame not seen starting is of a generator under way
when the trace began: no row (its end is counted with the returns whose entry was not seen). So in
every version a generator or coroutine is one call from its first start to its end,
its suspensions inside it (an ``async def`` handler's latency is its whole request); the frame a
generator function's call makes only to make the generator (3.11, 3.12) is not a call.

With --probe int3, every Python call of the process stops at the start's int3 and at the ends'; in-process
(the default), a test in the target lets only F's frames through at the start and at the frame clear, and
every frame started from C still stops at the eval loop's returns (3.8-3.10: every frame). Sampler's own stops
inside a call are taken out of its time, as for native calls, but the kernel's part of each stays in
it (the row says how many there were). Not a generator's or coroutine's: while it is suspended its
thread runs other code, whose stops are no part of it, so its time is its wall time (its rows say so).
A start at a frame whose call is still open, not a generator's next run, is another call: the open
one's end was not seen (counted).
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable

from sampler import notice
from sampler.backends.ptrace.latency import Latency
from sampler.backends.ptrace.site import Site
from sampler.config import SessionConfig
from sampler.debuginfo.modules import Modules
from sampler.errors import LocationNotFound, UsageError
from sampler.probes.returns import return_points
from sampler.process.guard import Guard
from sampler.process.memory import Memory
from sampler.process.tasks import Hit
from sampler.python.objects import Unreadable
from sampler.python.probes import EVAL, PyProbe, dwarf_function
from sampler.sample import Reading

FRAME_CLEAR = {(3, 11): "_PyFrame_Clear", (3, 12): "_PyFrame_ClearExceptCode", (3, 13): "_PyFrame_ClearExceptCode"}
"""Where 3.11 and later clear every frame they are done with (its first argument)."""
OWNED_BY_GENERATOR = 1
RETURN_GENERATOR = {(3, 11): 75, (3, 12): 75, (3, 13): 35}
"""The opcode that makes a generator's frame (opcode.opmap, per version)."""
"""A frame's owner: its generator (3.11 and later)."""
MAX_RUNNING = 65536
"""Runs of the function's frames in their own call of the eval loop, under way (entered, their return not
seen), kept at most."""


class PyLatency(Latency):
    """The open calls of a Python function, keyed by frame, and the rows their ends make."""

    def __init__(self, column: int, sites: list[Site]) -> None:
        super().__init__(column, {site: [] for site in sites}, is_go=False, to=False)
        probe = sites[0].python
        assert probe is not None
        self.probe: PyProbe = probe
        self.version = probe.interpreter.version
        self.running: OrderedDict[tuple[int, int], int] = OrderedDict()
        """3.8-3.10: (thread, stack pointer at the eval loop's entry) of each run of a frame of F."""
        self.started: dict[int, int] = {}
        """Each open call's frame: the thread it started on."""
        self.by_thread: dict[int, set[int]] = {}
        """The open calls (not a generator's) of each thread: its stops for sampler are inside them."""
        self.before_trace: set[int] = set()
        """Frames of generators or coroutines under way when the trace began (their runs give no row)."""
        self.own_returns: set[int] = set()
        """The eval loop's returns (the other end, 3.11 and later, is the frame clear's entry)."""
        self.clear_at: int | None = None
        """3.11 and later: the frame clear's entry (its int3 moves to a filtering probe's stop when its test
        goes in-process: ``tested_at``)."""

    def tested_at(self, stop: int) -> None:
        """The frame clear's test is in the target: its calls of F's frames stop at ``stop`` (the frame still
        in rdi), every other frame's clear goes on."""
        assert self.clear_at is not None
        self.ends.discard(self.clear_at)
        self.ends.add(stop)

    def find_ends(self, config: SessionConfig, modules: Modules, sites: dict[int, Site],
                  check: Callable[[Site], None]) -> None:
        where = f"--at {config.location} --latency"
        interpreter = self.probe.interpreter
        module = interpreter.module
        entry = next((site.address for site in self.returns
                      if site.python is not None and (site.python.at_entry or self.version < (3, 11))), None)
        said = []
        if entry is not None:
            found = return_points(modules, entry)
            if found.why_not:
                raise LocationNotFound(f"{where}: the returns of {EVAL} cannot be found: {found.why_not}", "")
            self.ends.update(found.addresses)
            self.own_returns.update(found.addresses)
            said.append(f"{len(found.addresses)} return(s) of {EVAL}")
        if self.version >= (3, 11):
            name = FRAME_CLEAR[min(self.version, max(FRAME_CLEAR))]
            debug, function = dwarf_function(interpreter, name, where, "ends a frame")
            pieces = debug.functions_of(function)
            self.clear_at = (pieces[0].low if pieces else function.low) + module.bias
            self.ends.add(self.clear_at)
            said.append(f"{name}'s entry, where each Python frame is cleared")
        if not config.quiet:
            notice.say(f"{where}: a breakpoint at {' and at '.join(said)} (every Python call of the process "
                       "stops there too, unless its test goes in-process: said below)")
        both = self.ends & set(sites)
        if both:
            raise UsageError(f"{next(iter(both)):#x} is both where a call starts and where one ends", "")

    def hit(self, hit: Hit, site: Site | None, memory: Memory, waiting: float, let_go: Callable[[Hit], None],
            guard: Guard) -> Reading | None:
        """A start's hit (F's frame: its row waits; another function's: let go) or an end's (the row of
        F's call it ends, or None)."""
        objects = self.probe.interpreter.objects
        objects.reading = memory.read
        try:
            if site is None:
                return self._end(hit, let_go)
            started = self._start(hit, site)
        finally:
            objects.reading = None
        if started is None:
            self._let_go(hit, let_go)
            return None
        frame, first = started
        reading = site.read_hit(memory, hit, waiting, let_go, guard)
        began = hit.resumed or hit.seen
        self._stalled(hit.tid, max(0.0, began - hit.seen))  # (inside the thread's other open calls)
        if frame in self.started and self.generator and not first:
            return None  # (a generator's or coroutine's next run: its call goes on)
        self._forget(frame)  # (a call open at this frame whose end was not seen: counted by Calls.enter)
        self.started[frame] = hit.tid
        if not self.generator:
            self.by_thread.setdefault(hit.tid, set()).add(frame)
        self.open(site, frame, 0, began, reading)
        if len(self.started) > self.calls.total:  # (past the bound of open calls: the oldest dropped)
            for dropped in [f for f in self.started if not self.calls.has(f)]:
                self._forget(dropped)
        return None

    @property
    def generator(self) -> bool:
        return self.probe.generator

    def _start(self, hit: Hit, site: Site) -> tuple[int, bool] | None:
        """(F's frame that the hit thread starts (probes.py), whether it is a generator's first run), or
        None."""
        probe = site.python
        assert probe is not None
        try:
            frame = probe.started(hit.registers, hit.tid)
            first = frame is not None and self.generator and self._first_run(frame)
        except Unreadable:
            return None
        if frame is not None and self.generator and not first and frame not in self.started:
            if len(self.before_trace) < MAX_RUNNING:  # (a generator or coroutine under way before the trace began:
                self.before_trace.add(frame)          # its time is not known; its end is counted with them)
            return None
        if frame is None:
            return None
        if self.version < (3, 11) or probe.at_entry:
            key = (hit.tid, int(hit.registers.rsp))
            self.running[key] = frame
            self.running.move_to_end(key)
            if len(self.running) > MAX_RUNNING:  # (the oldest thread's runs all go: a key left of it could
                oldest = next(iter(self.running))[0]  # be met again at the same stack depth by another frame)
                for stale in [k for k in self.running if k[0] == oldest]:
                    del self.running[stale]
        return frame, first

    def _first_run(self, frame: int) -> bool:
        """A generator's or coroutine's frame starts its first run (not a resume): 3.8-3.10, its f_lasti
        is -1; 3.11 and later, the instruction it was left at is the RETURN_GENERATOR that made it (3.11,
        3.12: at the frame's instruction pointer; 3.13: the one before it), not a YIELD_VALUE."""
        interpreter = self.probe.interpreter
        objects, layout = interpreter.objects, interpreter.layout
        if self.version < (3, 11):
            return int.from_bytes(objects.read(frame + layout["frame.lasti"], 4), "little", signed=True) == -1
        pointer = objects.word(frame + layout["iframe.instr"]) - (2 if self.version >= (3, 13) else 0)
        return objects.read(pointer, 1)[0] == RETURN_GENERATOR[min(self.version, max(RETURN_GENERATOR))]

    def _end(self, hit: Hit, let_go: Callable[[Hit], None]) -> Reading | None:
        frame = self.running.pop((hit.tid, int(hit.registers.rsp)), None)  # (the eval loop's return)
        if frame is None and self.version >= (3, 11) and hit.address not in self.own_returns:
            frame = int(hit.registers.rdi)  # (the frame clear's entry)
        elif frame is not None and self._suspended(frame):
            frame = None  # (a yield or an await: its call goes on at its next run)
        if frame is not None and frame in self.before_trace and not self._suspended(frame):
            self.before_trace.discard(frame)
            self.before += 1  # (its end: said with the returns whose entry was not seen)
        if frame is None or frame not in self.started:
            self._let_go(hit, let_go)
            return None
        late_since, pause_s = self.let_end_go(hit, let_go)
        self._forget(frame)
        rows = self.close(frame, 0, hit.seen, pause_s, hit.address, lambda _site: [], late_since, by_int3=True)
        self._stalled(hit.tid, pause_s)
        if not rows:
            return None
        row = rows[0][1]
        if self.generator:
            said = ("latency_us of a generator or coroutine runs from its first run to its end: its suspensions, "
                    "and sampler's stops meanwhile, are in it")
            row = dataclasses.replace(row, error="; ".join(e for e in (row.error, said) if e))
        return row

    def _forget(self, frame: int) -> None:
        tid = self.started.pop(frame, None)
        if tid is not None and tid in self.by_thread:
            self.by_thread[tid].discard(frame)
            if not self.by_thread[tid]:
                del self.by_thread[tid]

    def _suspended(self, frame: int) -> bool:
        """The frame left the eval loop by a yield or an await (3.8/3.9: its f_stacktop kept; 3.10: its
        f_state; 3.11 and later: a generator's frame, its generator's gi_frame_state): negative, a
        suspension, in every version."""
        objects, layout = self.probe.interpreter.objects, self.probe.interpreter.layout
        try:
            if self.version >= (3, 11):
                if objects.read(frame + layout["iframe.owner"], 1)[0] != OWNED_BY_GENERATOR:
                    return False
                state = frame - layout["gen.iframe"] + layout["gen.frame_state"]
                return int.from_bytes(objects.read(state, 1), "little", signed=True) < 0
            if self.version >= (3, 10):
                return int.from_bytes(objects.read(frame + layout["frame.state"], 1), "little", signed=True) < 0
            return objects.word(frame + layout["frame.stacktop"]) != 0
        except Unreadable:
            return False

    def _let_go(self, hit: Hit, let_go: Callable[[Hit], None]) -> None:
        """Another function's start or end: on at once; its stop is inside the open calls of its thread."""
        let_go(hit)
        hit.resumed = hit.resumed or time.monotonic()
        self._stalled(hit.tid, max(0.0, hit.resumed - hit.seen))

    def _stalled(self, tid: int, seconds: float) -> None:
        """The thread stopped for sampler: inside each call it has under way (a generator's or coroutine's
        are not taken out: its thread runs other code while it is suspended)."""
        for frame in self.by_thread.get(tid, ()):
            self.calls.stalled(frame, seconds)
