"""How long each call took, and what it returned: trace --latency (and --to) with int3 probes.

At an entry's hit the row's expressions are read as at any hit, except those that name ``retval``;
the row waits, open (pairing.py), keyed by its owner (the thread; in Go the goroutine, R14) and its
frame's height (the canonical frame address, CFA; in Go measured from the goroutine's stack top, which
moves with it when Go grows the stack). At a return's hit (returns.py: every ``ret`` of the function
and of the functions its tail calls go to) the return's CFA (its stack pointer + 8) finds its entry;
``retval`` is read from the registers the return left (rax; xmm0 for floating point; a struct of 16
bytes or less in rax:rdx, a larger one through the pointer in rax; Go's results in its register ABI's
RAX, RBX, RCX, ... and X0), and the row is written with ``latency_us``.

The clock: the call's time runs from when its thread was let go at the entry to when the return's
stop was seen; the stops for sampler inside it (a recursive call's entry and return) are taken out.
What is left in it, and not known here, is the kernel's part of two stops (the thread's wake-up after
the entry, the trap and the wake-up of sampler at the return): docs/cost.md gives it as measured
against the target's own clock.

--to B: the time from a hit of the --at place to the next hit of B on the same thread (goroutine).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import heapq
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from ptrace.binding import func as ptrace_func  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler import notice
from sampler.backends.base import Note
from sampler.backends.ptrace.site import Site
from sampler.config import SessionConfig
from sampler.debuginfo.locate import Place, resolve_all
from sampler.debuginfo.locations import InBytes, InMemory, InRegister
from sampler.debuginfo.modules import Modules
from sampler.debuginfo.types import Array, Pointer, Scalar, Struct, Type
from sampler.errors import ExpressionError, LocationNotFound, UsageError
from sampler.evaluation.evaluate import Evaluator, Object, SampleError
from sampler.evaluation.scope import ARGUMENT_TYPE, Scope
from sampler.language import casts
from sampler.language.expr import REGISTER_PREFIX, Expression, names, source_name
from sampler.language.expr import called as expr_called
from sampler.probes.columns import LATENCY as LATENCY
from sampler.probes.pairing import Calls, Open
from sampler.probes.returns import ReturnPoints, return_points
from sampler.process.guard import Guard
from sampler.process.memory import Memory, MemoryHang
from sampler.process.reads import Stop, UnreadableMemory
from sampler.process.router import IDLE_UNTIL
from sampler.process.tasks import Hit
from sampler.sample import Reading, Value

EndedRows = list[tuple[Site, Reading]]
"""The rows of the calls an event ended, each with the site of its entry."""
RETVAL = "retval"
AT_ONCE_S = 50e-6
"""A stop seen this soon after sampler woke from a sleep came while it slept (the stop woke it): its time
is known; a stop seen later may have waited while sampler was busy."""
LATE_S = 10e-6
"""How much an end's stop may have waited for sampler before its row says its latency_us is a bound."""
GO_RESULTS = ("rax", "rbx", "rcx", "rdi", "rsi", "r8", "r9", "r10", "r11")
"""The integer results of a Go function, Go's internal register ABI (the same as its arguments)."""


def names_retval(expression: Expression) -> bool:
    return RETVAL in names(expression.tree)


