"""One line for the user on stderr, ``sampler: ...`` (never fails: stderr may be gone)."""

from __future__ import annotations

import sys


def say(line: str) -> None:
    try:
        print(f"sampler: {line}", file=sys.stderr, flush=True)
    except OSError:
        pass


def quiet(line: str) -> None:
    """say() under --quiet: nothing."""
