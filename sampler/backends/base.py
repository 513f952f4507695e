"""The one interface every backend implements (backends/select.py picks one)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sampler.sample import Bulk, Reading
from sampler.stop import StopFlag


@dataclass(frozen=True)
class Note:
    """A line of a run's summary from its backend, with what the front end decides by as data."""

    text: str
    matters: bool = False
    """Said under --quiet too: it changes what the rows mean (calls missed, counted in the target)
    or says of harm (a SIGTRAP)."""
    let_go: int = 0
    """Child processes the targets forked and that were let go untraced (a run with no hit says so)."""
    seen: int = 0
    """Calls the probe saw that made no row (a run with no row says they were seen: never "never hit")."""


class Backend(Protocol):
    @property
    def columns(self) -> Sequence[str]:
        """The value columns of each reading, in order, known once it is built (before any
        writer exists): a 'probe' column first when there are several breakpoints (several
        --at, or a function and its compiler clones), then one per expression."""

    def begin_tick(self) -> int:
        """A tick begins: how many samples it has (one of each probe; a run of many takes in
        here the processes that started running the program since, so that the count is the
        tick's own)."""

    def attach(self) -> None:
        """Attach and leave the target running; raise a SamplerError if it cannot."""

    def sample(self, stop: StopFlag) -> Reading:
        """Take one sample and leave the target running.

        Problems with this one sample go into ``Reading.error``; problems that end the
        session (target gone, debugger gone, a bad expression) are raised. When ``stop``
        is set while waiting for a breakpoint, give up waiting and return a miss.
        """

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        """Every-hit mode: wait for the next hit of the breakpoint, which stays armed
        between calls; return its reading, or None at ``until`` (monotonic) or on stop."""

    def idle(self, seconds: float, stop: StopFlag) -> None:
        """Wait between samples (returning early when ``stop`` is set), serving the target
        meanwhile if the backend must (a ptrace tracer passes signals on)."""

    def detach(self) -> None:
        """Leave the target running, untouched, with no breakpoint; safe to call twice."""

    def notes(self) -> list[Note]:
        """After detach: what the run's summary must add (calls that may have been missed,
        child processes cleaned of breakpoints); empty when there is nothing to say."""

    @property
    def pids(self) -> Sequence[int]:
        """The processes sampled (a run of many: those left)."""

    @property
    def nothing_stops(self) -> bool:
        """No probe stops the target (in-process probes alone): the session may wait for its outputs
        and take rows in bulk."""

    def trace_bulk(self, stop: StopFlag, until: float) -> Sequence[Reading | Bulk]:
        """As trace(), where nothing stops and the rows are only counted: many at once; [] when none
        came by ``until``."""

    def probe_time_s(self) -> float:
        """The in-process probes' own time in the target so far (0: none)."""

    def last_rows(self, stop: StopFlag, bulk: bool) -> Iterable[Reading | Bulk]:
        """Every-hit mode, at the run's end (before detach): the rows the target recorded until now that
        were not handed over yet (an in-process probe's ring, drained); ``bulk``: as trace_bulk gives them."""


class Stopping:
    """What a backend whose every probe stops the target gives of the Backend interface: no bulk, no
    time spent in the target's own code."""

    nothing_stops = False

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        raise NotImplementedError

    def trace_bulk(self, stop: StopFlag, until: float) -> Sequence[Reading | Bulk]:
        reading = self.trace(stop, until)
        return [] if reading is None else [reading]

    def probe_time_s(self) -> float:
        return 0.0

    def last_rows(self, stop: StopFlag, bulk: bool) -> Iterable[Reading | Bulk]:
        return []
