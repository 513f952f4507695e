"""The probe table: every byte sampler writes into the target's code, and how each goes back.

Two kinds of probe: the int3 breakpoint (one byte over the first byte of an instruction), and an
in-process probe's jump to its trampoline (five bytes, written and put back at once while the
caller holds every thread of the process: inprocess.py), journaled and put back the same way.
Every patch is described (the code around it, for repair and for the copies a forked child gets),
written to the journal and told to the guardian before the byte is written; while a vfork child
runs untraced in the target's memory, every int3 is out (``suspend``) until its parent says it
exec'd or exited.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
from collections.abc import Callable, Iterator

from sampler.errors import SamplerError, TargetExited
from sampler.process.memory import Memory
from sampler.process.reads import UnreadableMemory
from sampler.process.stats import TracerStats
from sampler.safety import semaphores
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
from sampler.safety.patches import Describer, Patch

INT3 = b"\xcc"


class ProbeTable:
    """The bytes of one process's code that sampler has changed, and their originals."""

    def __init__(self, pid: int, memory: Memory, journal: Journal | None, guardian: Guardian | Ward | None,
                 stats: TracerStats) -> None:
        self.memory = memory
        self.journal = journal
        """Where each patched byte is noted before it is patched (for repair after a crash)."""
        self.guardian = guardian
        """Told each patched byte before it is patched (it puts them back if the worker dies)."""
        self.stats = stats
        self.armed: dict[int, bytes] = {}
        """Breakpoints in place: address -> original byte."""
        self.originals: dict[int, int] = {}
        """Every address ever armed -> its original byte: to recognise traps that arrive after
        a clear."""
        self.patches: dict[int, Patch] = {}
        """Every address ever armed -> its original byte and the code around it: what the journal
        and the guardian keep, and what cleans the copies a forked child got."""
        self._describer = Describer(pid, memory.fd)
        self.suspended = 0
        """vfork children running untraced in the target's memory: the int3 bytes are out."""
        self.jumps: dict[int, bytes] = {}
        """In-process probes' jumps in place: site -> the bytes the jump covers. They stay in for a
        vfork child (it runs the trampoline as the threads do)."""
        self.semaphores: dict[int, Patch] = {}
        """USDT semaphores counted in, with their place (semaphores.py): counted out at detach, and in
        each forked child."""
        self._sites: list[int] | None = []
        """The jumps' sites, sorted (None: made again at the next look, the jumps changed)."""
        self._batch: list[tuple[dict[int, Patch], Callable[[], None], Callable[[], None]]] | None = None
        """Inside ``batch()``: each patch made, and what writes its bytes, once all are journaled."""

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """The patches made inside (int3s armed, jumps written) journaled and told to the guardian at once,
        then written, in order, at its end: one journal write and sync, where each alone rewrote and synced
        the whole journal (8,000 probes: 8,000 writes of thousands of entries, minutes). An int3 or a jump
        taken out again before the end is not written."""
        if self._batch is not None:  # (within another: its end writes them)
            yield
            return
        self._batch = []
        try:
            yield
        finally:
            made, self._batch = self._batch, None
            self._journaled(made)

    def _made(self, described: dict[int, Patch], write: Callable[[], None], undo: Callable[[], None]) -> None:
        """A patch: journaled and told to the guardian, then written (inside ``batch()``: at its end); ``undo``
        forgets it when the journal cannot take it (nothing written)."""
        if self._batch is not None:
            self._batch.append((described, write, undo))
            return
        self._journaled([(described, write, undo)])

    def _journaled(self, made: list[tuple[dict[int, Patch], Callable[[], None], Callable[[], None]]]) -> None:
        try:
            self._journal({address: patch for described, _, _ in made for address, patch in described.items()})
        except BaseException:
            for _, _, undo in made:
                undo()
            raise
        for _, write, _ in made:
            write()

    def _journal(self, described: dict[int, Patch]) -> None:
        if not described:
            return
        if self.journal is not None:
            if len(described) == 1:
                self.journal.record(*next(iter(described.items())))
            else:
                self.journal.record_many(described)
        if self.guardian is not None:
            for address, patch in described.items():
                self.guardian.note_patch(address, patch)

    def count_in(self, address: int) -> str:
        """Count sampler in on the USDT semaphore at ``address``, then journal it and tell the guardian
        (a death in between leaves the count in, never takes one that was not added: semaphores.py);
        '' when done (or done already), else why not (the probe then fires only while another reader
        counts on it: the caller says so)."""
        if address in self.semaphores:
            return ""
        place = semaphores.describe(self._describer, address)
        why = semaphores.add(self.memory.fd, address, +1)
        if why:
            return why
        if self.journal is not None:
            try:
                self.journal.record_semaphore(address, place)
            except SamplerError:
                semaphores.add(self.memory.fd, address, -1)  # not journaled: not kept
                raise
        if self.guardian is not None:
            self.guardian.note_semaphore(address)
        self.semaphores[address] = place
        return ""

    def count_out_all(self) -> None:
        """Every semaphore counted out, each said to the journal and the guardian first (a death in
        between leaves it in, never takes it twice); one the journal cannot forget stays in (repair
        would count it out again)."""
        for address in sorted(self.semaphores):
            if self._forget_semaphore(address):
                semaphores.add(self.memory.fd, address, -1)
        self.semaphores.clear()

    def _forget_semaphore(self, address: int) -> bool:
        if self.guardian is not None:
            self.guardian.semaphore_out(address)
        if self.journal is not None:
            try:
                self.journal.forget_semaphore(address)
            except SamplerError:
                return False
        return True

    def write_jump(self, site: int, jump: bytes) -> None:
        """An in-process probe's jump at ``site``, every byte journaled and told to the guardian
        first (as one group: they go back at once). The caller holds every thread of the process."""
        self.check_free(site, len(jump))
        try:
            original = self.memory.read(site, len(jump))
        except UnreadableMemory:
            self.memory.check_alive()
            raise
        described = {site + i: dataclasses.replace(self._describer.describe(site + i, was), written=new, group=site)
                     for i, (was, new) in enumerate(zip(original, jump))}
        self.patches.update(described)
        self.jumps[site] = original
        self._sites = None

        def write() -> None:
            if self.jumps.get(site) == original:  # (not taken out meanwhile)
                self.memory.write(site, jump)

        def undo() -> None:
            self.jumps.pop(site, None)
            self._sites = None
        self._made(described, write, undo)

    def check_free(self, site: int, size: int) -> None:
        """ValueError when the ``size`` bytes at ``site`` hold another jump's bytes or one of sampler's
        int3s (two patches over one byte: the second's "original" is the first's, put back at the end)."""
        if any(self.inside_jump(address) for address in range(site, site + size)):
            raise ValueError(f"the bytes at {site:#x} hold another in-process probe's jump already")
        if any(address in self.armed for address in range(site, site + size)):
            raise ValueError(f"the bytes at {site:#x} hold an int3 of sampler's")

    def inside_jump(self, address: int) -> bool:
        """A jump's bytes hold ``address`` (the jumps' sites sorted: 3,000 jumps looked at one by one for each of
        3,000 more took seconds)."""
        if self._sites is None:
            self._sites = sorted(self.jumps)
        at = bisect.bisect_right(self._sites, address) - 1
        return at >= 0 and address < self._sites[at] + len(self.jumps[self._sites[at]])

    def take_jump_out(self, site: int) -> None:
        """The bytes the jump covered, back at once (the caller holds every thread)."""
        original = self.jumps.pop(site, None)
        self._sites = None
        if original is not None:
            try:
                self.memory.write(site, original)
            except TargetExited:
                pass
    def arm(self, address: int) -> bool:
        """An int3 at ``address``, journaled first; False when one is there already, or an in-process
        probe's jump holds the byte (an int3 in it would break the jump, and at the end put a byte of the
        jump back)."""
        if address in self.armed or self.inside_jump(address):
            return False
        try:
            original = self.memory.read(address, 1)
        except UnreadableMemory:
            self.memory.check_alive()
            raise
        patch = self.patches.get(address)
        if patch is None or patch.original != original[0]:
            patch = self.patches[address] = self._describer.describe(address, original[0])
        self.armed[address] = original
        self.originals[address] = original[0]

        def write() -> None:
            if address in self.armed:  # (not disarmed meanwhile)
                self.put_in(address)
        def undo() -> None:
            self.armed.pop(address, None)
        self._made({address: patch}, write, undo)
        return True

    def put_in(self, address: int) -> None:
        """The int3 goes in, unless the breakpoints are out for a vfork child (it goes in then)."""
        if not self.suspended:
            self.memory.write(address, INT3)

    def disarm(self, address: int) -> None:
        """Put the original byte back. The journal keeps its entry until detach: an entry that
        outlives its patch is harmless (repair writes only where an int3 stands), and a
        journal written and synced at every sample cost the next pause 20-25 us where the
        journal's folder is on disk (the sync's work goes on around the hit)."""
        original = self.armed.pop(address, None)
        if original is not None:
            try:
                self.memory.write(address, original)
            except TargetExited:
                pass  # the process is gone

    def disarm_all(self) -> None:
        """Every int3 back, and the journal's entry gone with them (detach). A jump still in (its
        threads could not be held to take it out) keeps its entry: ``sampler repair`` takes it out."""
        for address in list(self.armed):
            self.disarm(address)
        self.count_out_all()
        if self.journal is not None:
            self.journal.clear()
            left = {a: p for a, p in self.patches.items() if p.group in self.jumps}
            if left:
                self.journal.record_many(left)
            self.journal.close()

    def suspend(self) -> None:
        """Take every int3 out of the memory a vfork child shares, until ``vfork_done``."""
        if not self.suspended:
            for address, original in self.armed.items():
                self.memory.write(address, original)
            self.stats.vfork_windows += 1
        self.suspended += 1

    def vfork_done(self) -> None:
        if self.suspended:
            self.suspended -= 1
            if not self.suspended:
                for address in self.armed:
                    self.memory.write(address, INT3)

    def forget(self) -> None:
        """The target ran a new program: the breakpoints went with the old one, and nothing of
        sampler's may be written into the new one. The old memory gets its bytes back (a vfork
        child may still run in it: the descriptor holds the old memory, never the new)."""
        for address, original in self.armed.items():
            with contextlib.suppress(OSError, SamplerError):
                self.memory.write(address, original)
        self.armed.clear()
        self.originals.clear()
        self.patches.clear()
        self.jumps.clear()  # (in the old memory: the new program has none)
        self._sites = None
        self.semaphores.clear()  # (counts of the old program's: gone with it)
        if self.guardian is not None:
            self.guardian.forget_patches()
        if self.journal is not None:
            self.journal.clear()
