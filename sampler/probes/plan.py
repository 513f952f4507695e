"""What goes where: each site's probe kind, chosen once from what the site asks and what the process shows,
before a thread of it is seized; and the run's one refusal under --probe inprocess, read from that choice.

A pure function of data (tests/unit/test_probe_plan.py): the backend gathers the facts (procfs, the program's
returns, Go's goroutines) and then carries the plan out (backends/ptrace): where a jump goes in the code is
the mechanism's answer, and a jump that cannot go there makes the site an int3 then, said as such."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from sampler.probes.returns import ReturnPoints

K = TypeVar("K")

SECCOMP = ("the process has a seccomp filter: {what} system call (process_vm_readv) could be refused, or kill "
           "the process")
"""Why a probe that reads in the target does not go in where a seccomp filter is."""


MAX_RETURNS = 8
"""In-process return probes a function may take (--latency in the target)."""
RETURN_RING_BYTES = 4 << 20
"""A return probe's ring (the entry's is reads.RING_BYTES, 16 MiB): its records are the registers alone."""


class Kind(enum.Enum):
    INT3 = "int3"
    """A breakpoint: the hitting thread stops while sampler reads (every site under --probe int3, and attach's)."""
    COUNT = "count"
    """A jump to a probe in the target that counts each call (the row is its probe column): no thread stops."""
    LEARN = "learn"
    """An int3 for its first hits, then a probe in the target that reads what those hits showed it reads
    (promotion: a change of plan, said when it happens)."""
    ENTRY = "entry"
    """--latency in the target: the call's entry and each of its returns clocked by probes in the target."""
    FILTER = "filter"
    """A Python function: a test in the target at the eval loop lets only its frames through to an int3."""


@dataclass(frozen=True)
class Wants:
    """What a site asks of its probe."""
    reads: bool = False
    """It has expressions to read at each call (no expression: a count)."""
    ustack: bool = False
    """One of them is ustack (the thread's stack, copied at each hit)."""
    python: bool = False
    """It is a place of a Python probe (py:...)."""
    untimed: str | None = None
    """--latency: why its calls cannot be timed in the target ('' when they can); None: the run is not timed."""


@dataclass(frozen=True)
class Shows:
    """What the process shows, read once from /proc and the program."""
    seccomp: bool = False
    userfaultfd: bool = False
    slow_files: bool = False
    """Its mounts hold a FUSE or network file system."""
    stopped: bool = False
    """It was stopped (SIGSTOP) when sampler came."""
    many: bool = False
    """It is one process of several in the run (--follow-forks, --exe, --pgrep --all)."""
    unseen_goroutines: str = ""
    """Go: why a goroutine parked inside a jump's bytes could not be seen ('' when it can)."""


@dataclass(frozen=True)
class Placement(Generic[K]):
    site: K
    kind: Kind
    reason: str = ""
    """Why an int3 where an in-process probe was wanted ('' when none was: --probe int3, attach)."""


def choose(sites: Sequence[tuple[K, Wants]], shows: Shows, probe: str, every_hit: bool) -> list[Placement[K]]:
    """Each site's kind: ``probe`` is --probe (auto, inprocess or int3); ``every_hit``: trace (attach samples,
    where only a Python probe's places take a probe in the target)."""
    out: list[Placement[K]] = []
    for site, wants in sites:
        if probe == "int3" or not (every_hit or wants.python):
            out.append(Placement(site, Kind.INT3))
            continue
        why = _why_not(wants, shows)
        if wants.python:
            kind = Kind.FILTER
            why = why or (SECCOMP.format(what="the test's") if shows.seccomp else "")
        elif wants.untimed is not None:
            kind = Kind.LEARN if wants.reads else Kind.ENTRY
            why = why or wants.untimed
        else:
            kind = Kind.LEARN if wants.reads else Kind.COUNT
        out.append(Placement(site, Kind.INT3, why) if why else Placement(site, kind))
    return out


def _why_not(wants: Wants, shows: Shows) -> str:
    """Why no probe in the target, from what the site reads and what the process shows ('' when one may go)."""
    if wants.reads and shows.unseen_goroutines:  # (a count goes at an entry, where no goroutine is parked)
        return f"a goroutine parked inside a jump's bytes could not be seen: {shows.unseen_goroutines}"
    if wants.reads and wants.ustack:
        return "ustack is read by copying the thread's stack at each hit"
    if wants.reads and shows.seccomp:
        return SECCOMP.format(what="an in-process probe's reading")
    if wants.reads and shows.userfaultfd:
        return "the process uses userfaultfd: a read of a page it serves could wait for good"
    if wants.reads and shows.slow_files:
        return ("the process's mounts hold a FUSE or network file system: a read of a page of its files "
                "could wait in the kernel for good, and the target's thread with it")
    if shows.stopped:
        return "the process is stopped (SIGSTOP): a jump goes in only while its threads run"
    if shows.many:
        return "in-process probes trace one process (not --follow-forks, --exe or several) yet"
    return ""


def refused(placements: Sequence[Placement[K]], probe: str) -> Placement[K] | None:
    """--probe inprocess: the first site that cannot take one (the run ends in one line, before anything is
    seized); None when every site can, or an int3 is allowed."""
    if probe != "inprocess":
        return None
    return next((p for p in placements if p.kind is Kind.INT3 and p.reason), None)


def int3_line(placement: Placement[K], where: str) -> str:
    """What the run's "probes:" line says of a site that takes no probe in the target."""
    if placement.kind is Kind.LEARN:
        return f"{where}: an int3 for its first hits, then in-process once they show what it reads"
    return f"{where}: an int3 ({placement.reason})"


def untimed(to: bool, go: bool, xmm_retval: bool, retval_in_memory: bool, points: ReturnPoints | None) -> str:
    """--latency: why a function's calls cannot be timed in the target ('' when they can), from --to, the
    program's language, its retval (in xmm0, or read through memory) and its returns (``points``: None when
    they were not found)."""
    if to:
        return "--to's places are int3s (in-process --to is not built yet)"
    if go:
        return "Go's calls are timed by int3s (in-process return probes do not follow goroutines yet)"
    if xmm_retval:
        return "a floating-point retval is in xmm0, which an in-process probe does not record"
    if retval_in_memory:
        return ("retval is read through memory at the return (a struct returned in memory, or what a returned "
                "pointer points to), which an in-process return probe does not read: int3s read it")
    if points is None or points.followed or points.unfollowed or points.indirect:
        return "the function leaves by a tail call or a jump through a register: int3s follow it"
    if len(points.addresses) > MAX_RETURNS:
        return (f"{len(points.addresses)} returns, over the {MAX_RETURNS} in-process return probes a function "
                f"may take (each a ring of {RETURN_RING_BYTES >> 20} MiB in the target)")
    return ""
