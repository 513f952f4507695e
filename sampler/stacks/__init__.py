"""`sampler stack` (issue 35): where every thread of a process is, right now.

collect.py reads each thread (as briefly as it can: backends/ptrace/snapshot.py) and unwinds it
(unwind/); show.py writes the text and the JSON. Used by cli.py's `stack` and by profiles.
"""

from __future__ import annotations

from collections.abc import Sequence

from sampler.stacks import collect, show
from sampler.unwind.walk import MAX_DEPTH


def report(pids: Sequence[int], out_format: str = "text", consistent: bool = False,
           max_depth: int = MAX_DEPTH) -> str:
    """Every thread of each process, as text or JSON Lines (one object per process)."""
    with collect.first_in_line():  # (the modules' tables too: read while threads may wait)
        processes = [collect.collect(pid, consistent, max_depth) for pid in pids]
    write = show.as_json if out_format == "json" else show.as_text
    return ("" if out_format == "json" else "\n").join(write(process) for process in processes)
