"""`sampler stack` (issue 35): where every thread of a process is, right now.

collect.py reads each thread (as briefly as it can: process/snapshot.py) and unwinds it
(unwind/); show.py writes the text and the JSON. Used by cli.py's `stack` and by profiles.
"""

from __future__ import annotations

from collections.abc import Sequence

from sampler.errors import SamplerError
from sampler.stacks import collect, show
from sampler.unwind.walk import MAX_DEPTH


def report(pids: Sequence[int], out_format: str = "text", consistent: bool = False,
           max_depth: int = MAX_DEPTH, interrupt_waits: bool = False, python: str = collect.HELD,
           native: bool = False) -> str:
    """Every thread of each process, as text or JSON Lines (one object per process). One process
    that cannot be read is an error; of several, each says why in its place."""
    parts = []
    write = show.as_json if out_format == "json" else show.as_text
    with collect.first_in_line():  # (the modules' tables too: read while threads may wait)
        for pid in pids:
            try:
                found = collect.collect(pid, consistent, max_depth, interrupt_waits=interrupt_waits, python=python,
                                        native=native or out_format == "json")
                parts.append(write(found, native))
            except SamplerError as e:
                if len(pids) == 1:
                    raise
                parts.append(show.failed(pid, str(e), out_format))
    return ("" if out_format == "json" else "\n").join(parts)
