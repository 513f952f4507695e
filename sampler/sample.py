"""What one sample is: backends return a Reading, the session makes it a Sample.

The column schema every writer shares, and how a value is written, live here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Union

from sampler.printable import printable

Value = Union[int, float, str, None]

FIXED_BEFORE = ("seq", "time", "elapsed_s", "pid", "thread")
FIXED_AFTER = ("pause_us", "wait_us", "late_us", "error")
PROBE = "probe"
"""The column that says which --at (and which of its breakpoints) a row came from, first
among the value columns of a run with several."""
RESERVED = frozenset((*FIXED_BEFORE, *FIXED_AFTER, PROBE))
"""Column names an expression may not take."""


@dataclass(frozen=True)
class Reading:
    """What a backend saw at one tick."""

    values: tuple[Value, ...]
    """One per expression, in order; None where the expression failed."""
    thread: str = ""
    """The goroutine or thread that hit the breakpoint (empty when nothing was hit)."""
    pause_us: float = 0.0
    """How long the target (or the hitting thread) was stopped for this sample."""
    wait_us: float = 0.0
    """From resuming with the breakpoint set until it was hit."""
    error: str = ""
    """What went wrong with this sample; sampling goes on."""
    pid: int = 0
    """The process it was taken in, in a run of many (0: the run's one target)."""
    began: float = 0.0
    """When its sample began (monotonic seconds), where that was before the backend handed it
    over (a run of many arms every process at once); 0: when it was asked for."""
    at: float = 0.0
    """When the hit happened (monotonic seconds), where the backend learns of it later (an in-process
    probe's record, read out of its ring); 0: when the backend handed it over."""


@dataclass(frozen=True)
class Bulk:
    """Rows of in-process probes' hits made at once, for writers that count (--count-by, --hist): each
    of a run's value columns as an array of the rows' values, or as one value every row has (a probe's
    label; None: no such expression at that probe). Every row's values were read (no errors)."""

    count: int
    columns: Sequence[Any]
    threads: Sequence[str]


@dataclass(frozen=True)
class Sample:
    """One row of output."""

    seq: int
    time: datetime
    elapsed_s: float
    pid: int
    reading: Reading
    late_us: float


def columns(names: Sequence[str]) -> list[str]:
    """The header: fixed columns around one column per expression."""
    return [*FIXED_BEFORE, *names, *FIXED_AFTER]


def format_value(value: Value) -> str:
    """A value as every writer shows it: '' for none, floats exactly, text with its control
    characters escaped (printable.py: the target chose it)."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, int) and value.bit_length() > 4096:  # past Python's int-to-text limit
        return hex(value)
    return str(value)


def row(sample: Sample) -> list[str]:
    """The sample's fields in the order of ``columns``, as text."""
    r = sample.reading
    return [
        str(sample.seq),
        sample.time.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        f"{sample.elapsed_s:.6f}",
        str(sample.pid),
        r.thread,
        *(format_value(v) for v in r.values),
        f"{r.pause_us:.0f}",
        f"{r.wait_us:.0f}",
        f"{sample.late_us:.0f}",
        printable(r.error),
    ]


def record(sample: Sample, header: Sequence[str]) -> dict[str, Any]:
    """The sample's fields by column name with their types (JSON Lines): numbers stay numbers,
    a value that failed is null."""
    r = sample.reading
    names = header[len(FIXED_BEFORE):len(header) - len(FIXED_AFTER)]
    result: dict[str, Any] = {
        "seq": sample.seq,
        "time": sample.time.isoformat(timespec="microseconds").replace("+00:00", "Z"),
        "elapsed_s": round(sample.elapsed_s, 6),
        "pid": sample.pid,
        "thread": r.thread,
    }
    result.update((name, printable(v) if isinstance(v, str) else v) for name, v in zip(names, r.values))
    result.update(pause_us=round(r.pause_us), wait_us=round(r.wait_us), late_us=round(sample.late_us),
                  error=printable(r.error))
    return result
