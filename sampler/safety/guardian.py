"""A guardian for the death of sampler's tracing worker.

When the worker is killed (SIGKILL, the OOM killer) with a breakpoint in the
target, nothing in it can run. So each run that patches the target forks this
process into its own session (a fork, not a new program: nothing to find or
execute, ready at once), holding the read end of a pipe whose write end only the
worker holds. When the worker ends, the pipe reads EOF; if the worker had not said
"done" first, the guardian runs the rescue its backend handed it.

The guardian knows no backend. A backend hands it a ``Rescue``: ``ready`` runs in
the guardian before it waits (open what the rescue needs, so that nothing is
opened, imported or parsed after the worker died), ``run`` after the worker died.
The worker tells the guardian, before it patches a byte, which byte it patches and
what was there (``note_patch``): the rescue then has the bytes in memory. It also tells
it of each child process being cleaned of those bytes (``note_child``, ``child_done``):
a forked child holds copies of the int3s until the worker has put them back.

The path from EOF to the restored byte is kept short: the guardian asks for a
real-time scheduling class (SCHED_FIFO, priority 1; it sleeps on the pipe, so it
takes no CPU until the worker dies), falling back to nice -20, then to nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from typing import Protocol

from sampler import wakeups, writes
from sampler.errors import SamplerError
from sampler.safety.patches import Patch
from sampler.safety.supervisor import name_process
from sampler.target import procfs

PATCH = b"P"
CHILD = b"C"
CHILD_DONE = b"c"
FORGET = b"F"
SEMAPHORE = b"S"
SEMAPHORE_OUT = b"s"
WATCH = b"W"
DONE = b"done\n"
LOG_ENV = "SAMPLER_GUARDIAN_LOG"
"""When set, the guardian appends 'eof T' and 'rescued T' (CLOCK_MONOTONIC seconds) to this file:
for measuring how long the rescue takes (bench/guardian.py)."""
DISMISS_TIMEOUT_S = 5.0
"""How long sampler waits for a dismissed guardian to end before it leaves it to init."""
PRIORITY_ENV = "SAMPLER_GUARDIAN_PRIORITY"
"""'0' keeps the guardian at normal priority (for measuring what the priority is worth)."""


class Rescue(Protocol):
    def ready(self) -> None:
        """In the guardian, before it waits: open what ``run`` will need."""

    def run(self, patches: dict[int, dict[int, Patch]], children: dict[int, int],
            semaphores: dict[int, set[int]]) -> None:
        """The worker died without saying done: leave the target as sampler would have.

        ``patches``: per process (0: the run's one target), address -> original byte (and the
        bytes around it) of every byte the worker said it patched; ``children``: processes the worker was cleaning of
        those bytes when it died -> the process whose bytes they copied (0 as above); ``semaphores``: per
        process, the USDT semaphores counted in and not yet out (semaphores.py)."""

    def watch(self, pid: int) -> None:
        """In the guardian, while the worker lives: a run of many processes took in ``pid``
        (open what ``run`` will need for it)."""

    def cleanup(self) -> None:
        """After ``run``, with no hurry: tidy up (journal entries, a debugger's leftovers)."""


class Guardian:
    def __init__(self, rescue: Rescue) -> None:
        read_end, self._write_end = os.pipe()
        self._noted: set[tuple[int, int, int]] = set()
        self.pid = os.fork()
        if self.pid == 0:  # the guardian
            code = 1
            try:
                os.close(self._write_end)
                os.setsid()  # no terminal's signals; outlives sampler
                name_process(b"sampler-guard")
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_DFL)
                signal.pthread_sigmask(signal.SIG_SETMASK, set())  # a tracer blocks SIGCHLD
                code = _watch(read_end, rescue)
            finally:
                os._exit(code)
        os.close(read_end)

    def note_patch(self, address: int, patch: Patch, pid: int = 0) -> None:
        """Before patching ``address`` (of process ``pid``, 0: the run's one target): tell the
        guardian its original byte and the bytes around it (once per byte)."""
        if (pid, address, patch.original) in self._noted:
            return
        self._noted.add((pid, address, patch.original))
        try:
            os.write(self._write_end, b"%s %x %d %d %s %s %d %x\n" % (
                PATCH, address, patch.original, pid, patch.before.hex().encode() or b"-",
                patch.after.hex().encode() or b"-", patch.written, patch.group))
        except OSError:
            pass  # the guardian itself was killed: the journal still lets repair put the byte back

    def note_semaphore(self, address: int, pid: int = 0) -> None:
        """Before counting in the USDT semaphore at ``address`` (of ``pid``, 0: the run's one target)."""
        self._say(b"%s %x %d\n" % (SEMAPHORE, address, pid))

    def semaphore_out(self, address: int, pid: int = 0) -> None:
        """Before counting it out: the guardian must not count it out again."""
        self._say(b"%s %x %d\n" % (SEMAPHORE_OUT, address, pid))

    def watch(self, pid: int) -> None:
        """A run of many processes took in ``pid`` (before any byte of it is patched)."""
        self._say(b"%s %d\n" % (WATCH, pid))

    def note_child(self, pid: int, parent: int = 0) -> None:
        """Before cleaning a forked child of the patched bytes (of ``parent``, 0: the run's one
        target): it holds copies of them."""
        self._say(b"%s %d %d\n" % (CHILD, pid, parent))

    def child_done(self, pid: int) -> None:
        """The child's bytes are back and it is let go."""
        self._say(b"%s %d\n" % (CHILD_DONE, pid))

    def forget_patches(self, pid: int = 0) -> None:
        """The target (``pid``, 0: the run's one) ran a new program (exec): the patched bytes
        went with the old one, and an int3 at one of those addresses now is the new program's own."""
        self._noted = {noted for noted in self._noted if noted[0] != pid}
        self._say(b"%s %d\n" % (FORGET, pid))

    def _say(self, line: bytes) -> None:
        try:
            os.write(self._write_end, line)
        except OSError:
            pass  # the guardian itself was killed: the journal still lets repair put the bytes back

    def dismiss(self) -> None:
        """The worker restored everything itself: the guardian can go."""
        try:
            os.write(self._write_end, DONE)
            os.close(self._write_end)
        except OSError:
            pass
        # not a blocking waitpid: a guardian that hangs must not hang sampler (one that has not
        # ended by then is left to init: it ends on "done" or EOF)
        if procfs.ends_within(self.pid, DISMISS_TIMEOUT_S):
            try:
                os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                pass  # reaped already


