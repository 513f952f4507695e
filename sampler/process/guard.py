"""Reads of the target's memory that may never return, made where they cannot hold anything.

A read of /proc/PID/mem faults the page in as the target would; when the memory is a file of
a FUSE file system (or NFS, CIFS...) that does not answer, the read waits in the kernel for
good: uninterruptibly (request_wait_answer), SIGKILL included. Made by the tracing thread,
that held the thread at the breakpoint, made the run outlive --duration, ignored SIGINT and
SIGTERM and held every other process of the run (issue 32: a target's own FUSE file whose
reads it never answers). So what the tracing thread reads while a thread of the target waits,
and what a zero-stop row reads, is read by a helper thread (``Guard.call``), waited for
TIMEOUT_S at most. When it does not return: the helper is left where it waits (a new one
serves the next call), the call raises MemoryHang (the row's error), and the tracing thread
goes on: it lets the thread at the breakpoint go as always. A process that leaves MAX_STUCK
helpers waiting is one whose memory does not answer: its part of the run ends.

A helper that is left and later returns stops as its read returns (memory.check_left raises
Abandoned), before it touches anything the tracing thread uses since.

Cost: two thread wake-ups per pause, 100-650 us of the target's stall on this 2-core VM (the
waking of an idle CPU; docs/safety.md has it beside direct reads). So the guard is on only for a
process that has a FUSE or network file system among its mounts (``needed``), and a thread
(``_Watcher``) turns it on as one appears there during the run (the target mounted its own, in
a user namespace of its own too: the kernel wakes a poll() on /proc/PID/mountinfo at each
change; a new mount namespace is seen within a second). Not seen: such a file system mounted in another mount
namespace whose file's descriptor was passed to the target (docs/safety.md says so).
SAMPLER_GUARD=1 turns it on, =0 off, for every process, for the whole run.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable
from typing import TypeVar

from sampler.errors import ProcessNotFound, SamplerError
from sampler.process.memory import Abandoned, MemoryHang, helping
from sampler.target import procfs

T = TypeVar("T")

TIMEOUT_S = 0.1
"""How long what a hit (or a zero-stop row) reads may take before it is given up (a page of a
local disk's file comes within milliseconds)."""
MAX_STUCK = 4
"""Helpers left waiting in one process before its part of the run ends."""


MAY_HANG = ("fuse", "nfs", "nfs4", "cifs", "smb3", "9p", "ceph", "glusterfs", "afs", "virtiofs", "lustre")
"""File systems whose pages may take forever to come: FUSE (fuse, fuseblk, fuse.NAME), network."""


def forced() -> bool | None:
    """SAMPLER_GUARD=1/0: on or off for every process; None: as ``needed`` says."""
    setting = os.environ.get("SAMPLER_GUARD", "")
    return setting == "1" if setting in ("0", "1") else None


def needed(pid: int) -> bool:
    """Whether reads of ``pid``'s memory may never return: a FUSE or network file system is
    among its mounts (SAMPLER_GUARD=1/0 decides for every process)."""
    setting = forced()
    if setting is not None:
        return setting
    try:
        return any(kind.split(".")[0] in MAY_HANG or kind == "fuseblk" for kind in procfs.file_systems(pid))
    except (OSError, ProcessNotFound):
        return True


class _Watcher:
    """One thread for the run that turns guards on when a FUSE or network file system appears
    among their process's mounts: it sleeps in poll() on each /proc/PID/mountinfo (the kernel
    wakes it at any change of the mount table, POLLPRI) and looks at the identity of each mount
    namespace once a second. Nothing of it runs in a pause."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.guards: dict[int, list[Guard]] = {}
        self.files: dict[int, tuple[int, int]] = {}  # pid: (mountinfo fd, mount namespace inode)
        self.poll = select.poll()
        self.thread: threading.Thread | None = None

    def add(self, guard: Guard) -> None:
        with self.lock:
            self._add(guard)
            if self.thread is None:
                self.thread = threading.Thread(target=self._watch, name="sampler-mounts", daemon=True)
                self.thread.start()

    def _add(self, guard: Guard) -> None:
        if guard.pid not in self.files:
            try:
                namespace = os.stat(f"/proc/{guard.pid}/ns/mnt").st_ino
                fd = os.open(f"/proc/{guard.pid}/mountinfo", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return  # gone: its reads say so
            self.files[guard.pid] = (fd, namespace)
            self.poll.register(fd, select.POLLPRI | select.POLLERR)
        self.guards.setdefault(guard.pid, []).append(guard)

    def _watch(self) -> None:
        while True:
            events = self.poll.poll(1000)
            with self.lock:
                changed = {fd for fd, _ in events}
                for pid, (fd, namespace) in list(self.files.items()):
                    try:
                        moved = os.stat(f"/proc/{pid}/ns/mnt").st_ino != namespace
                    except OSError:
                        moved = True
                    if fd in changed or moved:
                        self._look(pid, fd)

    def _look(self, pid: int, fd: int) -> None:
        self.poll.unregister(fd)
        os.close(fd)
        del self.files[pid]
        if needed(pid):
            for guard in self.guards.pop(pid, []):
                guard.on = True  # from its next read on
            return
        for guard in self.guards.pop(pid, []):
            self._add(guard)  # watched afresh (in its new mount namespace)


_watcher = _Watcher()


class MemoryDead(SamplerError):
    """Reads of a process's memory did not return MAX_STUCK times: its part of the run ends."""

    hint = ("its memory is backed by something that does not answer (a FUSE or network file system); "
            "sampler's threads waiting on it stay until it answers")


class _Helper:
    def __init__(self) -> None:
        self.left = threading.Event()
        self.job: Callable[[], object] | None = None
        self.result: object = None
        self.error: BaseException | None = None
        self.asked = threading.Lock()
        self.done = threading.Lock()
        self.asked.acquire()
        self.done.acquire()
        self.thread = threading.Thread(target=self._serve, name="sampler-read", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        helping.left = self.left
        while True:
            self.asked.acquire()
            if self.left.is_set():
                return
            job = self.job
            assert job is not None
            try:
                self.result, self.error = job(), None
            except Abandoned:
                return
            except BaseException as e:
                self.result, self.error = None, e
            if self.left.is_set():
                return
            self.done.release()


class Guard:
    """Runs what reads one process's memory in a helper thread, TIMEOUT_S at most a call."""

    def __init__(self, pid: int, on_hang: Callable[[], None] | None = None, on: bool | None = None) -> None:
        """``on_hang``: called when a call did not return (Memory.mark_hung: its read's pages
        are not read again). ``on``: whether calls go to a helper at all (default: ``needed``)."""
        self.pid = pid
        self.on = needed(pid) if on is None else on
        self.on_hang = on_hang
        self._helper: _Helper | None = None
        self.stuck = 0
        """Helpers left waiting (their reads never returned)."""
        self.hangs = 0
        """Calls given up (for the summary)."""
        if on is None and not self.on and forced() is None:
            _watcher.add(self)  # on when such a file system appears among its mounts

    def call(self, job: Callable[[], T]) -> T:
        """``job()`` in the helper; MemoryHang when it has not returned within TIMEOUT_S
        (MemoryDead once MAX_STUCK helpers were left). From the helper itself (a read inside
        a guarded call), at once."""
        helper = self._helper
        if not self.on or (helper is not None and threading.current_thread() is helper.thread):
            return job()
        if self.stuck >= MAX_STUCK:
            raise MemoryDead(f"target process {self.pid}: {self.stuck} reads of its memory did not return "
                             f"within {TIMEOUT_S * 1000:.0f} ms")
        if helper is None:
            helper = self._helper = _Helper()
        helper.job = job
        helper.asked.release()
        if not helper.done.acquire(timeout=TIMEOUT_S):
            helper.left.set()  # it stops when its read returns, if ever
            helper.asked.release()  # (and if it was between calls after all)
            self._helper = None
            self.stuck += 1
            self.hangs += 1
            if self.on_hang is not None:
                self.on_hang()
            raise MemoryHang(f"memory read did not return within {TIMEOUT_S * 1000:.0f} ms (memory of a file "
                             "system that does not answer?)")
        error, helper.error = helper.error, None
        result, helper.result = helper.result, None
        helper.job = None
        if error is not None:
            raise error
        return result  # type: ignore[return-value]
