"""The controller loop: wait for the tick, take a sample, write it, until told to stop.

The backend does halt -> break -> hit -> evaluate -> clear -> resume; the session
owns time, signals, counting and output, and guarantees ``detach`` on every way out.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from types import FrameType

from sampler import notice, wakeups
from sampler.backends.base import Backend
from sampler.budget import Budget, wake_latency_s
from sampler.config import SessionConfig
from sampler.durations import format_duration
from sampler.output import Writer, outlet
from sampler.quantile import LogHistogram
from sampler.sample import Bulk, Reading, Sample, Value, format_value
from sampler.stop import StopFlag
from sampler.ticks import Schedule

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
TRACE_POLL_S = 0.5
"""In trace mode, how long one wait for a hit lasts before the loop checks its limits."""
QUIET_LINE_S = 10.0
"""Tracing: a line after this long without a hit (a header alone for minutes says nothing)."""
ON_TIME_SPIN_S = 0.0015
"""The worker wakes this long before a tick and waits the rest awake: a sleep's wake-up on this
2-vCPU VM came a median 0.9-1.5 ms late at 1 Hz (a halted virtual CPU is slow to wake)."""
SPIN_FROM_INTERVAL_S = 0.2
"""Only at 5 Hz and slower: the awake wait costs at most 0.75 % of a core."""
PROBE_TIME_S = 0.005
"""--max-overhead with in-process probes: their time in the target read this often at most."""


@dataclass
class Summary:
    samples: int = 0
    """Rows written."""
    misses: int = 0
    """Rows whose sample failed (breakpoint not hit, evaluation error)."""
    skipped_ticks: int = 0
    """Ticks passed over because a sample took longer than the interval."""
    stopped_by: str = ""
    """The signal that ended the run, if one did."""
    pause_us: LogHistogram = field(default_factory=LogHistogram)
    """Every sample's pause, in bounded memory (for the median at the end)."""
    overhead: str = ""
    """With --max-overhead: what the budget did and the overhead reached (said even under --quiet)."""


