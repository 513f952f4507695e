"""The one interface every backend implements (backends/select.py picks one)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

from sampler.sample import Reading
from sampler.stop import StopFlag


@dataclass(frozen=True)
class Capabilities:
    stops_all_threads: bool
    """True when every thread of the target stops for each sample."""
    languages: tuple[str, ...]
    """Which programs it can debug."""


class Backend(Protocol):
    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    @property
    def probe_column(self) -> bool:
        """Rows carry a 'probe' column first among their values (several breakpoints)."""

    @property
    def per_tick(self) -> int:
        """Samples per tick: one of each probe."""

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

    def notes(self) -> list[str]:
        """After detach: what the run's summary must add (calls that may have been missed,
        child processes cleaned of breakpoints); empty when there is nothing to say."""
