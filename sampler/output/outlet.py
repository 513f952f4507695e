"""Output that never holds the target: each destination written by a thread of its own.

A write to a pipe or a terminal blocks while no one reads it (`| less`, Ctrl-S, kubectl
exec's back-pressure). In the worker, sampler's loop made those writes itself: in `trace`,
with every breakpoint armed, a blocked write left each thread that hit one stopped for as
long as the reader slept (14 s observed, issue 32), and SIGINT and SIGTERM were not acted on
until the write returned. So every destination (stdout, stderr, each --out file) is an
Outlet: the loop hands it whole lines and goes on; its thread writes them. When the reader
falls behind by more than QUEUE_ITEMS lines, lines are dropped (whole lines, never part of
one) and counted, and the summary says how many; where nothing of the target waits for sampler
(in-process probes alone: ``wait_for_room``), the loop waits for the reader instead. The lines
queued at the end are written before the worker exits; a signal then (Ctrl-C, SIGTERM) waits
ABANDON_S at most for them.

``install`` puts Outlets under the worker's sys.stdout and sys.stderr (every print, click.echo
and notice goes through them); row files hand theirs the bytes of each row (csv.py).
"""

from __future__ import annotations

import collections
import io
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

QUEUE_ITEMS = int(os.environ.get("SAMPLER_QUEUE_LINES", "16384"))
"""Lines an outlet holds for a reader that has fallen behind (a trace of a hot function makes
thousands a second); beyond, lines are dropped. SAMPLER_QUEUE_LINES sets it (for the tests)."""
BATCH = 1024
"""Items an outlet with ``write_many`` writes at once, at most."""
ABANDON_S = 1.0
"""After a stop signal, how long the lines still queued may take to go out before the worker
exits without them."""


class Outlet:
    """One destination, written by its own thread, in order."""

    def __init__(self, name: str, write: Callable[[Any], None],
                 write_many: Callable[[list[Any]], None] | None = None) -> None:
        """``write(item)``: writes all of ``item`` (blocking as long as it must) or raises; its
        error is raised again by the next ``put`` (or by ``settle``). ``write_many(items)``, when
        given, writes the items queued so far at once (up to BATCH: a trace of a hot function
        queues tens of thousands of rows a second, one write each was a third of the worker's time)."""
        self.name = name
        self._write = write
        self._write_many = write_many
        self._items: collections.deque[Any] = collections.deque()
        self._ready = threading.Condition()
        self._busy = False
        self.dropped = 0
        """Lines not written because the reader fell behind."""
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"sampler-out-{name}", daemon=True)
        self._thread.start()

    def put(self, data: Any) -> None:
        """Queue ``data`` (whole lines) to be written; never blocks."""
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        with self._ready:
            while len(self._items) >= QUEUE_ITEMS:
                if _patience is None or _patience() or self.error is not None:
                    self.dropped += 1
                    return
                self._ready.wait(0.05)  # nothing of the target waits on sampler: the writer may catch up
            self._items.append(data)
            self._ready.notify()

    def pending(self) -> bool:
        with self._ready:
            return bool(self._items) or self._busy

    def drain(self, timeout: float | None = None) -> bool:
        """Wait until every line queued is written (True), or ``timeout`` passed (False). Interrupted
        by a signal's exception (KeyboardInterrupt) as any wait is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            while self._items or self._busy:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._ready.wait(0.05 if left is None else min(0.05, left))
        return True

    def abandon(self) -> int:
        """Drop what is still queued (the worker exits without it); how many lines that was."""
        with self._ready:
            count = len(self._items)
            self._items.clear()
            self.dropped += count
        return count

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._items:
                    self._busy = False
                    self._ready.notify_all()
                    self._ready.wait()
                before = len(self._items)
                batch = [self._items.popleft()]
                if self._write_many is not None:
                    while self._items and len(batch) < BATCH:
                        batch.append(self._items.popleft())
                if before >= QUEUE_ITEMS // 2 > len(self._items):
                    self._ready.notify_all()  # (a put waiting for room)
                self._busy = True
            try:
                if self._write_many is not None:
                    self._write_many(batch)
                else:
                    self._write(batch[0])
            except BaseException as e:
                with self._ready:
                    self.error = e
                    self._items.clear()


def write_all(fd: int) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    return write


class LineStream(io.TextIOBase):
    """A text stream whose whole lines (and what ``flush`` pushes) go to an Outlet."""

    def __init__(self, outlet: Outlet, fd: int, encoding: str = "utf-8") -> None:
        self.outlet = outlet
        self._fd = fd
        self._encoding = encoding
        self._partial = ""
        self._lock = threading.Lock()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self._encoding

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            self._partial += text
            if "\n" in self._partial:
                whole, _, self._partial = self._partial.rpartition("\n")
                self.outlet.put((whole + "\n").encode(self._encoding, "backslashreplace"))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            if self._partial:
                data, self._partial = self._partial, ""
                self.outlet.put(data.encode(self._encoding, "backslashreplace"))


_outlets: list[Outlet] = []
_stdout: Outlet | None = None
_stop_at: float | None = None


def install() -> None:
    """In the worker: sys.stdout and sys.stderr through outlets of their own (a process forked
    from it, the guardian, gets the plain streams back: no thread writes for it)."""
    global _stdout
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            continue
        stream.flush()
        outlet = Outlet(name, write_all(fd))
        _outlets.append(outlet)
        if name == "stdout":
            _stdout = outlet
        setattr(sys, name, LineStream(outlet, fd, getattr(stream, "encoding", None) or "utf-8"))
    os.register_at_fork(after_in_child=_plain_streams)


def _plain_streams() -> None:
    global _stdout
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    _outlets.clear()
    _stdout = None


def stdout() -> Outlet | None:
    """The worker's stdout outlet (None before ``install``)."""
    return _stdout


