"""One line for the user on stderr, ``sampler: ...`` (never fails: stderr may be gone)."""

from __future__ import annotations

import sys

from sampler.printable import printable


def say(line: str) -> None:
    try:
        print(f"sampler: {printable(line)}", file=sys.stderr, flush=True)  # names the target chose, escaped
    except OSError:
        pass


def quiet(line: str) -> None:
    """say() under --quiet: nothing."""
