"""A killed tracer's int3s never kill the target (issue 59): the target's own SIGTRAP handler, and a copy of
each int3's instruction out of line, both in pages of sampler's (areas.py, with the in-process probes').

When the tracing worker is SIGKILLed, the kernel lets every thread go: one stopped at an int3 goes on with
its SIGTRAP, and one that runs an int3 before the guardian puts its byte back gets one. Untraced, SIGTRAP's
default action killed the program (redis under redis-benchmark, 2 of 2 with `--probe int3`). With the
handler in (probe.S's "sigtrap"), such a thread goes on in the copy of the instruction the int3 covers,
which runs it and jumps on; the handler tells sampler's traps by the table of copies in its pages (and a
step's trap flag, left by a step the worker began, goes). Every other SIGTRAP reaches the program's own
handler, or its default action, as before.

While sampler lives it also sends every hit on to the copy (the tracer's ``outofline``): the same place the
handler would, so that a thread is in the same state whenever the worker dies: just past the int3 (the
handler moves it), or in the copy (it runs on). No single-step, no emulation.

The handler goes in with the first copy (every thread held: a system call the target makes, rt_sigaction,
which gives the handler it had); at the end, before the pages go, the program's handler goes back, unless
the program set another meanwhile. A killed worker leaves the handler and its pages in (the guardian puts
the int3 bytes back; the handler only passes the program's own SIGTRAPs on). A forked child inherits both
(they are the parent's mapping: unused once its int3s are cleaned).
"""

from __future__ import annotations

import bisect
import contextlib
import struct
from collections.abc import Callable, Iterable
from typing import Any

from sampler.errors import SamplerError
from sampler.inprocess import templates
from sampler.inprocess.outofline import COPY, COUNT, ENTRY, OLD_HANDLER, TABLE_AT, copy_of, sigaction, unpack_sigaction
from sampler.inprocess.relocate import Refused
from sampler.inprocess.trampoline import fill
from sampler.process.areas import Area, Areas
from sampler.process.memory import Memory
from sampler.target import procfs

TRAPS = 0x7AB1E5A5E1F0A1B2
"""probe.S's placeholder: the table's address."""
MAX_TRAPS = 8192
"""int3s whose instruction is copied, at most (the table's entries)."""
RESTORER_AT = 512
TABLE = 1024
AREA = TABLE + TABLE_AT + ENTRY * MAX_TRAPS
RT_SIGACTION = 13
SIGTRAP = 5
SA_SIGINFO, SA_ONSTACK, SA_RESTORER = 0x4, 0x08000000, 0x04000000
SA_NODEFER, SA_RESETHAND = 0x40000000, 0x80000000
HOLD_TRIES = 5