_patience: Callable[[], bool] | None = None
"""While set, a put to a full outlet waits for room instead of dropping the line, until this says
to stop: a run in which nothing of the target waits for sampler (in-process probes alone: a slow
reader then slows the reading of their ring, and the ring counts what it cannot keep)."""


def wait_for_room(until: Callable[[], bool] | None) -> None:
    """Puts wait for room (until ``until()`` is true) rather than drop lines; None: they drop again."""
    global _patience
    _patience = until


def register(outlet: Outlet) -> Outlet:
    """An outlet the worker waits for at its end (a row file's)."""
    _outlets.append(outlet)
    return outlet


def request_stop() -> None:
    """A stop signal came: what is queued at the end may take ABANDON_S more, no longer."""
    global _stop_at
    if _stop_at is None:
        _stop_at = time.monotonic()


def dropped() -> list[tuple[str, int]]:
    """(outlet, lines dropped) of each that dropped any."""
    return [(outlet.name, outlet.dropped) for outlet in _outlets if outlet.dropped]


def settle() -> None:
    """Wait until every outlet has written what it was given (after a stop signal, ABANDON_S at
    most from it: the rest is dropped), then raise the first error one of them had. A signal
    meanwhile (SIGINT, SIGTERM, SIGHUP) is a stop signal: the wait is cut short, not the process."""
    import signal

    stops = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP) if threading.current_thread() is threading.main_thread() \
        else ()
    previous = {signum: signal.signal(signum, lambda *_: request_stop()) for signum in stops}
    try:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        for outlet in _outlets:
            while not outlet.drain(0.05):
                if _stop_at is not None and time.monotonic() > _stop_at + ABANDON_S:
                    outlet.abandon()
                    break
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for outlet in _outlets:
        if outlet.error is not None:
            error, outlet.error = outlet.error, None
            raise error


def finish() -> None:
    """Before the worker exits: ``settle``, its errors passed over (said already, or too late)."""
    try:
        settle()
    except Exception:
        pass
