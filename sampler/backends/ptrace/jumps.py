"""Counting in-process probes put in and taken out (issue 36, in progress: not yet used by a command).

Putting one in, with every thread of the process stopped (snapshot.py's holds; a call a stop ended
with EINTR made again): the code and data pages made by the target's own calls (areas.py), the
trampoline written into the code page (inprocess/trampoline.py), a thread whose pc lies inside the
bytes the jump takes moved to the same instruction in the trampoline, then the 5-byte jump written
over the site; every thread let go. Taking it out, the same way round: every thread stopped, one in
the trampoline moved back to the site's own instructions, the original bytes written back.

Not done yet (the issue's other parts): the journal and the guardian for the jump's bytes (today a
sampler killed between the two leaves a jump to a live trampoline: the target runs on, counting),
forks (a child keeps the jump and the shared pages), the pages unmapped at the end (they are left
mapped: a thread interrupted by a signal inside the trampoline returns there).
"""

from __future__ import annotations

from dataclasses import dataclass

from sampler.backends.ptrace import calls
from sampler.backends.ptrace.areas import Area, Areas
from sampler.backends.ptrace.inject import Injector, find_syscall
from sampler.backends.ptrace.memory import Memory
from sampler.backends.ptrace.snapshot import Snapshots
from sampler.inprocess.relocate import Displaced
from sampler.inprocess.trampoline import counting, jump
from sampler.target import procfs

MAX_ROUNDS = 16
"""Looks at the process's threads until every one is held (one may start while the others stop)."""


@dataclass
class Probe:
    displaced: Displaced
    original: bytes
    """The site's bytes before the jump."""
    trampoline: int
    moved_at: int
    """Where in the trampoline the displaced instructions start."""
    counter: int
    """The counter's address in the target (in the data area)."""
    counter_offset: int
    """And in sampler's view of the data area."""


class JumpProbes:
    """One process's counting jumps."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.memory = Memory(pid, writable=True)
        self.snapshots = Snapshots(pid)
        self.probes: list[Probe] = []
        self.code: Area | None = None
        self.data: Area | None = None

    def put(self, displaced: Displaced, entry: bool) -> Probe:
        """A counting jump at ``displaced.site``."""
        with_held = self._hold_all()
        try:
            injector = Injector(next(iter(with_held)), find_syscall(self.pid, self.memory.read))
            areas = Areas(self.pid, injector, self.memory)
            if self.code is None or self.data is None:
                self.code = areas.code_page(displaced.site)
                self.data = areas.data_area(self.code.address, 4096)
                areas.close()
            index = len(self.probes)
            at = self.code.address + 256 * index
            counter_offset = 8 * index
            body, moved_at = counting(displaced, at, self.data.address + counter_offset, entry)
            assert self.code.local is not None and len(body) <= 256
            self.code.local[at - self.code.address:at - self.code.address + len(body)] = body
            original = self.memory.read(displaced.site, 5)
            for tid in with_held:  # a thread inside the bytes the jump takes: on to its instruction's copy
                regs = calls.get_registers(tid)
                if displaced.site < int(regs.rip) < displaced.back:
                    regs.rip = at + moved_at + (int(regs.rip) - displaced.site)
                    calls.set_registers(tid, regs)
            self.memory.write(displaced.site, jump(displaced.site, at))
            probe = Probe(displaced, original, at, moved_at, self.data.address + counter_offset, counter_offset)
            self.probes.append(probe)
            return probe
        finally:
            self.snapshots.release_all()

    def count(self, probe: Probe) -> int:
        """The hits counted so far (read from sampler's view of the shared page: no system call)."""
        assert self.data is not None and self.data.local is not None
        return int.from_bytes(self.data.local[probe.counter_offset:probe.counter_offset + 8], "little")

    def take_out(self, probe: Probe) -> None:
        """The site's bytes back; a thread in the trampoline moved back to the site's own code."""
        with_held = self._hold_all()
        try:
            for tid in with_held:
                regs = calls.get_registers(tid)
                pc = int(regs.rip)
                start = probe.trampoline + probe.moved_at
                if probe.trampoline <= pc < start:
                    regs.rip = probe.displaced.site  # (before the count: the hit is counted again or not)
                elif start <= pc < start + probe.displaced.size:
                    regs.rip = probe.displaced.site + (pc - start)
                elif pc == start + probe.displaced.size:
                    regs.rip = probe.displaced.back
                else:
                    continue
                calls.set_registers(tid, regs)
            self.memory.write(probe.displaced.site, probe.original)
            self.probes.remove(probe)
        finally:
            self.snapshots.release_all()

    def close(self) -> None:
        for probe in list(self.probes):
            self.take_out(probe)
        self.snapshots.close()
        self.memory.close()

    def _hold_all(self) -> list[int]:
        """Every thread of the process stopped and held (a thread that starts meanwhile too)."""
        held: list[int] = []
        for _ in range(MAX_ROUNDS):
            new = [tid for tid in procfs.tasks(self.pid) if tid not in held]
            if not new:
                return held
            for tid in new:
                image = self.snapshots.hold(tid)
                if image.problem is None:
                    held.append(tid)
        self.snapshots.release_all()
        raise RuntimeError(f"the threads of process {self.pid} kept changing: not every one could be held")
