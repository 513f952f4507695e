"""Processes the target starts while sampler traces it.

``fork()`` copies the target's memory, int3 bytes included, into a child that sampler does
not trace: the first time that child ran a patched instruction it would die of SIGTRAP
(a redis BGSAVE, an nginx worker). With PTRACE_O_TRACEFORK the kernel stops the child
before its first instruction; ``release`` puts back every byte sampler ever patched in the
target (only where an int3 stands, so a byte already back is left alone) and lets the
child go untraced. The guardian and the journal hear of the child before it is touched:
a worker killed meanwhile leaves no int3 in it either (the guardian puts the bytes back,
or ``sampler repair`` does from the child's journal entry).

A ``vfork()`` child, or a ``clone()`` with CLONE_VM, shares the target's memory: its
breakpoints are live, so the tracer keeps it as one of its threads until it execs (its
new program has none of sampler's bytes) or exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import time
from collections.abc import Mapping

from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import JournalError, ProcessNotFound
from sampler.process import calls
from sampler.safety import semaphores
from sampler.safety.guardian import Guardian, Ward
from sampler.safety.journal import Journal
from sampler.safety.patches import Patch, put_back_through
from sampler.target import procfs

PTRACE_DETACH = 17
WALL = 0x40000000
FIRST_STOP_TIMEOUT_S = 2.0
"""How long a new child may take to report the stop the kernel put it in (it is immediate)."""
_SYS_KCMP = 312
_KCMP_VM = 1
_libc = ctypes.CDLL(None, use_errno=True)


def shares_memory(pid: int, child: int) -> bool:
    """True when ``child`` runs in ``pid``'s address space (kcmp KCMP_VM). When the kernel
    cannot say, True: the child is then traced like a thread until it execs or exits, which
    is safe either way."""
    answer = _libc.syscall(_SYS_KCMP, pid, child, _KCMP_VM, 0, 0)
    return bool(answer == 0 or answer < 0)


class ChildReleaser:
    """Cleans forked children of the target's breakpoints and lets them go."""

    def __init__(self, guardian: Guardian | Ward | None, journaled: bool) -> None:
        self.guardian = guardian
        self.journaled = journaled
        """Whether the children get journal entries of their own (the target has one)."""
        self.released = 0
        """Children let go so far (for the tests and the summary)."""
        self.cleaned = 0
        """Of those, children that had at least one int3 put back."""

    def release(self, child: int, originals: dict[int, Patch], first_stop_seen: bool, keep: bool = False,
                counted: Mapping[int, Patch] | None = None) -> bool:
        """``child`` is stopped (or about to report its first stop): put back ``originals``
        where an int3 stands in its memory (and the code around is as it was), then detach it (with ``keep``, it
        stays traced and stopped: a run that follows forks takes it in). The guardian and
        a journal entry hear of it only when it holds an int3 (a fork while nothing was armed
        costs two reads); a journal that cannot be written does not keep it stopped. False when
        it died before it ran. ``counted``: the USDT semaphores sampler counted in, whose copies in the
        child are counted out last (after the guardian heard the child is done: never twice)."""
        if not first_stop_seen and not _first_stop(child):
            return False  # it died before it ran (SIGKILL): nothing to clean
        try:
            fd = procfs.open_mem(child, writable=True)
        except OSError:
            fd = -1
        try:
            patched = {a: b for a, b in originals.items() if fd >= 0 and _is_written(fd, a, b)}
            copied = dict(counted or {}) if fd >= 0 else {}
            entry = None
            told = bool(patched or copied) and self.guardian is not None
            if told:
                assert self.guardian is not None
                self.guardian.note_child(child)
            if patched or copied:
                with contextlib.suppress(JournalError):
                    entry = self._journal(child, patched, copied)
            try:
                stopped = contextlib.nullcontext()  # (its one thread, stopped at its first instruction)
                restored, _ = put_back_through(fd, patched, stopped) if patched else (0, [])
                self.cleaned += restored > 0
                # its copies of the counts last, still stopped (it reads them from its first step on), once
                # the journal and the guardian forgot it: a death in between leaves a count, never takes two
                _closed(entry)
                entry = None
                if told:
                    assert self.guardian is not None
                    self.guardian.child_done(child)
                    told = False
                for address in copied:
                    semaphores.add(fd, address, -1)
                try:
                    if not keep:
                        calls.request(PTRACE_DETACH, child)
                except PtraceError as e:
                    if e.errno != errno.ESRCH:
                        raise
            finally:
                _closed(entry)
                if told:
                    assert self.guardian is not None
                    self.guardian.child_done(child)
        finally:
            if fd >= 0:
                os.close(fd)
        self.released += not keep
        return True

    def _journal(self, child: int, originals: dict[int, Patch], counted: dict[int, Patch]) -> Journal | None:
        if not self.journaled:
            return None
        try:
            entry = Journal(child)
        except ProcessNotFound:
            return None
        try:
            entry.record_many(originals)
            for address, place in counted.items():
                entry.record_semaphore(address, place)
        except JournalError:
            entry.close()
            raise
        return entry


def _closed(entry: Journal | None) -> None:
    """The child's journal entry gone (its bytes are back)."""
    if entry is not None:
        try:
            entry.clear()
        finally:
            entry.close()


def _is_written(fd: int, address: int, patch: Patch) -> bool:
    """Sampler's byte (an int3, a byte of a jump) stands at ``address``."""
    try:
        return os.pread(fd, 1, address) == bytes([patch.written])
    except OSError:
        return False


def _first_stop(child: int) -> bool:
    """Wait for the child's first stop; False when it ended instead (or never reported)."""
    deadline = time.monotonic() + FIRST_STOP_TIMEOUT_S
    while True:
        try:
            got, status = os.waitpid(child, os.WNOHANG | WALL)
        except ChildProcessError:
            return False
        if got:
            return os.WIFSTOPPED(status)
        if time.monotonic() > deadline:
            return True  # put the bytes back all the same; the detach then says ESRCH
        time.sleep(0.0001)
