"""CSV output: header once, one row per sample, each row written whole and at once."""

from __future__ import annotations

import csv
import io
import os
import sys
from collections.abc import Sequence

from sampler.errors import OutputError, OutputLost
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
    """Rows go out whole or not at all: each row is one write, and when a write fails
    (disk full) the file is cut back to the last whole row before the error is raised.
    A file removed while sampler runs is created anew, with the header, and said once.
    """

    def __init__(self, path: str, names: Sequence[str]) -> None:
        """Open ``path`` ('-' for stdout) and write the header; raise OutputError if it cannot."""
        self.path = path
        self._header = columns(names)
        self._own = path != "-"
        self._fd = self._open() if self._own else sys.stdout.fileno()
        if not self._own:
            sys.stdout.flush()
        self._good = 0  # bytes of whole rows in the file
        self._begun = False  # the header went out once: later failures are mid-run
        self._emit(self._header)
        self._begun = True

    def write(self, sample: Sample) -> None:
        r = sample.reading
        if self._own and self._removed():
            self._fd = self._open()
            self._good = 0
            self._emit(self._header)
            print(f"sampler: --out {self.path} was removed while sampling: writing a new one from sample "
                  f"{sample.seq}", file=sys.stderr, flush=True)
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

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        except OSError as e:
            raise OutputError(f"cannot write --out {self.path}: {e.strerror}") from None

    def _removed(self) -> bool:
        try:
            return os.fstat(self._fd).st_nlink == 0
        except OSError:
            return False

    def _emit(self, row: Sequence[object]) -> None:
        line = io.StringIO()
        csv.writer(line, lineterminator="\n").writerow(row)
        data = line.getvalue().encode("utf-8")
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
        except OSError as e:  # disk full, file system gone, stdout closed
            if self._own and written:
                try:  # no half row: cut back to the last whole one
                    os.ftruncate(self._fd, self._good)
                except OSError:
                    pass
            problem = f"cannot write --out {self.path}: {e.strerror or e}"
            raise (OutputLost(problem) if self._begun else OutputError(problem)) from None
        self._good += len(data)

    def close(self) -> None:
        if self._own and self._fd >= 0:
            fd, self._fd = self._fd, -1
            try:
                os.close(fd)
            except OSError:
                pass
