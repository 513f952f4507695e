"""What one sampling session is asked to do, as data."""

from __future__ import annotations

from dataclasses import dataclass, field

from sampler.language.condition import Condition
from sampler.language.expr import Expression
from sampler.probes.needs import timing
from sampler.process.switches import Switches as Switches


@dataclass(frozen=True)
class Probe:
    """One --at of a run with several, and the expressions read there."""

    location: str
    expressions: tuple[Expression, ...]


@dataclass(frozen=True)
class SessionConfig:
    pid: int
    """The process to sample (in a run of many, the first)."""
    expressions: tuple[Expression, ...]
    """What to evaluate at each sample; one output column each."""
    location: str | None = None
    """Where the breakpoint goes (function, FILE:LINE); None: halt anywhere, read globals."""
    interval_s: float = 1.0
    """Time between ticks; ticks sit on a fixed grid from the start."""
    count: int | None = None
    """Stop after this many samples (rows, misses included); None: no limit."""
    duration_s: float | None = None
    """Stop taking ticks this long after the start; None: no limit."""
    hit_timeout_s: float = 2.0
    """How long to wait for the breakpoint before recording a miss."""
    backend: str = "auto"
    """Which debugger drives the target: auto, delve, delve-rpc, ptrace."""
    guardian: bool = True
    """Fork a guardian that restores patched bytes (or takes dlv out) if the worker is killed."""
    debug_dirs: tuple[str, ...] = ()
    """--debug-dir: folders of separate debug files, searched before /usr/lib/debug (ptrace)."""
    symbols_file: str | None = None
    """--symbols: an unstripped copy of the executable (ptrace)."""
    max_probes: int = 1000
    """The most breakpoints one --at may mean (a pattern, a USDT probe's sites)."""
    quiet: bool = False
    """No informational lines on stderr (warnings still)."""
    every_hit: bool = False
    """Trace mode: a row for every hit of the breakpoint instead of one per tick
    (``count`` then limits events; ``interval_s`` is unused)."""
    stop_when: Condition | None = None
    """--stop-when: end the run after the first row where this holds."""
    max_overhead: float | None = None
    """--max-overhead: the most of the target's time sampling may stop it (0.01: 1 %); None: no budget."""
    probes: tuple[Probe, ...] = ()
    """Several --at, each with its expressions (ptrace); ``location`` is then the first one's
    and ``expressions`` every column, each name once. Empty: one probe, (location, expressions)."""

    exe: str | None = None
    """--exe: every process running this program file, those that start during the run too."""
    users: tuple[int, ...] = ()
    """--user: with --exe, only the processes whose real user ID is one of these; empty: every user's."""
    follow_forks: bool = False
    """--follow-forks: the children the processes fork are sampled too, from their first instruction."""
    pids: tuple[int, ...] = ()
    """A run of many processes (--pid given again, --all): every one, ``pid`` first. Empty: ``pid`` alone."""
    switches: Switches = field(default_factory=Switches)
    """What a benchmark or test turned off or on (the environment's SAMPLER_* switches)."""
    latency: bool = False
    """--latency (trace, ptrace): each call's row is written at its return, with latency_us and retval."""
    latency_to: str | None = None
    """--to (trace, ptrace): a row at each hit of this place, with latency_us from the last hit of the
    --at place on the same thread (goroutine)."""
    probe_kind: str = "int3"
    """--probe (trace, ptrace): "int3" (a breakpoint, the thread stops at each hit), "inprocess" (a jump
    to code sampler puts in the target: nothing stops) or "auto" (in-process where it can be)."""

    @property
    def targets(self) -> tuple[int, ...]:
        """Every process of the run."""
        return self.pids or (self.pid,)

    @property
    def timing(self) -> str | None:
        """How the rows are timed: "--latency", "--to", or None (probes/needs.py decides, for the options too)."""
        return timing(self.latency, self.latency_to)

    def probe_list(self) -> tuple[Probe, ...]:
        """Every probe of the run; none for zero-stop reads."""
        if self.probes:
            return self.probes
        return (Probe(self.location, self.expressions),) if self.location is not None else ()