class KeepAlive:
    """The int3s of one process that a dead tracer leaves harmless: each with its copy, the handler in."""

    def __init__(self, inprocess: Any, hold: Callable[[list[int] | None], Any], memory: Memory,
                 program: Callable[[int, int], bytes], pid: int) -> None:
        self.inprocess = inprocess
        """The process's in-process probes (backends/ptrace/inprocess.py): their pages take the copies."""
        self.hold = hold
        self.memory = memory
        self.program = program
        """The program's bytes (sampler's int3s read as the bytes they cover)."""
        self.pid = pid
        self.area: Area | None = None
        self.copies: dict[int, int] = {}
        """int3 address -> where its copy runs."""
        self.refused: dict[int, str] = {}
        """int3 address -> why it has no copy (a trap at it kills the target if the tracer is dead)."""
        self.old: bytes | None = None
        """The program's sigaction for SIGTRAP, while sampler's is in."""
        self.left = ""
        """What stayed of the handler at the end (said in the summary); '' when nothing."""
        try:
            self.shadow_stack = "shstk" in procfs.status(pid).get("x86_Thread_features", "")
        except SamplerError:
            self.shadow_stack = False

    def cover(self, addresses: Iterable[int], onward: dict[int, int] | None = None) -> dict[int, int]:
        """Each int3 address given (not covered yet) with its copy, the handler in at the first; {address: copy}
        of those covered now. Refused ones are kept in ``refused`` (said by the caller). ``onward``: int3s that
        need no copy, and where a thread trapped at one goes on (a stop's: the jump after it)."""
        new = [a for a in dict.fromkeys(addresses) if a not in self.copies and a not in self.refused]
        ready = {a: to for a, to in (onward or {}).items() if a not in self.copies}
        if not new and not ready:
            return {}
        made: dict[int, int] = {}
        with self.hold(None) as tids:
            areas = self.inprocess.areas_for(tids)
            try:
                if self.area is None:
                    self._install(areas, next(iter(new or ready)))
                for address, to in ready.items():
                    if len(self.copies) + len(made) < MAX_TRAPS:
                        self._entry(address, to, len(self.copies) + len(made))
                        made[address] = to
                for address in new:
                    if len(self.copies) + len(made) >= MAX_TRAPS:
                        self.refused[address] = f"more than {MAX_TRAPS} int3s"
                        continue
                    try:
                        code = self.program(address, 16)
                        copy_of(code, address, address, self.shadow_stack)  # (Refused before any room is taken)
                        area, at = self.inprocess.room(address, COPY, areas)
                        copy = copy_of(code, address, at, self.shadow_stack)
                    except (Refused, SamplerError) as e:
                        self.refused[address] = str(e)
                        continue
                    assert area.local is not None
                    area.local[at - area.address:at - area.address + len(copy.code)] = copy.code
                    self._entry(address, at, len(self.copies) + len(made))
                    made[address] = at
                    bisect.insort(self.inprocess.copies, at)
            finally:
                areas.close()
        self.copies.update(made)
        return made

    def _install(self, areas: Areas, near: int) -> None:
        """The handler's pages made and filled, then the handler in (rt_sigaction, in the target)."""
        area = areas.code_page(near, AREA)
        self.inprocess.own_area(area)
        self.area = area
        local = area.local
        assert local is not None
        table = area.address + TABLE
        handler = fill(templates.SIGTRAP, {TRAPS: (table, 8)})
        local[0:len(handler)] = handler
        local[RESTORER_AT:RESTORER_AT + len(templates.RESTORER)] = templates.RESTORER
        scratch = areas.scratch(bytes(64))
        areas.injector.checked(RT_SIGACTION, SIGTRAP, 0, scratch + 32, 8)
        old = self.memory.read(scratch + 32, 32)
        was, flags, _, mask = unpack_sigaction(old)
        struct.pack_into("<Q", local, TABLE + OLD_HANDLER, was)
        flags = (flags | SA_SIGINFO | SA_ONSTACK | SA_RESTORER) & ~(SA_NODEFER | SA_RESETHAND)
        self.memory.write(scratch, sigaction(area.address, flags, area.address + RESTORER_AT, mask))
        areas.injector.checked(RT_SIGACTION, SIGTRAP, scratch, 0, 8)
        self.old = old

    def _entry(self, address: int, copy: int, index: int) -> None:
        """An entry of the handler's table, then the count that takes it in."""
        assert self.area is not None and self.area.local is not None
        struct.pack_into("<QQ", self.area.local, TABLE + TABLE_AT + index * ENTRY, address, copy)
        struct.pack_into("<Q", self.area.local, TABLE + COUNT, index + 1)

    def restore(self) -> None:
        """The program's own SIGTRAP handler back (every int3 with a copy out already), unless it set another
        meanwhile; what could not be done is said in ``left``."""
        old, area = self.old, self.area
        if old is None or area is None:
            return
        last = ""
        for _ in range(HOLD_TRIES):
            try:
                with self.hold(None) as tids:
                    areas = self.inprocess.areas_for(tids)
                    try:
                        scratch = areas.scratch(old + bytes(32))
                        areas.injector.checked(RT_SIGACTION, SIGTRAP, 0, scratch + 32, 8)
                        now = unpack_sigaction(self.memory.read(scratch + 32, 32))[0]
                        if now == area.address:
                            areas.injector.checked(RT_SIGACTION, SIGTRAP, scratch, 0, 8)
                        else:
                            self.left = (f"process {self.pid} set its own SIGTRAP handler while sampler's was in: "
                                         "left as it set it")
                    finally:
                        with contextlib.suppress(SamplerError):
                            areas.close()
                self.old = None
                return
            except SamplerError as e:
                last = e.message
        self.left = (f"sampler's SIGTRAP handler stays in process {self.pid} ({last}): it passes every SIGTRAP "
                     "on to the program's own handler")
