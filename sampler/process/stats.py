"""What a tracer counts for the summary, in one place (backend.Tally sums them over a run)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TracerStats:
    """One tracer's counts (its process's), read once at detach."""

    emulated: int = 0
    """Every-hit hits whose instruction was emulated (no single-step)."""
    moved: int = 0
    """Every-hit hits sent on to their instruction's out-of-line copy (no step, no emulation)."""
    stepped: int = 0
    """Every-hit hits whose instruction was single-stepped."""
    checked: int = 0
    """With Switches.check_emulation: emulated instructions also stepped and compared."""
    mismatches: list[str] = field(default_factory=list)
    """With Switches.check_emulation: where an emulation differed from the CPU's step."""
    vfork_windows: int = 0
    """How often the breakpoints were out for a vfork child."""
    unsure: int = 0
    """Steps over the breakpoint during which a thread of the target could not be held:
    a call it made meanwhile may have been missed."""
    stops: dict[int, int] = field(default_factory=dict)
    """ptrace-stops seen per thread (breakpoint traps and passed-on signals alike)."""
    waiting_in_kernel: set[int] = field(default_factory=set)
    """Threads that could not stop for detach: waiting in the kernel (state D)."""
    given_up: set[int] = field(default_factory=set)
    """Every-hit breakpoints taken out for good: the instruction's memory did not answer."""
    left_stepping: set[int] = field(default_factory=set)
    """Threads inside a single-step that had not ended at detach (the trap flag still set)."""