class Session:
    def __init__(self, config: SessionConfig, backend: Backend, writers: Sequence[Writer],
                 clock: Callable[[], float] = time.monotonic, on_ready: Callable[[], None] | None = None) -> None:
        self.config = config
        self.on_ready = on_ready
        """Told once, when the probes are in (tracing) or the first sample is due (sampling)."""
        self.backend = backend
        self.names = list(backend.columns)
        """The value columns of each reading, in order (a probe column first in a run with several)."""
        self.writers = list(writers)
        self.clock = clock
        self.stop = StopFlag()
        self.summary = Summary()
        self.budget = Budget(config.max_overhead, wake_latency_s()) if config.max_overhead else None
        self._tick_cost_s: dict[int, float] = {}
        """The tick's estimated stall of each process (a run of many: each loses only its own)."""
        self._stretch_said = False
        self._probe_time_at = 0.0
        self._resting_until = 0.0

    def run(self) -> Summary:
        """Attach, sample until count/duration/signal, detach. Errors propagate after detach.

        The backend is detached on every way out, a failed or interrupted attach included:
        this is the one place that guarantees it."""
        with self._stop_on_signals():
            try:
                if self.stop.is_set():
                    return self.summary
                self.backend.attach()
                for writer in self.writers:
                    writer.begin()
                if not self.config.every_hit:
                    self._ready()
                started = self.clock()
                try:
                    self._trace_loop() if self.config.every_hit else self._loop()
                finally:
                    if self.budget is not None:
                        self.summary.overhead = self._overhead(self.budget, self.clock() - started)
            finally:
                outlet.wait_for_room(None)
                self.backend.detach()
        return self.summary

    def _overhead(self, budget: Budget, elapsed_s: float) -> str:
        """The summary's line on --max-overhead."""
        estimated = (f"estimated: each pause, a wake-up of {budget.wake_s * 1e6:.0f} us and the lateness of "
                     f"sampler's own wake-ups, {(budget.late_s or 0.0) * 1e6:.0f} us at the end")
        if budget.inside_s:
            said = (f"--max-overhead {budget.share:.2%}: the probes took about {budget.reached(elapsed_s):.2%} "
                    f"of the target's time: {budget.inside_s * 1e3:.1f} ms of {elapsed_s:.1f} s in the in-process "
                    "probes (a reading probe's time clocked in the target, a counting one's estimated)")
            stops_s = budget.stopped_s - budget.inside_s
            if stops_s > 0:
                said += f", {stops_s * 1e3:.1f} ms stopped at int3s ({estimated})"
        else:
            said = (f"--max-overhead {budget.share:.2%}: the samples stopped the target about "
                    f"{budget.reached(elapsed_s):.2%} of the time ({estimated})")
        if budget.stretched_to_s:
            said += (f"; sampled every {format_duration(budget.stretched_to_s)} at the most, where every "
                     f"{format_duration(self.config.interval_s)} was asked")
        if budget.outs and budget.inside_s:
            said += (f"; the probes rested {budget.outs} time(s), {budget.out_s:.1f} s of {elapsed_s:.1f} s in "
                     "all: the in-process probes only counted the calls made then (each one's line says how many)")
            if not self.backend.nothing_stops:
                said += ", the int3s missed them"
        elif budget.outs:
            said += (f"; the breakpoints were out {budget.outs} time(s), {budget.out_s:.1f} s of "
                     f"{elapsed_s:.1f} s in all: calls made then were not traced (missed)")
        return said

    def _loop(self) -> None:
        config = self.config
        schedule = Schedule(config.interval_s, self.clock, config.duration_s)
        started_wall = datetime.now(timezone.utc)
        while not self.stop.is_set():
            if config.count is not None and self.summary.samples >= config.count:
                return
            tick = schedule.next_tick()
            if tick is None:
                return
            self.summary.skipped_ticks += tick.skipped
            delay = tick.deadline - self.clock()
            taken: list[tuple[Reading, float]] = []
            try:
                with wakeups.prompt_wakeup():  # on time though the cores are busy; see wakeups.py
                    if delay > 0:
                        spin = ON_TIME_SPIN_S if config.interval_s >= SPIN_FROM_INTERVAL_S and \
                            self.clock is time.monotonic else 0.0
                        self.backend.idle(max(0.0, delay - spin), self.stop)
                        if self.stop.is_set():
                            return
                        while spin and time.monotonic() < tick.deadline and not self.stop.is_set():
                            pass  # the last moments awake: a sleep's wake-up came 1-1.5 ms late here
                    turns = self.backend.begin_tick()  # one sample of each probe
                    if config.count is not None:
                        turns = min(turns, config.count - self.summary.samples)
                    for turn in range(turns):
                        if turn:  # the row before goes out first: --stop-when may end the run there
                            self._emit(*taken.pop(), started_wall, tick.deadline - schedule.origin)
                            if self.stop.is_set():
                                break
                        late_s = schedule.lateness(tick)
                        reading = self.backend.sample(self.stop)
                        if reading.began:  # several processes at once: the moment they were all armed
                            late_s = max(0.0, reading.began - tick.deadline)
                        taken.append((reading, late_s))
            finally:  # the probes sampled before one that ended the run keep their rows
                for reading, late_s in taken:
                    self._emit(reading, late_s, started_wall, tick.deadline - schedule.origin)
            if self.budget is not None:
                self._keep_budget(self.budget, schedule)

    def _keep_budget(self, budget: Budget, schedule: Schedule) -> None:
        """After a tick: sample less often when its stall would take more than the budget."""
        cost = max(self._tick_cost_s.values(), default=0.0)
        interval = budget.interval_for(cost, self.config.interval_s, schedule.interval_s)
        self._tick_cost_s = {}
        if interval != schedule.interval_s:
            if not self._stretch_said and interval > self.config.interval_s:
                self._stretch_said = True
                say = notice.quiet if self.config.quiet else notice.say
                say(f"--max-overhead {budget.share:.2%}: a tick stops the target about "
                    f"{(budget.tick_cost_s or 0.0) * 1e6:.0f} us: sampling every {format_duration(interval)} "
                    f"instead of every {format_duration(self.config.interval_s)}")
            schedule.retime(interval)

    def _trace_loop(self) -> None:
        """A row for every hit, until count (events), duration or a signal."""
        config = self.config
        start = self.clock()
        started_wall = datetime.now(timezone.utc)
        first = self.backend.trace(self.stop, start)  # a deadline passed: the breakpoints in, no wait
        armed = self.clock()  # --duration counts from the breakpoints in (8,000 probes take a while to go in)
        end = armed + config.duration_s if config.duration_s is not None else None
        self._trace_rows(first, start, started_wall, armed, end)
        self._last_rows(start, started_wall)  # (not after an error: detach counts what was not written)

    def _trace_rows(self, first: Reading | None, start: float, started_wall: datetime, armed: float,
                    end: float | None) -> None:
        config = self.config
        patient = self._patient(False)
        self._ready()
        if first is not None:
            self._row(first, started_wall, max(0.0, (first.at or self.clock()) - start), late_s=0.0)
        last = armed
        """The last hit, or the last line that there was none."""
        while not self.stop.is_set():
            if config.count is not None and self.summary.samples >= config.count:
                return
            now = self.clock()
            if end is not None and now >= end:
                return
            if now - last >= QUIET_LINE_S:
                last = now
                self._say_no_hit(now - armed)
            until = now + TRACE_POLL_S if end is None else min(end, now + TRACE_POLL_S)
            bulk = self._bulk_source()  # (once the last int3 became an in-process probe)
            if bulk is not None:
                for item in bulk(self.stop, until):
                    last = self.clock()
                    self._taken(item, started_wall, start)
                continue
            reading = self.backend.trace(self.stop, until)
            patient = self._patient(patient)
            if reading is not None:
                last = self.clock()
                self._row(reading, started_wall, max(0.0, (reading.at or last) - start), late_s=0.0)
                if self.budget is not None:
                    self._rest(self.budget, reading, start, end)

    def _last_rows(self, start: float, started_wall: datetime) -> None:
        """The run's end: the rows the target recorded until then and sampler has not taken yet (an in-process
        probe's ring), written before the run says it is done, --count and --stop-when kept."""
        def ended() -> bool:  # (--count reached, or --stop-when held: the rows after are not the run's)
            return (self.config.count is not None and self.summary.samples >= self.config.count) or \
                self.summary.stopped_by == "--stop-when"

        if ended():
            return  # (nothing drained for rows that would not be written)
        for item in self.backend.last_rows(self.stop, self._bulk_source() is not None):
            if ended():
                return
            self._taken(item, started_wall, start)

    def _taken(self, item: Reading | Bulk, started_wall: datetime, start: float) -> None:
        """A row, or a Bulk of rows only counted, as the backend gave it."""
        if isinstance(item, Bulk):
            self._bulk(item)
        else:
            self._row(item, started_wall, max(0.0, (item.at or self.clock()) - start), late_s=0.0)

    def _patient(self, already: bool) -> bool:
        """Once nothing of the target waits for sampler (in-process probes alone: the ptrace backend's,
        from the start or once the last reading probe's int3 made way for its jump), the outputs are
        waited for rather than dropping rows: the ring counts what is not recorded meanwhile."""
        if already or not self.backend.nothing_stops:
            return already
        outlet.wait_for_room(self.stop.is_set)
        return True

    def _bulk_source(self) -> Callable[[StopFlag, float], Sequence[Reading | Bulk]] | None:
        """The backend's rows in bulk, where nothing stops and every writer counts (--count-by, --hist
        alone): in-process probes' hits at millions a second. None: a row at a time."""
        if not self.backend.nothing_stops:
            return None
        if self.config.count is not None or self.config.stop_when is not None or self.budget is not None:
            return None
        if not self.writers or not all(writer.counts_only for writer in self.writers):
            return None
        return self.backend.trace_bulk

    def _bulk(self, bulk: Bulk) -> None:
        self.summary.samples += bulk.count
        self.summary.pause_us.add_zeros(bulk.count)
        for writer in self.writers:
            writer.write_bulk(bulk, self.config.pid)

    def _say_no_hit(self, since_s: float) -> None:
        """Tracing, nothing for QUIET_LINE_S: a line that the run is alive and where it waits."""
        if self.config.quiet:
            return
        where = " and ".join(probe.location for probe in self.config.probe_list())
        notice.say(f"no hit in the last {QUIET_LINE_S:.0f} s ({self.summary.samples} in {since_s:.0f} s): "
                   f"the breakpoints are in at {where}")

    def _ready(self) -> None:
        if self.on_ready is not None:
            self.on_ready()
            self.on_ready = None

    def _rest(self, budget: Budget, reading: Reading, start: float, end: float | None) -> None:
        """After a traced hit: the breakpoints out (the in-process probes only counting) for as long
        as the budget needs."""
        now = self.clock()
        inside = 0.0
        if now >= self._probe_time_at:  # (its counters read at most every PROBE_TIME_S: rows come by the 100,000/s)
            self._probe_time_at = now + PROBE_TIME_S
            inside = self._probe_time_s() - budget.inside_s
            budget.inside_s += inside
        cost = budget.cost_s(reading.pause_us) + inside
        if now < self._resting_until:  # (resting: in-process probes rest while their rows are written)
            budget.stopped_s += cost
            return
        rest = budget.rest_after(cost, now - start)
        if end is not None:
            rest = min(rest, end - now)
        if rest > 0 and not self.stop.is_set():
            budget.outs += 1
            budget.out_s += rest
            self._resting_until = now + rest
            self.backend.idle(rest, self.stop)
            waited = self.clock() - now
            if not self.stop.is_set() and waited >= rest:  # (an in-process probe's rest returns at once)
                budget.observe_late(waited - rest)

    def _probe_time_s(self) -> float:
        """The in-process probes' own time in the target so far (a backend without: 0)."""
        return self.backend.probe_time_s()

    def _emit(self, reading: Reading, late_s: float, started_wall: datetime, since_start: float) -> None:
        """A row; ``since_start``: its tick's deadline from the start (the row's time adds how late it was)."""
        self._row(reading, started_wall, since_start + late_s, late_s)

    def _row(self, reading: Reading, started_wall: datetime, elapsed: float, late_s: float) -> None:
        self.summary.samples += 1
        self.summary.misses += bool(reading.error)
        self.summary.pause_us.add(reading.pause_us)
        if self.budget is not None and not self.config.every_hit:
            self.budget.observe_late(late_s)
            pid = reading.pid or self.config.pid
            self._tick_cost_s[pid] = self._tick_cost_s.get(pid, 0.0) + self.budget.cost_s(reading.pause_us)
        sample = Sample(seq=self.summary.samples, time=started_wall + timedelta(seconds=elapsed),
                        elapsed_s=elapsed, pid=reading.pid or self.config.pid, reading=reading, late_us=late_s * 1e6)
        for writer in self.writers:
            writer.write(sample)
        condition = self.config.stop_when
        if condition is not None and condition.holds(self._named(sample)):
            self.summary.stopped_by = "--stop-when"
            shown = ", ".join(f"{name}={format_value(v)}" for name, v in zip(self.names, reading.values))
            notice.say(f"--stop-when {condition.text!r} held at sample {sample.seq} ({shown}): stopping")
            self.stop.set()

    def _named(self, sample: Sample) -> dict[str, Value]:
        """The row's columns by name, for --stop-when."""
        r = sample.reading
        row: dict[str, Value] = dict(zip(self.names, r.values))
        row.update(seq=sample.seq, elapsed_s=sample.elapsed_s, pause_us=r.pause_us, wait_us=r.wait_us,
                   late_us=sample.late_us)
        return row

    @contextmanager
    def _stop_on_signals(self) -> Iterator[None]:
        """SIGINT, SIGTERM and SIGHUP ask the loop to stop; they never interrupt a step."""

        def request_stop(signum: int, _frame: FrameType | None) -> None:
            if not self.stop.is_set():
                self.summary.stopped_by = signal.Signals(signum).name
            self.stop.set()
            outlet.request_stop()  # what is still queued for a reader may take a second more, no longer

        previous = {signum: signal.signal(signum, request_stop) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
