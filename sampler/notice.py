"""One line for the user on stderr, ``sampler: ...`` (never fails: stderr may be gone)."""

from __future__ import annotations

import sys

from sampler.printable import printable

_said: set[str] | None = None
"""In a run of many processes: the lines said so far, each said once (``once``)."""


def once() -> None:
    """From now on a line said before is not said again (the same note about each of 50 processes
    of one program is one line)."""
    global _said
    _said = set()


def say(line: str) -> None:
    if _said is not None:
        if line in _said:
            return
        _said.add(line)
    try:
        print(f"sampler: {printable(line)}", file=sys.stderr, flush=True)  # names the target chose, escaped
    except OSError:
        pass


def quiet(line: str) -> None:
    """say() under --quiet: nothing."""
