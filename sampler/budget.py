"""--max-overhead: the share of the target's time that sampling stops it, kept under a budget.

What a sample costs the program is not sampler's ``pause_us`` (waitpid's return to
PTRACE_CONT) but the stall it sees: from the trap to the moment it runs again, which adds
the tracer's wake-up on the trap and the thread's own wake-up after the resume. Clocked
inside the target (bench/stall.py), the stall was 3-10x the pause on this project's 2-core
VM, and with every core busy its tail reached milliseconds: the resumed thread waits for a
core. sampler cannot see those two wake-ups, so it stands in for them with what it sees of
its own: at attach it sleeps a few hundred microseconds a dozen times and takes the median
lateness of its wake-up (the wake-up on the trap), and during the run it keeps the running
mean of how late its own wake-ups come under the load of the moment (the ticks' lateness in
attach, the end of each rest in trace: the thread's return to a core). A sample's cost is
``pause_us + wake + late``; a miss (no hit) and a zero-stop read stop nothing and cost
nothing.

- attach: after each tick, the interval is stretched so that the mean cost of the recent
  ticks over the interval stays within the budget (never shorter than asked), and comes
  back as the cost falls. Said once when it first happens, and in the summary.
- trace: after each hit, when the run's cost so far is over the budget of its time so far,
  the breakpoints are taken out until it is back within it: calls made then are not traced,
  and the summary says for how long that was. An in-process probe stops nothing: its cost is
  its own time in the target, which a reading probe clocks itself in each record (TSC ticks
  from its first instruction to its last); while the budget rests it only counts (no record,
  no read: a few nanoseconds), so its count stays exact and its line says how many calls it
  only counted.

The figure the summary gives is sampler's estimate; bench/stall.py compares it with what
the target clocked itself (docs/cost.md).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

SMOOTHING = 0.2
"""Weight of the newest tick in the running mean of a tick's cost."""
STRETCH_TOLERANCE = 0.2
"""The interval changes only when the one needed differs from it by more than this share."""
CALIBRATION_SLEEPS = 12
CALIBRATION_SLEEP_S = 0.0003


def wake_latency_s() -> float:
    """How late a sleeping task wakes up here (median of a dozen short sleeps): what each of
    the two wake-ups of a stall costs, in sampler's estimate."""
    late = []
    for _ in range(CALIBRATION_SLEEPS):
        start = time.monotonic()
        time.sleep(CALIBRATION_SLEEP_S)
        late.append(max(0.0, time.monotonic() - start - CALIBRATION_SLEEP_S))
    return statistics.median(late)


@dataclass
class Budget:
    share: float
    """The budget: the most of the target's time sampling may stop it (0.01: 1 %)."""
    wake_s: float
    """One wake-up's cost on this machine (wake_latency_s)."""
    stopped_s: float = 0.0
    """The estimated stall of every sample so far."""
    tick_cost_s: float | None = None
    """Running mean of a tick's estimated stall (attach)."""
    late_s: float | None = None
    """Running mean of how late sampler's own wake-ups came during the run."""
    stretched_to_s: float = 0.0
    """The longest interval the budget asked for (attach), 0 when none."""
    out_s: float = 0.0
    """How long the breakpoints were out to keep the budget (trace)."""
    outs: int = 0
    inside_s: float = 0.0
    """Of ``stopped_s``: the in-process probes' own time in the target (their records' clock; a
    counting probe's hit estimated), not a stop."""

    def cost_s(self, pause_us: float) -> float:
        """The stall one sample cost the thread it stopped: its pause and two wake-ups."""
        if pause_us <= 0:
            return 0.0
        return pause_us / 1e6 + self.wake_s + (self.wake_s if self.late_s is None else max(self.wake_s, self.late_s))

    def observe_late(self, late_s: float) -> None:
        """One of sampler's own wake-ups came this late."""
        self.late_s = late_s if self.late_s is None else (1 - SMOOTHING) * self.late_s + SMOOTHING * late_s

    def interval_for(self, tick_cost_s: float, asked_s: float, current_s: float) -> float:
        """After a tick that cost ``tick_cost_s``: the interval to sample at from now on."""
        self.stopped_s += tick_cost_s
        mean = tick_cost_s if self.tick_cost_s is None else \
            (1 - SMOOTHING) * self.tick_cost_s + SMOOTHING * tick_cost_s
        self.tick_cost_s = mean
        needed = max(asked_s, mean / self.share)
        if needed != asked_s and abs(needed - current_s) <= STRETCH_TOLERANCE * current_s:
            return current_s  # near enough: the grid is not moved for a few percent
        if needed > asked_s:
            self.stretched_to_s = max(self.stretched_to_s, needed)
        return needed

    def rest_after(self, hit_cost_s: float, elapsed_s: float) -> float:
        """After a traced hit: how long the breakpoints must stay out for the run's stall to
        be back within the budget of its time (0: none)."""
        self.stopped_s += hit_cost_s
        return max(0.0, self.stopped_s / self.share - elapsed_s)

    def reached(self, elapsed_s: float) -> float:
        """The share of the run's time its samples stopped the target (estimated)."""
        return self.stopped_s / elapsed_s if elapsed_s > 0 else 0.0


def parse_share(text: str) -> float:
    """'1%' -> 0.01; ValueError unless a percentage above 0 and at most 100."""
    stripped = text.strip()
    if not stripped.endswith("%"):
        raise ValueError("give it as a percentage, e.g. 1%")
    value = float(stripped[:-1])
    if not 0 < value <= 100:
        raise ValueError("a percentage above 0 and at most 100")
    return value / 100