class Ward:
    """The guardian as the tracer of one process sees it, in a run of many: what it says
    carries that process's PID."""

    def __init__(self, guardian: Guardian, pid: int) -> None:
        self.guardian, self.pid = guardian, pid
        guardian.watch(pid)

    def note_patch(self, address: int, patch: Patch) -> None:
        self.guardian.note_patch(address, patch, self.pid)

    def note_child(self, pid: int) -> None:
        self.guardian.note_child(pid, self.pid)

    def child_done(self, pid: int) -> None:
        self.guardian.child_done(pid)

    def forget_patches(self) -> None:
        self.guardian.forget_patches(self.pid)

    def note_semaphore(self, address: int) -> None:
        self.guardian.note_semaphore(address, self.pid)

    def semaphore_out(self, address: int) -> None:
        self.guardian.semaphore_out(address, self.pid)


def _watch(fd: int, rescue: Rescue) -> int:
    _raise_priority()
    rescue.ready()
    patches: dict[int, dict[int, Patch]] = {}
    children: dict[int, int] = {}
    semaphores: dict[int, set[int]] = {}
    said = b""
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        said += chunk
        *lines, said = said.split(b"\n")
        for line in lines:
            fields = line.split()
            if line.startswith(PATCH):
                before, after = (b"" if field == b"-" else bytes.fromhex(field.decode()) for field in fields[4:6])
                patches.setdefault(int(fields[3]), {})[int(fields[1], 16)] = Patch(
                    int(fields[2]), before, after, written=int(fields[6]), group=int(fields[7], 16))
            elif line.startswith(CHILD + b" "):
                children[int(fields[1])] = int(fields[2])
            elif line.startswith(CHILD_DONE + b" "):
                children.pop(int(fields[1]), None)
            elif line.startswith(FORGET + b" "):
                patches.pop(int(fields[1]), None)
                semaphores.pop(int(fields[1]), None)
            elif line.startswith(SEMAPHORE + b" "):
                semaphores.setdefault(int(fields[2]), set()).add(int(fields[1], 16))
            elif line.startswith(SEMAPHORE_OUT + b" "):
                semaphores.get(int(fields[2]), set()).discard(int(fields[1], 16))
            elif line.startswith(WATCH + b" "):
                rescue.watch(int(fields[1]))
            elif line == DONE.strip():
                return 0
    log = os.environ.get(LOG_ENV)
    eof = time.monotonic()
    rescue.run(patches, children, semaphores)
    rescued = time.monotonic()
    if log:
        with contextlib.suppress(SamplerError), os.fdopen(writes.open_append(log, LOG_ENV), "a") as f:
            f.write(f"eof {eof:.6f}\nrescued {rescued:.6f}\n")
    rescue.cleanup()
    return 0


def _raise_priority() -> None:
    if os.environ.get(PRIORITY_ENV) != "0":
        wakeups.real_time()
