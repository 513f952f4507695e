"""--latency with in-process probes: a reading probe at the entry and at each return, clocked in the
target (issue 37).

Each probe's record holds the thread's registers and the TSC read at the probe's first instruction
(reads.py). At the entry, the record gives the frame (the CFA from the registers, by the unwind rule
there) and the call's start: its TSC, plus the probe's own ticks (the reads it made, in the record),
so the probe's time is not the call's. At a return, the probe runs before the ``ret`` (a jump over the
function's last ``ret`` and the padding after it: relocate.displace_return), and its record gives the
frame (rsp + 8), the result (rax) and the call's end. Nothing stops: the time is the target's clock.

A return probe's jump goes over the ``ret`` and the padding after it (where the ``ret`` ends the
function and 4 bytes of padding follow), else over the instructions that end with the ``ret``, moved
into the trampoline before the probe (where no branch lands among them, the ``ret`` included). A function
whose every return takes one (and that leaves by no tail call) is timed this way; others keep their
int3s. The records of the probes come out of separate rings: they
are taken in the order they happened (latency.py's queue), LAG_S after they were written, and so are
the int3s' hits of a run that mixes both.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from sampler.backends.ptrace.inprocess import Read, branched_into
from sampler.backends.ptrace.latency import RETVAL, EndedRows, Latency
from sampler.backends.ptrace.site import Site
from sampler.config import SessionConfig
from sampler.debuginfo.locate import Place
from sampler.debuginfo.modules import Modules
from sampler.evaluation.plan import ReadPlan
from sampler.evaluation.scope import Scope
from sampler.inprocess.reads import REGISTERS, Layout, Recorded
from sampler.inprocess.relocate import Displaced, Refused, displace_return, displace_to_return
from sampler.language.expr import Expression
from sampler.probes.plan import RETURN_RING_BYTES, untimed
from sampler.process.memory import Memory
from sampler.process.reads import UnreadableMemory
from sampler.sample import Reading, Value

if TYPE_CHECKING:  # numpy: the records' arrays (made where the ring is read)
    import numpy as np

LAG_S = 0.02
"""How long after its moment an event is taken: every probe's record of that moment is in its ring by
then (a probe's reads take microseconds; a thread preempted inside one for longer is counted)."""
MAX_PADDING = 16


class TimedProbes:
    """The in-process probes of a --latency run: which sites take them, and their records as events."""

    def __init__(self, latency: Latency, config: SessionConfig, modules: Modules, is_go: bool) -> None:
        self.latency = latency
        self.config = config
        self.modules = modules
        self.is_go = is_go
        self.returns: dict[int, Site] = {}
        """Each return probe's site (by address), once placed."""
        self.entries: set[int] = set()
        """The entry sites timed in the target (by id)."""
        self.ret_rsp: dict[int, tuple[str, int]] = {}
        """Where each return probe's ret finds the stack pointer, from the registers it records."""
        self.entry_at: dict[int, int] = {}
        """Where each timed entry's probe is (by the site's id): its registers are that place's."""
        self.ns_per_tick = 0.0
        self.late = 0
        """Records taken after events of a later moment (a thread held inside a probe past LAG_S)."""
        self.dropped = 0
        """Records the probes' rings had no room for (their calls lack an entry or a return)."""
        self._taken_until = 0.0

    def why_not(self, site: Site) -> str:
        """Why the site's calls cannot be timed in the target ('' when they can)."""
        latency = self.latency
        returned, retvals = latency.returned.get(site), [e for _, e in latency.returns.get(site, ())]
        return untimed(bool(latency.to), self.is_go, returned is not None and returned.needs_xmm and bool(retvals),
                       returned is not None and returned.in_memory and not all(map(_bare_retval, retvals)),
                       latency.points.get(site))

    def return_jumps(self, site: Site, read: Callable[[int, int], bytes], taken: tuple[int, int] | None = None
                     ) -> tuple[list[tuple[Site, Displaced, Layout]], str]:
        """A probe for each return of the site's function (all of them, or why not); ``read``: the
        program's bytes (with sampler's int3s seen as the bytes they cover); ``taken``: the bytes the
        entry's jump takes, [start, end), which no return's may."""
        points = self.latency.points[site]
        out = []
        for ret in sorted(points.addresses):
            module = self.modules.containing(ret)
            span = module.function_span(ret - module.bias) if module is not None else None
            if module is None or span is None or span[1] <= 0:
                return [], f"no symbol says where the function of the return at {ret:#x} ends"
            start = span[0] + module.bias
            try:
                if start + span[1] <= ret + 2:  # its last instruction (ret, or repz ret): padding after it?
                    code = read(ret, MAX_PADDING)
                    # padding only up to the next 16-byte boundary (functions are aligned: beyond it a
                    # function without a symbol or an unwind entry could start with nops)
                    ends = next((k for k in range(1, MAX_PADDING) if self._starts_function(module, ret + k)),
                                MAX_PADDING)
                    ends = min(ends, ((ret + 16) & ~15) - ret)
                    try:
                        displaced = displace_return(code[:ends], ret)
                    except Refused:
                        displaced = displace_to_return(read(start, ret + 1 - start), start, ret)
                else:  # the instructions before it, moved with it
                    displaced = displace_to_return(read(start, span[1]), start, ret)
            except UnreadableMemory as e:
                return [], f"the code at {ret:#x} cannot be read ({e})"
            except Refused as e:
                return [], f"the return at {ret:#x}: {e}"
            why = branched_into(module, displaced)
            if why:
                return [], f"the return at {ret:#x}: {why}"
            if taken is not None and displaced.site < taken[1] and taken[0] < displaced.back:
                return [], (f"the return at {ret:#x} is too near the entry's probe ({taken[0]:#x}): their jumps "
                            "would share bytes")
            self.ret_rsp[ret] = displaced.ret_rsp or ("rsp", 0)
            place = Place(ret, module, None)
            scoped = dataclasses.replace(self.config, location=f"*{ret:#x}", expressions=(), probes=())
            out.append((Site(Scope(scoped, self.modules, place, self.is_go), "", (), 0), displaced,
                        Layout(ReadPlan([]), ret, RETURN_RING_BYTES)))
        return out, ""

    @staticmethod
    def _starts_function(module: object, address: int) -> bool:
        span = module.function_span(address - module.bias)  # type: ignore[attr-defined]
        return span is not None and span[0] + module.bias <= address  # type: ignore[attr-defined]

    def placed(self, site: Site | None, returns: list[Site]) -> None:
        """The site's entry (None: it keeps its int3) and these returns are in-process now: their int3s
        go, and every event is taken in time order from now on."""
        if site is not None:
            self.entries.add(id(site))
        for ret in returns:
            assert ret.address is not None
            self.returns[ret.address] = ret
            self.latency.ends.discard(ret.address)
        self.latency.queued = True

    def owns(self, read: Read) -> bool:
        key = read.placed.key
        return id(key) in self.entries or (isinstance(key, Site) and key.address in self.returns
                                           and key is self.returns[key.address])

    def take(self, read: Read, rows: list[Reading], memory: Memory) -> None:
        """A drain's records of an entry's probe (with the rows its expressions made) or a return's,
        into the queue."""
        latency = self.latency
        records, seconds, threads = read.records, read.seconds.tolist(), read.threads
        registers = records["registers"]
        if len(seconds) and seconds[0] < self._taken_until:
            self.late += int((read.seconds < self._taken_until).sum())
        site = read.placed.key
        assert isinstance(site, Site) and site.address is not None
        if id(site) in self.entries:
            ticks = records["flags"].tolist()
            module = site.place.module if site.place is not None else None
            probe_at = self.entry_at.get(id(site), site.address)
            rule = module.cfa_rule(probe_at - module.bias) if module is not None else None
            index = REGISTERS.index(rule[0]) if rule is not None and rule[0] in REGISTERS else None
            assert len(rows) == len(seconds), "a row for each entry's record"
            for n, (at, thread, row) in enumerate(zip(seconds, threads, rows)):
                began = at + ticks[n] * self.ns_per_tick / 1e9  # (the probe's own reads are not the call's)
                height = None if index is None or rule is None else -(int(registers[n][index]) + rule[1])
                owner = _owner(thread)

                def starts(site: Site = site, owner: object = owner, height: int | None = height,
                           began: float = began, row: Reading = row) -> EndedRows:
                    latency.open(site, owner, height, began, row)
                    return []
                latency.push(at, starts)
            return
        layout = read.placed.layout
        assert layout is not None
        base, offset = self.ret_rsp.get(site.address, ("rsp", 0))
        index = REGISTERS.index(base)
        for n, (at, thread) in enumerate(zip(seconds, threads)):
            record = records[n]
            height = -(int(registers[n][index]) + offset + 8)  # (at the ret: the return address on top)
            owner = _owner(thread)

            def ends(owner: object = owner, height: int = height, at: float = at, record: np.void = record
                     ) -> EndedRows:
                def returns(site: Site) -> list[tuple[int, Value, str]]:
                    values, _ = layout.decode(record)
                    return latency.read_returns(site, Recorded(site.address or 0, values), memory, None)
                return latency.close(owner, height, at, 0.0, site.address or 0, returns)
            latency.push(at, ends)

    def taken_until(self, moment: float) -> None:
        self._taken_until = moment


def _owner(thread: str) -> object:
    """The owner of a record's call: its thread id, as an int3's hit names it."""
    return int(thread) if thread.isdigit() else thread


def _bare_retval(expression: Expression) -> bool:
    """The expression is ``retval`` alone (its register, or a pointer's address: no memory read)."""
    body = expression.tree.body
    return isinstance(body, ast.Name) and body.id == RETVAL
