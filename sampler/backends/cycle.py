"""What every backend's sample cycle shares: its time limits and the words for a miss."""

from __future__ import annotations

import threading

HALT_TIMEOUT_S = 5.0
"""How long a debugger may take to halt a running target."""
CALL_TIMEOUT_S = 10.0
"""How long a debugger may take to answer one command."""
POLL_S = 0.05
"""How often a wait for a breakpoint looks at the stop flag."""


def miss(stop: threading.Event, hit_timeout_s: float) -> str:
    """The row's error when the breakpoint was not hit."""
    if stop.is_set():
        return "stopped before the breakpoint was hit"
    return f"breakpoint not hit within {hit_timeout_s:g}s"
