"""What one sample is: backends return a Reading, the session makes it a Sample."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

Value = int | float | str | None


@dataclass(frozen=True)
class Reading:
    """What a backend saw at one tick."""

    values: tuple[Value, ...]
    """One per expression, in order; None where the expression failed."""
    thread: str = ""
    """The goroutine or thread that hit the breakpoint (empty when nothing was hit)."""
    pause_us: float = 0.0
    """How long the target (or the hitting thread) was stopped for this sample."""
    wait_us: float = 0.0
    """From resuming with the breakpoint set until it was hit."""
    error: str = ""
    """What went wrong with this sample; sampling goes on."""


@dataclass(frozen=True)
class Sample:
    """One row of output."""

    seq: int
    time: datetime
    elapsed_s: float
    pid: int
    reading: Reading
    late_us: float
