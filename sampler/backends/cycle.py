"""What every backend's sample cycle shares: the words for a miss."""

from __future__ import annotations

from sampler.stop import StopFlag


def miss(stop: StopFlag, hit_timeout_s: float) -> str:
    """The row's error when the breakpoint was not hit."""
    if stop.is_set():
        return "stopped before the breakpoint was hit"
    return f"breakpoint not hit within {hit_timeout_s:g}s"