class Returned:
    """What ``retval`` is at a return of one function: typed by its DWARF where known."""

    def __init__(self, site: Site, is_go: bool) -> None:
        self.site = site
        self.type: Type | None = None
        self.go_words: int = 0
        """Go: how many integer result registers the first result takes (0: not in integer registers)."""
        self.why_not = ""
        place = site.place
        debug = place.module.debug() if place is not None and place.module is not None else None
        function = site.scope.function
        if debug is None or function is None:
            return  # no DWARF: rax as a 64-bit integer, as bpftrace's retval
        try:
            if is_go:
                self._go(debug, function)
            else:
                found = debug.type_of(function.die)
                self.type = found if found.size or found.name != "void" else None
                if found.name == "void" and not found.size:
                    self.why_not = f"{function.name} returns nothing (void)"
                elif isinstance(found, Scalar) and found.kind == "float" and found.size > 8:
                    self.why_not = f"a {found.name} is returned in the x87 stack (st0), which is not read"
        except Exception as e:  # (the target's DWARF: whatever pyelftools makes of a corrupted DIE)
            self.type, self.go_words = None, 0
            self.why_not = f"the debug info is corrupted ({e})"

    def _go(self, debug: object, function: object) -> None:
        from sampler.debuginfo.dies import children, origin

        def is_result(die: object) -> bool:
            for _ in range(4):  # (a function Go also inlined: its parameters name their abstract origin)
                attribute = die.attributes.get("DW_AT_variable_parameter")  # type: ignore[attr-defined]
                if attribute is not None:
                    return bool(attribute.value)
                die = origin(die, "DW_AT_abstract_origin")  # type: ignore[arg-type]
                if die is None:
                    return False
            return False

        results = [child for child in children(function.die)  # type: ignore[attr-defined]
                   if child.tag == "DW_TAG_formal_parameter" and is_result(child)]
        if not results:
            self.why_not = f"{function.name} returns nothing"  # type: ignore[attr-defined]
            return
        first = debug.type_of(results[0])  # type: ignore[attr-defined]
        self.type = first
        if isinstance(first, Scalar) and first.kind == "float":
            return
        self.go_words = max(1, (first.size + 7) // 8)
        if self.go_words > len(GO_RESULTS) or not _word_by_word(first):
            self.why_not = (f"its first result ({first.name}) is not one word a register in Go's ABI (a struct "
                            "of small fields, an array, a float inside): not read")

    @property
    def in_memory(self) -> bool:
        """The value is read from memory at the return: a struct returned in memory, or what a
        returned pointer points to (a probe that records only registers would read it too late)."""
        t = self.type
        return (isinstance(t, Struct) and t.size > 16) or isinstance(t, Pointer)

    @property
    def needs_xmm(self) -> bool:
        t = self.type
        return isinstance(t, Scalar) and t.kind == "float"

    def object(self, hit: Stop, xmm0: bytes | None) -> Object:
        if self.why_not:
            raise SampleError(f"retval: {self.why_not}")
        t, registers = self.type, hit.registers
        if t is None:
            return Object(ARGUMENT_TYPE, InRegister("rax"))
        if isinstance(t, Scalar) and t.kind == "float":
            if xmm0 is None:
                raise SampleError("retval: the floating-point registers could not be read")
            return Object(t, InBytes(xmm0[:t.size]))
        if self.go_words:
            data = b"".join(int(getattr(registers, r)).to_bytes(8, "little") for r in GO_RESULTS[:self.go_words])
            return Object(t, InBytes(data[:max(t.size, 1)]))
        if isinstance(t, Struct):
            if t.size > 16:  # returned in memory: rax holds its address (System V)
                return Object(t, InMemory(int(registers.rax)))
            if _has_float(t):
                raise SampleError(f"retval: a {t.name} returned in floating-point registers is not read")
            data = int(registers.rax).to_bytes(8, "little") + int(registers.rdx).to_bytes(8, "little")
            return Object(t, InBytes(data[:t.size]))
        return Object(t, InRegister("rax"))


def _word_by_word(t: Type, depth: int = 0) -> bool:
    """Go's ABI gives the type's integer registers one 8-byte word each, in order: a scalar or pointer
    of one word, or a struct whose fields are all such words at their 8-byte places (a string, a slice,
    an interface); not a field smaller than a word, an array, or a float."""
    if isinstance(t, Scalar):
        return t.kind != "float" and t.size <= 8
    if isinstance(t, Struct) and depth < 4:
        members = sorted(t.members.values(), key=lambda m: m.offset)
        return all(m.offset == 8 * n and m.type.size == 8 and _word_by_word(m.type, depth + 1)
                   for n, m in enumerate(members)) and t.size == 8 * len(members)
    return not isinstance(t, Struct) and t.size <= 8 and not isinstance(t, Array)


def _has_float(t: Type, depth: int = 0) -> bool:
    if isinstance(t, Scalar):
        return t.kind == "float"
    if isinstance(t, Struct) and depth < 8:
        return any(_has_float(m.type, depth + 1) for m in t.members.values())
    return False


def check_return_expressions(site: Site, expressions: Sequence[Expression]) -> None:
    """At a return only ``retval``, registers and globals mean something: an argument is read in an
    expression of its own, at the entry."""
    for expression in expressions:
        called = expr_called(expression.tree)
        for node in ast.walk(expression.tree):
            if not isinstance(node, ast.Name) or id(node) in called or node.id.startswith(casts.PREFIX):
                continue
            if node.id.startswith(REGISTER_PREFIX):
                continue
            name = source_name(node.id)
            if name != RETVAL and site.scope.global_object(name) is None:
                raise ExpressionError(f"--expr {expression.text}: read at the return (it names retval), where "
                                      f"{name!r} is no global",
                                      f"read {name} in an expression of its own (read at the entry): "
                                      f"--expr '{name}={name}'")


class Latency:
    """The open calls of a trace --latency (or --to) run, and the rows their ends make."""

    def __init__(self, column: int, returns: dict[Site, list[tuple[int, Expression]]], is_go: bool,
                 to: bool) -> None:
        self.column = column
        """Where latency_us goes among the row's values."""
        self.ends: set[int] = set()
        """Every address whose hit ends a call: the returns (--latency) or --to's places (find_ends)."""
        self.end_places: list[Place] = []
        """--to's places (a USDT probe's semaphore is counted in for them too)."""
        self.returns = returns
        """Each site's expressions that name retval, with the value column each goes to."""
        self.returned = {site: Returned(site, is_go) for site in returns} if not to else {}
        self.needs_xmm = any(r.needs_xmm and returns[site] for site, r in self.returned.items())
        self.to = to
        self.is_go = is_go
        self.calls: Calls[tuple[Site, Reading]] = Calls(chains=self._chains)
        self.unsure_frames = 0
        self.bounded = 0
        """Rows whose latency_us is an upper bound (their end's stop waited for sampler)."""
        self.inner = 0
        """Rows of calls with sampler's stops inside them (their kernel part is in the time)."""
        self.int3_ends = 0
        """Ends seen by an int3 (the others: in-process records, clocked in the target)."""
        self.extra: list[tuple[Site, Reading]] = []
        """Rows of a tail call's chain, after the first (the backend hands them over next)."""
        self.spanned = 0
        """Rows of calls open while sampler put probes in (their rows say so)."""
        self.rests = 0
        self.rested_calls = 0
        """Calls under way when a --max-overhead rest began (their end is not seen)."""
        self.before = 0
        """Returns of the site's own function with no entry seen (calls under way when the trace began)."""
        self.own: set[int] = set()
        """The return addresses of the sites' own functions (not of the functions their tail calls go to)."""
        self.points: dict[Site, ReturnPoints] = {}
        """Where each site's calls end (returns.py)."""
        self.queued = False
        """In-process probes time calls too: every event waits in the queue, to be taken in time order."""
        self._queue: list[tuple[float, int, Callable[[], EndedRows]]] = []
        self._order = itertools.count()

    def _chains(self, open_call: tuple[Site, Reading], new: tuple[Site, Reading]) -> bool:
        """The open call's function jumps to the new call's (a tail call): --at A --at B, A ending in B."""
        points, theirs = self.points.get(open_call[0]), self.points.get(new[0])
        return points is not None and theirs is not None and theirs.start in points.targets

    def find_ends(self, config: SessionConfig, modules: Modules, sites: dict[int, Site],
                  check: Callable[[Site], None]) -> None:
        """Before any int3: the returns of each site's function (--latency), or --to's places, checked
        as every breakpoint address is; said on the start line where they are not all a call's end."""
        for site in self.returns:
            check_return_expressions(site, [e for _, e in self.returns[site]])
        if config.latency_to is not None:
            for place in resolve_all(modules, config.latency_to, config.max_probes):
                end = Site(Scope(dataclasses.replace(config, location=config.latency_to, expressions=(), probes=()),
                                 modules, place, self.is_go), "", (), 0)
                check(end)
                self.ends.add(place.address)
                self.end_places.append(place)
        else:
            for site in self.returns:
                assert site.address is not None
                where = f"--at {site.label or config.location} --latency"
                if site.place is not None and site.place.symbol.startswith("inlined in"):
                    raise LocationNotFound(f"{where}: a copy {site.place.symbol} at {site.address:#x} has no "
                                           "return of its own (its caller's code goes on)",
                                           "give --to LOCATION, the place where what you time ends")
                found = return_points(modules, site.address)
                if found.why_not:
                    raise LocationNotFound(f"{where}: its returns cannot be found: {found.why_not}",
                                           "give --to LOCATION, the place that ends what you time")
                self.ends.update(found.addresses)
                self.own.update(found.own)
                self.points[site] = found
                said = [f"{len(found.addresses)} return(s)"]
                if found.followed:
                    said.append(f"those of {', '.join(found.followed[:4])} (its tail call(s) go there: every "
                                "call of them stops at its return too)")
                if found.unfollowed:
                    said.append(f"{found.unfollowed} tail call(s) not followed (a call leaving by one has no row)")
                if found.indirect:
                    said.append(f"{found.indirect} jump(s) through a register or memory (a switch's table, or a "
                                "tail call through a pointer: a call leaving by one has no row)")
                if not config.quiet:
                    notice.say(f"{where}: a breakpoint at {'; '.join(said)}")
        both = self.ends & set(sites)
        if both:
            raise UsageError(f"{next(iter(both)):#x} is both where a call starts and where one ends",
                             "give --to another place" if self.to else "give --to LOCATION instead")

    def hit(self, hit: Hit, site: Site | None, memory: Memory, waiting: float, let_go: Callable[[Hit], None],
            guard: Guard) -> Reading | None:
        """An int3's hit of a timed run: an entry's (its row waits, None) or an end's (the row of the call
        it ends, or None when it ends none). Once in-process probes time calls too, both wait in the
        queue, to be taken in the order they happened (rows()): None here. ``waiting``: when sampler
        came to wait for this hit."""
        if site is None:
            owner, top = self.owner(hit, memory)
            xmm0 = read_xmm0(hit.tid) if self.needs_xmm else None
            rsp = int(hit.registers.rsp)
            tag = None if self.to else _word(memory, rsp)  # (at a ret: the return address on top)
            late_since, pause_s = self.let_end_go(hit, let_go)
            height = self.height(rsp + 8, top)

            def ends() -> EndedRows:
                return self.close(owner, height, hit.seen, pause_s, hit.address,
                                  lambda site: self.read_returns(site, hit, memory, xmm0, guard), late_since, tag,
                                  by_int3=True)
            rows = self._when(hit.seen, ends)
            self.extra.extend(rows[1:])  # (a tail call's chain: the other calls it ended)
            return rows[0][1] if rows else None
        owner, top = self.owner(hit, memory)
        pc = site.address if hit.address == site.trap and site.address is not None and site.python is None \
            else hit.address  # (an int3 probe's stop: the site's)
        cfa = 0 if self.to else self._entry_cfa(site, pc, hit.registers)
        tag = None if cfa is None or self.to else _word(memory, cfa - 8)  # (read while the thread waits)
        reading = site.read_hit(memory, hit, waiting, let_go, guard)
        began = hit.resumed or hit.seen
        stall = max(0.0, began - hit.seen)
        at = site  # (a name the closure keeps)

        def starts() -> EndedRows:
            self.calls.stalled(owner, stall)  # (inside the calls the owner has open; before its own begins)
            self.open(at, owner, None if cfa is None else self.height(cfa, top), began, reading, tag)
            return []
        self._when(hit.seen, starts)
        return None

    def let_end_go(self, hit: Hit, let_go: Callable[[Hit], None]) -> tuple[float | None, float]:
        """An end's thread let go: (the moment after which its stop came, when it may have waited for
        sampler, else None; the stop's own time, seconds)."""
        let_go(hit)
        hit.resumed = hit.resumed or time.monotonic()
        # a stop not seen just after sampler woke may have come while it was busy: after it last woke
        # (``waiting`` is no bound: a stop that came while sampler polled is seen without a sleep too)
        idle = IDLE_UNTIL[0]
        return (idle if hit.seen - idle >= AT_ONCE_S else None), max(0.0, hit.resumed - hit.seen)

    def _when(self, at: float, event: Callable[[], EndedRows]) -> EndedRows:
        """An event now (its rows), or (in-process probes time calls too) in its turn among theirs."""
        if not self.queued:
            return event()
        self.push(at, event)
        return []

    def held(self, at: float, seconds: float) -> None:
        """Sampler held every thread from ``at`` for ``seconds`` (putting probes in): not the calls' time."""
        def stall() -> EndedRows:
            self.calls.stalled_all(seconds)
            return []
        self._when(at, stall)

    def rested(self, at: float) -> None:
        """--max-overhead rests from ``at``: the calls under way then have no end to be seen."""
        def rest() -> EndedRows:
            self.rests += 1
            self.rested_calls += self.calls.abandon()
            return []
        self._when(at, rest)

    def putting(self, at: float, seconds: float) -> None:
        """Sampler put probes in from ``at`` for ``seconds``: the calls open meanwhile say so."""
        def spans() -> EndedRows:
            self.calls.spanning(seconds)
            return []
        self._when(at, spans)

    def push(self, at: float, event: Callable[[], EndedRows]) -> None:
        """An event of the moment ``at`` (monotonic seconds), to be taken in its turn (rows())."""
        heapq.heappush(self._queue, (at, next(self._order), event))

    def rows(self, upto: float) -> EndedRows:
        """The events queued until ``upto`` (monotonic seconds), in the order they happened: the rows of
        the calls they end."""
        out: EndedRows = []
        queue = self._queue
        while queue and queue[0][0] <= upto:
            out.extend(heapq.heappop(queue)[2]())
        return out

    # -- the calls, in the order they happened -----------------------------------------------

    def open(self, site: Site, owner: object, height: int | None, began: float, reading: Reading,
             tag: int | None = None) -> None:
        """A call began at ``began`` (monotonic seconds), its entry's row read: it waits for its end.
        ``tag``: its return address, where known."""
        if height is None:
            self.unsure_frames += 1
            return
        self.calls.enter(owner, height, began, (site, reading), tag)

    def close(self, owner: object, height: int, seen: float, pause_s: float, address: int,
              read_returns: Callable[[Site], list[tuple[int, Value, str]]],
              late_since: float | None = None, tag: int | None = None, by_int3: bool = False) -> EndedRows:
        """A return's (or --to place's) hit at ``seen``: the rows of the calls it ends (none; one; a chain
        of tail calls, innermost first). ``late_since``: the stop was waiting when
        sampler came to it, and came after this moment (monotonic seconds): the call's time is known only
        between the two. ``pause_s``: the stop's own time (inside the calls the owner still has open)."""
        ended = self.calls.ended(owner, height, tag)
        self.calls.stalled(owner, pause_s)
        if not ended:
            # (a followed tail call's function returns to its other callers too: no call of the site's)
            self.before += address in self.own
            return []
        self.int3_ends += len(ended) if by_int3 else 0
        return [self._row(call, inside, seen, pause_s, read_returns, late_since) for call, inside in ended]

    def _row(self, call: Open[tuple[Site, Reading]], inside: float, seen: float, pause_s: float,
             read_returns: Callable[[Site], list[tuple[int, Value, str]]], late_since: float | None
             ) -> tuple[Site, Reading]:
        site, entry = call.what
        values = list(entry.values)
        errors = [entry.error] if entry.error else []
        for slot, value, error in read_returns(site):
            values[slot] = value
            if error:
                errors.append(error)
        latency_s = max(0.0, seen - call.began - inside)
        values[self.column] = round(latency_s * 1e6, 3)
        what = "the time" if self.to else "the call"
        if late_since is not None:
            least = max(0.0, late_since - call.began - inside)
            if latency_s - least > LATE_S:
                self.bounded += 1
                errors.append(f"{LATENCY} is at most this: the {'end' if self.to else 'return'}'s stop came while "
                              f"sampler was busy, {what} took {least * 1e6:.0f}-{latency_s * 1e6:.0f} us")
        if call.inside:
            self.inner += 1
            errors.append(f"{LATENCY} holds the kernel's part of {call.inside} stop(s) for sampler inside {what} "
                          "(tens of us each; their pauses are taken out)")
        if call.spanned:
            self.spanned += 1
            errors.append(f"{LATENCY} may hold some of the {call.spanned * 1e3:.1f} ms sampler took putting "
                          f"its probes in meanwhile ({inside * 1e3:.1f} ms of its stops were taken out)")
        return site, Reading(tuple(values), thread=entry.thread, pause_us=entry.pause_us + pause_s * 1e6,
                             wait_us=entry.wait_us, error="; ".join(errors), at=seen)

    def owner(self, hit: Hit, memory: Memory) -> tuple[object, int]:
        """(owner, stack top) of a hit, read while its thread waits: Go's goroutine (R14) and its
        stack's top (g.stack.hi), else the thread and 0."""
        if self.is_go:
            g = int(hit.registers.r14)
            try:
                hi = int.from_bytes(memory.read(g + 8, 8), "little")
            except UnreadableMemory:
                return hit.tid, 0
            if hi > int(hit.registers.rsp):
                return ("g", g), hi
        return hit.tid, 0

    def height(self, cfa: int, top: int) -> int:
        """How deep a frame is: the larger, the deeper (the stack grows down)."""
        if self.to:
            return 0
        return top - cfa if top else -cfa

    # -- helpers ---------------------------------------------------------------------------

    def _entry_cfa(self, site: Site, address: int, registers: Any) -> int | None:
        place = site.place
        module = place.module if place is not None else None
        if module is None:
            return None
        rule = module.cfa_rule(address - module.bias)
        if rule is None:
            return None
        register, offset = rule
        return int(getattr(registers, register)) + offset

    def read_returns(self, site: Site, hit: Stop, memory: Memory, xmm0: bytes | None, guard: Guard | None = None
                     ) -> list[tuple[int, Value, str]]:
        """The site's expressions that name retval, each (its slot, value, 'name: why' or '')."""
        returned = self.returned.get(site)
        scope = site.scope

        def resolve(name: str) -> Object | None:
            if name == RETVAL:
                if returned is None:
                    raise SampleError("retval: no return here")
                return returned.object(hit, xmm0)
            return scope.global_object(name)

        def register(name: str) -> int:
            return int(getattr(hit.registers, name))

        out: list[tuple[int, Value, str]] = []
        for slot, expression in self.returns.get(site, ()):
            evaluator = Evaluator(resolve, memory.read, register, "at the return (retval, registers, globals)")
            value_of = functools.partial(evaluator.value, expression.tree)
            try:  # (a read that does not answer gives up after the guard's time: memory.MemoryHang)
                value = guard.call(value_of) if guard is not None else value_of()
                out.append((slot, value, ""))
            except (SampleError, ExpressionError, MemoryHang) as e:  # (what the type or the data allow)
                out.append((slot, None, f"{expression.name}: {e}"))
        return out

    def counts(self, late: int = 0, dropped: int = 0) -> dict[str, int]:
        """What the summary says (summed over the processes of a run of many: timed_notes); ``late``:
        in-process records taken after events of a later moment."""
        calls = self.calls
        return {"rows": self.calls.paired, "bounded": self.bounded, "spanned": self.spanned,
                "rested": self.rested_calls, "rests": self.rests, "unseen": calls.unseen, "dropped": calls.dropped,
                "before": self.before, "open": calls.total, "unsure": self.unsure_frames, "to": int(self.to),
                "late": late, "queued": len(self._queue), "inner": self.inner, "int3_ends": self.int3_ends,
                "dropped_records": dropped}


def timed_notes(counts: dict[str, int]) -> list[Note]:
    """The summary's lines of a --latency or --to run: the calls that got no row, or a bound (said under
    --quiet too: the in-process clock's and records' lines)."""
    said: list[Note] = []
    to = counts.get("to", 0) > 0
    noun = "end (--to)" if to else "return"
    what = f"an {noun}" if to else f"a {noun}"
    in_target = counts.get("rows", 0) - counts.get("int3_ends", 0)
    if in_target > 0:
        said.append(Note(f"{in_target} call(s) clocked in the target (its TSC, at the in-process probes): to a "
                         "fraction of a microsecond (docs/cost.md)", matters=True))
    if counts.get("rows") and counts.get("int3_ends"):
        said.append(Note(f"{LATENCY} runs from when the start's stop ended to when the {noun}'s stop was seen: never "
                    "less than the call took, more by the kernel's part of two stops (a median 84-94 us on a 2-core "
                    "VM, docs/cost.md)"))
    if counts.get("bounded"):
        said.append(Note(f"{counts['bounded']} row(s)' {LATENCY} are upper bounds: the {noun}'s stop came while "
                    "sampler was busy with another hit (each row's error gives the range)"))
    if counts.get("inner"):
        said.append(Note(f"{counts['inner']} row(s) are of calls with sampler's stops inside them (recursion, another "
                    f"probe): their {LATENCY} holds the kernel's part of each (their rows say how many)"))
    if counts.get("spanned"):
        said.append(Note(f"{counts['spanned']} row(s) are of calls under way while sampler put its probes in: their "
                    f"{LATENCY} may hold some of that time (each row's error says how long it was)"))
    if counts.get("unseen"):
        why = "a later start on the same thread replaced it" if to else \
            "its frame was left without one (longjmp, a C++ exception, a Go panic, a tail call through a pointer)"
        if counts.get("dropped_records"):
            why += (f", or the in-process probes' rings were full ({counts['dropped_records']} record(s) not "
                    "written: a call keeps its entry or its return alone)")
        said.append(Note(f"{counts['unseen']} call(s) had no {noun} seen: {why}; no row"
                    + (f" ({counts['dropped']} dropped past the bound of open calls)" if counts.get("dropped") else ""),
                         matters=bool(counts.get("dropped_records"))))
    if counts.get("rested"):
        said.append(Note(f"{counts['rested']} call(s) were under way when a --max-overhead rest began (its ends' "
                    "breakpoints out too): no row"))
    if counts.get("before") and not to:
        said.append(Note(f"{counts['before']} return(s) with no entry seen (calls under way when the trace began"
                    + (" or when a --max-overhead rest ended" if counts.get("rests") else "")
                    + ", or a forked child's return from the call that forked it"
                    + (", or an entry's record the full ring dropped" if counts.get("dropped_records") else "")
                    + "): no row"))
    if counts.get("open"):
        said.append(Note(f"{counts['open']} call(s) were still open when the trace ended (under way, or left without "
                    f"{what}): no row", seen=counts["open"]))
    if counts.get("late"):
        said.append(Note(f"{counts['late']} in-process record(s) came after later ones were paired (a thread held "
                    "inside a probe): their calls may be counted as having no return seen", matters=True))
    if counts.get("queued"):
        said.append(Note(f"{counts['queued']} entr(ies) and return(s) of the last moments were not taken: their calls "
                    "have no row"))
    if counts.get("unsure"):
        said.append(Note(f"{counts['unsure']} entr(ies) had no call frame information at the breakpoint (no unwind "
                         "table, nor Go's own, says where their frame is: their returns cannot be told apart): no row",
                         matters=True, seen=counts["unsure"]))
    return said


def _word(memory: Memory, address: int) -> int | None:
    try:
        return int.from_bytes(memory.read(address, 8), "little")
    except UnreadableMemory:
        return None


def read_xmm0(tid: int) -> bytes | None:
    """xmm0 of a stopped thread (PTRACE_GETFPREGS): a floating-point result."""
    try:
        regs = ptrace_func.ptrace_getfpregs(tid)
    except PtraceError:
        return None
    words = regs.xmm_space[0:4]
    return b"".join(int(w).to_bytes(4, "little") for w in words)

