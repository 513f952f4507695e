"""USDT semaphores: the 16-bit counters a program checks before it sets up a probe's arguments.

A probe with a semaphore fires only while its counter is non-zero. Whoever reads the probe
counts itself in (+1) and out (-1) at the end: bpftrace and perf do it through the kernel
(a uprobe's ref_ctr_offset), and two readers never undo each other's count. This is the one
write sampler makes to the target's *data*. Like every patch, each semaphore is journaled (with
the file and offset it lies in, as a patched byte: patches.py) and told to the guardian; the run,
the guardian, ``sampler repair`` and the cleaning of a forked child (which gets a copy of the
count) each count it out once.

The order makes every death leave the counter one too high (the probe's arguments set up for no
reader: the program's cost, never its behaviour), never one too low (another reader's probe
silenced): counted in first, journaled and told to the guardian after; said to the journal and
the guardian before it is counted out; the guardian's own tidying (repair) counts out nothing it
did not.
"""

from __future__ import annotations

import dataclasses
import os

from sampler.safety.patches import Describer, Patch, moved, open_checked

SIZE = 2
LIMIT = 0xFFFF


def describe(describer: Describer, address: int) -> Patch:
    """Where the semaphore lies (file, offset, build-id), as a patch says where its byte is; the
    data around it is no check (other counters there change)."""
    return dataclasses.replace(describer.describe(address, 0), before=b"", after=b"", written=0)


def add(fd: int, address: int, delta: int) -> str:
    """Add ``delta`` (+1 or -1) to the counter at ``address`` through a /proc/PID/mem descriptor;
    '' when done, else why not (a count out of a counter at 0: another wrote it; one at its limit)."""
    try:
        data = os.pread(fd, SIZE, address)
    except (OverflowError, ValueError):
        return "no such address"
    except OSError as e:
        return f"cannot read it ({e.strerror})"
    if len(data) != SIZE:
        return "cannot read it"
    value = int.from_bytes(data, "little") + delta
    if not 0 <= value <= LIMIT:
        return f"it is {value - delta}: not counted {'in' if delta > 0 else 'out'}"
    try:
        os.pwrite(fd, value.to_bytes(SIZE, "little"), address)
    except OSError as e:
        return f"cannot write it ({e.strerror})"
    return ""


def count_out_checked(pid: int, semaphores: dict[int, Patch]) -> tuple[int, str]:
    """For a journal's semaphores of process ``pid``, found by PID alone: count out each whose
    mapping is still the same file at the same offset (with the same build-id). (counted out,
    why each other was not, or '')."""
    if not semaphores:
        return 0, ""
    opened = open_checked(pid)
    if isinstance(opened, str):
        return 0, opened
    fd, mappings = opened
    try:
        done, problems = 0, []
        build_ids: dict[tuple[str, int], str | None] = {}
        for address, place in semaphores.items():
            why = moved(pid, mappings, address, place, build_ids) or add(fd, address, -1)
            if why:
                problems.append(f"semaphore {address:#x}: {why}")
            else:
                done += 1
    finally:
        os.close(fd)
    return done, f"not counted out: {'; '.join(problems)}" if problems else ""
