"""Tick deadlines on a fixed grid, so sampling does not drift.

Tick k is due at ``start + k * interval``. A tick taken after its deadline is
*late* and says by how much; when the sampler falls a whole interval or more
behind, the ticks it missed are skipped (never bunched up), so lateness stays
below one interval. The clock is injectable for tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]


@dataclass(frozen=True)
class Tick:
    index: int
    """Position on the grid: 0 for the first tick."""
    deadline: float
    """When the tick is due, in the clock's seconds."""
    skipped: int
    """Ticks passed over before this one because the sampler was too far behind."""


class Schedule:
    def __init__(self, interval_s: float, clock: Clock = time.monotonic,
                 duration_s: float | None = None) -> None:
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.interval_s = interval_s
        self.clock = clock
        self.origin = clock()
        """When the run's ticks began (rows' elapsed time counts from here)."""
        self.start = self.origin
        """Where the grid is anchored: the origin, or the tick where the interval last changed."""
        self.duration_s = duration_s
        self._next = 0

    def next_tick(self) -> Tick | None:
        """The next tick to take, or None when the duration is used up."""
        now = self.clock()
        index = self._next
        behind = math.floor((now - self.start) / self.interval_s)
        skipped = 0
        if behind > index:  # a whole interval or more behind: skip to the latest due tick
            skipped = behind - index
            index = behind
        deadline = self.start + index * self.interval_s
        if self.duration_s is not None and deadline - self.origin >= self.duration_s - 1e-9:
            return None
        self._next = index + 1
        return Tick(index, deadline, skipped)

    def retime(self, interval_s: float) -> None:
        """Go on at another interval from the last tick taken (--max-overhead)."""
        if interval_s <= 0:
            raise ValueError("interval must be positive")
        self.start += max(0, self._next - 1) * self.interval_s
        self.interval_s = interval_s
        self._next = 1 if self._next else 0

    def lateness(self, tick: Tick) -> float:
        """Seconds between the tick's deadline and now (0 when on time)."""
        return max(0.0, self.clock() - tick.deadline)
