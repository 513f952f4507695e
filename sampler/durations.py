"""Durations as users type them: ``250ms``, ``1s``, ``2m``, ``1h`` or plain seconds."""

from __future__ import annotations

import math
import re

_UNITS = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(us|ms|s|m|h)?\s*$")


def parse_duration(text: str) -> float:
    """Return ``text`` in seconds; raise ValueError when it is not a positive duration."""
    match = _DURATION.match(text)
    if not match:
        raise ValueError(f"{text!r} is not a duration (use e.g. 250ms, 1s, 2m or plain seconds)")
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{text!r} must be more than zero")
    return seconds


def format_duration(seconds: float) -> str:
    """A short human form: ``250ms``, ``1.5s``."""
    if seconds < 1:
        return f"{seconds * 1000:g}ms"
    return f"{seconds:g}s"
