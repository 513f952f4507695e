"""How long each call of a Python function took: trace --at py:F --latency (int3s).

A call starts where the interpreter starts F's frame (python/probes.py: the Python probe's places,
filtered by code object) and is keyed by its frame's address. Where it ends depends on the version:

- 3.8-3.10 run each frame in its own call of _PyEval_EvalFrameDefault: the call ends at that C
  function's return (returns.py finds every ``ret``), the one whose stack pointer is the entry's. A
  generator's or coroutine's frame that returned by a yield or an await (3.8/3.9: its f_stacktop set;
  3.10: f_state FRAME_SUSPENDED) is still open: its next run goes on with the same call.
- 3.11 and later run Python-to-Python calls inside one call of the eval loop: the call ends where its
  frame is cleared, at the entry of _PyFrame_Clear (3.11) or _PyFrame_ClearExceptCode (3.12, 3.13),
  the frame in rdi. Every frame is cleared there once, by a return or by an exception leaving it; a
  generator's or coroutine's own frame when it finishes (or is destroyed unfinished). The frame that
  a generator function's call makes, and that only makes the generator (RETURN_GENERATOR: thread-owned,
  and never cleared there), is not a call: the generator is timed from its first start.

So in every version a generator or coroutine is one call from its first start to its end, its
suspensions inside it (an ``async def`` handler's latency is its whole request). Every Python call of
the process stops at the start's int3 and, for the end, at the frame clear's (3.11 and later) or at the
eval loop's return: sampler's own stops inside a call are taken out of its time, as for native calls,
but the kernel's part of each remains in it (the row says how many there were).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable

from sampler import notice
from sampler.backends.ptrace.guard import Guard
from sampler.backends.ptrace.latency import AT_ONCE_S, Latency
from sampler.backends.ptrace.memory import Memory
from sampler.backends.ptrace.returns import return_points
from sampler.backends.ptrace.router import IDLE_UNTIL
from sampler.backends.ptrace.site import Site
from sampler.backends.ptrace.tasks import Hit
from sampler.config import SessionConfig
from sampler.debuginfo.modules import Modules
from sampler.errors import LocationNotFound, UsageError
from sampler.python.objects import Unreadable
from sampler.python.probes import EVAL, PyProbe
from sampler.sample import Reading

FRAME_CLEAR = {(3, 11): "_PyFrame_Clear", (3, 12): "_PyFrame_ClearExceptCode", (3, 13): "_PyFrame_ClearExceptCode"}
"""Where 3.11 and later clear every frame they are done with (its first argument)."""
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200
"""CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR."""
OWNED_BY_THREAD = 0
FRAME_SUSPENDED = -1
"""3.10's f_state of a frame that yielded."""
MAX_RUNNING = 65536
"""3.8-3.10: runs of the function's frames under way (entered, their return not seen) kept at most."""


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
        """Each open call's frame: the thread it started on (whose stops for sampler are inside it)."""
        self.other_ends = 0

    def find_ends(self, config: SessionConfig, modules: Modules, sites: dict[int, Site],
                  check: Callable[[Site], None]) -> None:
        where = f"--at {config.location} --latency"
        interpreter = self.probe.interpreter
        module = interpreter.module
        if self.version < (3, 11):
            entry = next(iter(self.returns)).address
            assert entry is not None
            found = return_points(modules, entry)
            if found.why_not:
                raise LocationNotFound(f"{where}: the returns of {EVAL} cannot be found: {found.why_not}", "")
            self.ends.update(found.addresses)
            said = f"{len(found.addresses)} return(s) of {EVAL}, where each Python call of the process ends"
        else:
            name = FRAME_CLEAR[min(self.version, max(FRAME_CLEAR))]
            debug = module.debug(remote=False)
            function = debug.function_named(name) if debug is not None else None
            if debug is None or function is None:
                raise LocationNotFound(f"{where}: {module.path} has no DWARF for {name}, where CPython "
                                       f"{interpreter.version_text} ends a frame",
                                       "install its debug file (Debian: python3.X-dbg) or give a build with -g")
            pieces = debug.functions_of(function)
            self.ends.add((pieces[0].low if pieces else function.low) + module.bias)
            said = f"{name}'s entry, where each Python frame of the process is cleared"
        if not config.quiet:
            notice.say(f"{where}: a breakpoint at {said} (every Python call stops there too)")
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
                return self._end(hit, memory, let_go)
            frame = self._start(hit, site)
        finally:
            objects.reading = None
        if frame is None:
            self._let_go(hit, let_go)
            return None
        reading = site.read_hit(memory, hit, waiting, let_go, guard)
        began = hit.resumed or hit.seen
        self.calls.stalled(frame, max(0.0, began - hit.seen))
        if frame not in self.started:  # (a generator's next run: the call goes on)
            self.started[frame] = hit.tid
            self.open(site, frame, 0, began, reading)
            if len(self.started) > self.calls.total:  # (past the bound of open calls: the oldest dropped)
                self.started = {f: t for f, t in self.started.items() if self.calls.has(f)}
        return None

    def _start(self, hit: Hit, site: Site) -> int | None:
        """F's frame that the hit thread starts, or None (another function's, or a generator's making)."""
        probe = self.probe
        try:
            frame = probe.frame(hit.registers, hit.tid)
            code = probe.frame_code(frame)
        except Unreadable:
            return None
        if code != probe.code:
            return None
        objects, layout = probe.interpreter.objects, probe.interpreter.layout
        if self.version >= (3, 11):
            try:
                flags = int.from_bytes(objects.read(code + layout["code.flags"], 4), "little")
                owner = objects.read(frame + layout["iframe.owner"], 1)[0]
            except Unreadable:
                return None
            if flags & GENERATOR_FLAGS and owner == OWNED_BY_THREAD:
                return None  # (RETURN_GENERATOR's frame: the generator is timed from its first run)
        else:
            key = (hit.tid, int(hit.registers.rsp))
            self.running[key] = frame
            self.running.move_to_end(key)
            if len(self.running) > MAX_RUNNING:
                self.running.popitem(last=False)
        return frame

    def _end(self, hit: Hit, memory: Memory, let_go: Callable[[Hit], None]) -> Reading | None:
        if self.version >= (3, 11):
            frame: int | None = int(hit.registers.rdi)
        else:
            frame = self.running.pop((hit.tid, int(hit.registers.rsp)), None)
            if frame is not None and self._suspended(frame):
                frame = None  # (a yield or an await: its call goes on at its next run)
        if frame is None or frame not in self.started:
            self.other_ends += 1
            self._let_go(hit, let_go)
            return None
        let_go(hit)
        hit.resumed = hit.resumed or time.monotonic()
        idle = IDLE_UNTIL[0]
        late_since = idle if hit.seen - idle >= AT_ONCE_S else None
        pause_s = max(0.0, hit.resumed - hit.seen)
        del self.started[frame]
        rows = self.close(frame, 0, hit.seen, pause_s, hit.address, lambda _site: [], late_since, by_int3=True)
        self._stalled(hit.tid, pause_s)
        return rows[0][1] if rows else None

    def _suspended(self, frame: int) -> bool:
        objects, layout = self.probe.interpreter.objects, self.probe.interpreter.layout
        try:
            if self.version >= (3, 10):
                return objects.read(frame + layout["frame.state"], 1)[0] == FRAME_SUSPENDED & 0xFF
            return objects.word(frame + layout["frame.stacktop"]) != 0
        except Unreadable:
            return False

    def _let_go(self, hit: Hit, let_go: Callable[[Hit], None]) -> None:
        """Another function's start or end: on at once; its stop is inside the open calls of its thread."""
        let_go(hit)
        hit.resumed = hit.resumed or time.monotonic()
        self._stalled(hit.tid, max(0.0, hit.resumed - hit.seen))

    def _stalled(self, tid: int, seconds: float) -> None:
        for frame, started_on in self.started.items():
            if started_on == tid:
                self.calls.stalled(frame, seconds)
