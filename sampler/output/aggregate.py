"""--count-by and --hist on attach and trace: counts kept in sampler, not a row per hit.

As bpftrace's ``@[x] = count()`` and ``@ = hist(x)``: each sample adds one to the count
of its value (or to its power-of-two bucket), and the tables are printed when the run
ends, in ``sampler report``'s format. A value the target chose is a key here: at most
MAX_KEYS distinct values are kept per column, the rest are counted under ``(other)``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from sampler.output import hist
from sampler.sample import PROBE, Bulk, Sample, Value

MAX_KEYS = 10_000
"""Distinct values counted per column; beyond them, one ``(other)`` count."""
SHOWN = 20
"""Values printed per --count-by column at the end, most frequent first."""
OTHER = "(other)"
FAILED = "(error)"
"""The key of a sample whose expression could not be read."""


MAX_KEY = 256
"""Characters of a value kept as its key (a 4 KiB buf() is counted by its first 256)."""


def key_of(value: Value) -> str:
    """The text a value is counted under (as the CSV writes it, cut to MAX_KEY characters)."""
    if value is None:
        return FAILED
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value)
    return text if len(text) <= MAX_KEY else text[:MAX_KEY] + "..."


class Aggregate:
    """A Writer that counts: per value of each ``count_by`` column, per power-of-two bucket
    of each ``hists`` column."""

    counts_only = True

    def __init__(self, names: Sequence[str], count_by: Sequence[str], hists: Sequence[str], pid: int | str,
                 stream: TextIO | None = None) -> None:
        self.names = list(names)
        self._index = {name: index for index, name in enumerate(self.names)}
        self.count_by = list(count_by)
        self.hists = list(hists)
        self.pid = pid if isinstance(pid, int) else None
        """The PID of a run of one; None in a run of many (the headers count the PIDs seen)."""
        self.pids: set[int] = set()
        self.stream = stream
        self.counts: dict[str, dict[str, int]] = {name: {} for name in self.count_by}
        self.buckets: dict[str, dict[int, int]] = {name: {} for name in self.hists}
        self.not_numbers: dict[str, int] = dict.fromkeys(self.hists, 0)
        self.absent: dict[str, int] = dict.fromkeys([*self.count_by, *self.hists], 0)
        """Rows of a probe that has no such column (another probe's --expr): not counted."""
        self.samples = 0

    def begin(self) -> None:
        pass

    def _value(self, sample: Sample, name: str) -> Value:
        if name == "thread":
            return sample.reading.thread or None
        if name == "pid":
            return sample.pid
        return sample.reading.values[self._index[name]]

    @property
    def who(self) -> str:
        """Whose samples: a PID, or "4 processes" (those with samples) in a run of many."""
        if self.pid is not None:
            return f"PID {self.pid}"
        return f"{len(self.pids)} process{'' if len(self.pids) == 1 else 'es'}"

    def write(self, sample: Sample) -> None:
        self.samples += 1
        self.pids.add(sample.pid)
        for name in self.count_by:
            counted = self.counts[name]
            value = self._value(sample, name)
            if value is None and self._absent(sample, name):
                self.absent[name] += 1
                continue
            key = key_of(value)
            if key not in counted and key != FAILED and len(counted) >= MAX_KEYS:
                key = OTHER
            counted[key] = counted.get(key, 0) + 1
        for name in self.hists:
            value = self._value(sample, name)
            if value is None and self._absent(sample, name):
                self.absent[name] += 1
                continue
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                bucket = hist.power_of_two_key(value)
                self.buckets[name][bucket] = self.buckets[name].get(bucket, 0) + 1
            else:
                self.not_numbers[name] += 1

    def write_bulk(self, bulk: Bulk, pid: int) -> None:
        """Many rows at once (in-process probes' hits: hist.py's buckets and the counts made by numpy,
        which only a ptrace run that makes Bulks needs: the report reads no numpy)."""
        import numpy as np

        self.samples += bulk.count
        self.pids.add(pid)
        for name in self.count_by:
            values = self._bulk_values(bulk, name, pid)
            if values is None:
                self.absent[name] += bulk.count
                continue
            counted = self.counts[name]
            found = [(values, bulk.count)] if not isinstance(values, np.ndarray) else \
                zip(*(part.tolist() for part in np.unique(values, return_counts=True)))
            for value, n in found:
                key = key_of(value)
                if key not in counted and len(counted) >= MAX_KEYS:
                    key = OTHER
                counted[key] = counted.get(key, 0) + n
        for name in self.hists:
            values = self._bulk_values(bulk, name, pid)
            if values is None:
                self.absent[name] += bulk.count
                continue
            if not isinstance(values, np.ndarray) or values.dtype.kind not in "iu":
                self.not_numbers[name] += bulk.count
                continue
            buckets = self.buckets[name]
            for key, n in zip(*(part.tolist() for part in np.unique(hist.power_of_two_keys(values),
                                                                       return_counts=True))):
                buckets[key] = buckets.get(key, 0) + n

    def _bulk_values(self, bulk: Bulk, name: str, pid: int) -> Any:
        import numpy as np

        if name == "thread":
            return np.asarray(bulk.threads)
        if name == "pid":
            return pid
        return bulk.columns[self._index[name]]

    def _absent(self, sample: Sample, name: str) -> bool:
        """The column is an expression of another probe (its value None with no error of its
        own): the row's probe never asked it."""
        if name in ("thread", "pid") or PROBE not in self._index:
            return False
        error = sample.reading.error
        if not error:
            return True
        # every part of the error is another expression's ("other: why"): this row's probe asked
        # no such column; a row's own error ("breakpoint not hit ...") is counted as (error)
        others = {n for n in self.names if n != name}
        return all(part.partition(": ")[0] in others for part in error.split("; "))

    def render(self) -> str:
        """The tables, as ``sampler report --count-by/--hist`` prints them."""
        parts = []
        for name, counted in self.counts.items():
            total = sum(counted.values())
            ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
            top = [{"value": key, "count": n, "share": n / total if total else 0.0} for key, n in ordered[:SHOWN]]
            text = hist.render_counts(f"{name} ({self.who})", top)
            if len(ordered) > SHOWN:
                text += f"({len(ordered) - SHOWN} more values, {sum(n for _, n in ordered[SHOWN:])} samples)\n"
            text += self._absent_line(name)
            parts.append(text)
        for name, buckets in self.buckets.items():
            text = hist.render(f"{name} ({self.who})", hist.power_of_two_buckets(buckets))
            if self.not_numbers[name]:
                text += f"({self.not_numbers[name]} samples of {name} were no number: not counted)\n"
            text += self._absent_line(name)
            parts.append(text)
        return "\n".join(parts)

    def _absent_line(self, name: str) -> str:
        absent = self.absent[name]
        return f"({absent} samples of probes without {name}: not counted)\n" if absent else ""

    def close(self) -> None:
        stream = self.stream or sys.stdout
        stream.write(self.render())
        stream.flush()
