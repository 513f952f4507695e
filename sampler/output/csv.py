"""CSV output: header once, one row per sample, flushed after every row."""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from typing import TextIO

from sampler.errors import OutputError
from sampler.sample import Sample, Value

FIXED_BEFORE = ("seq", "time", "elapsed_s", "pid", "thread")
FIXED_AFTER = ("pause_us", "wait_us", "late_us", "error")
RESERVED = frozenset(FIXED_BEFORE + FIXED_AFTER)


def columns(names: Sequence[str]) -> list[str]:
    return [*FIXED_BEFORE, *names, *FIXED_AFTER]


def format_value(value: Value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


class CsvWriter:
    def __init__(self, path: str, names: Sequence[str]) -> None:
        """Open ``path`` ('-' for stdout) and write the header; raise OutputError if it cannot."""
        self.path = path
        self._own = path != "-"
        try:
            self._file: TextIO = open(path, "w", newline="", encoding="utf-8") if self._own \
                else sys.stdout
        except OSError as e:
            raise OutputError(f"cannot write --out {path}: {e.strerror}") from None
        self._csv = csv.writer(self._file, lineterminator="\n")
        self._emit(columns(names))

    def write(self, sample: Sample) -> None:
        r = sample.reading
        self._emit([
            sample.seq,
            sample.time.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            f"{sample.elapsed_s:.6f}",
            sample.pid,
            r.thread,
            *(format_value(v) for v in r.values),
            f"{r.pause_us:.0f}",
            f"{r.wait_us:.0f}",
            f"{sample.late_us:.0f}",
            r.error,
        ])

    def _emit(self, row: Sequence[object]) -> None:
        try:
            self._csv.writerow(row)
            self._file.flush()
        except OSError as e:  # disk full, file system gone, stdout closed
            raise OutputError(f"cannot write --out {self.path}: {e.strerror or e}") from None

    def close(self) -> None:
        if self._own:
            try:
                self._file.close()
            except OSError:
                pass
