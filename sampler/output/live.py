"""--live: a view that redraws itself in place on the terminal (stderr), like `py-spy top`:
per expression the last value, min, p50 and max so far and a sparkline of the recent
values; the sample rate and the pause. It redraws at most every REFRESH_S, and once more
at the end."""

from __future__ import annotations

import statistics
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TextIO

from sampler.output import RowByRow
from sampler.printable import printable
from sampler.sample import Sample

REFRESH_S = 0.25
SPARK = "▁▂▃▄▅▆▇█"
RECENT = 40
"""Values in the sparkline."""
KEPT = 10_000
"""Values the p50 is taken over (the most recent)."""


def sparkline(values: Sequence[float]) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    if high == low:
        return SPARK[len(SPARK) // 2] * len(values)
    return "".join(SPARK[min(len(SPARK) - 1, int((v - low) / (high - low) * len(SPARK)))] for v in values)


class _Column:
    def __init__(self) -> None:
        self.last: object = None
        self.low: float | None = None
        self.high: float | None = None
        self.kept: deque[float] = deque(maxlen=KEPT)

    def add(self, value: object) -> None:
        if value is None:
            return
        self.last = value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
            self.low = number if self.low is None else min(self.low, number)
            self.high = number if self.high is None else max(self.high, number)
            self.kept.append(number)


class LiveView(RowByRow):
    def __init__(self, names: Sequence[str], pid: int | str, stream: TextIO | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.names, self.pid = list(names), pid
        self.stream = stream or sys.stderr
        self.clock = clock
        self.columns = [_Column() for _ in self.names]
        self.pauses: deque[float] = deque(maxlen=KEPT)
        self.samples = self.errors = 0
        self.started = clock()
        self._drawn = 0
        """Lines of the last drawing (to move back over)."""
        self._last_draw = 0.0
        self.tty = _isatty(self.stream)
        """Not a terminal (a file, a pipe): the view is written once, at the end."""

    def begin(self) -> None:
        self.started = self.clock()

    def write(self, sample: Sample) -> None:
        r = sample.reading
        self.samples += 1
        self.errors += bool(r.error)
        self.pauses.append(r.pause_us)
        for column, value in zip(self.columns, r.values):
            column.add(value)
        now = self.clock()
        if self.tty and now - self._last_draw >= REFRESH_S:
            self._draw(now)

    def close(self) -> None:
        if self.samples:
            self._draw(self.clock())

    def lines(self, now: float) -> list[str]:
        elapsed = max(now - self.started, 1e-9)
        width = max([len(n) for n in self.names] + [10])
        who = f"PID {self.pid}" if isinstance(self.pid, int) else self.pid
        out = [f"sampler --live  {who}  {self.samples} samples ({self.errors} with errors)  "
               f"{self.samples / elapsed:.1f}/s  pause p50 {_median(self.pauses):.0f} us  last "
               f"{self.pauses[-1] if self.pauses else 0:.0f} us",
               f"{'expression'.ljust(width)}  {'last':>12}  {'min':>12}  {'p50':>12}  {'max':>12}  recent"]
        for name, column in zip(self.names, self.columns):
            recent = list(column.kept)[-RECENT:]
            out.append(f"{name.ljust(width)}  {_cell(column.last):>12}  {_cell(column.low):>12}  "
                       f"{_cell(_median(column.kept) if column.kept else None):>12}  {_cell(column.high):>12}  "
                       f"{sparkline(recent)}")
        return out

    def _draw(self, now: float) -> None:
        self._last_draw = now
        lines = self.lines(now)
        if self.tty:  # back over the last drawing, each line cleared
            text = (f"\x1b[{self._drawn}F" if self._drawn else "") + "".join(f"\x1b[2K{line}\n" for line in lines)
        else:
            text = "".join(f"{line}\n" for line in lines)
        try:
            self.stream.write(text)
            self.stream.flush()
        except OSError:
            return  # a closed terminal must not stop the sampling
        self._drawn = len(lines)


def _median(values: Sequence[float] | deque[float]) -> float:
    return statistics.median(values) if values else 0.0


def _cell(value: object) -> str:
    if value is None:
        text = "-"
    elif isinstance(value, float):
        text = str(int(value)) if value.is_integer() else f"{value:.6g}"
    else:
        text = printable(str(value))  # the target's text, never raw on the terminal
    return text if len(text) <= 12 else text[:11] + "…"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
