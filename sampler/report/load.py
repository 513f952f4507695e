"""Reading sampler's CSVs (from attach and trace) into one table, with clear refusals.

Plain Python (csv): the report needs no pandas, so that it runs wherever sampler does,
the single file of `make dist` included."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sampler.errors import UsageError
from sampler.sample import FIXED_AFTER, FIXED_BEFORE

Row = dict[str, Any]
"""One row: every column as its text, but elapsed_s, pause_us, wait_us and late_us as floats
(None when empty), pid as int, and ``file``, the CSV it came from."""
NUMBERS = ("elapsed_s", "pause_us", "wait_us", "late_us")


class ReportError(UsageError):
    """A file that is not a sampler CSV, or a name that is not one of its columns."""


@dataclass(frozen=True)
class Table:
    rows: list[Row]
    """Every row of every file, in the order of the files."""
    expressions: list[str]
    """The expression columns, in the order of the first file that has each."""
    columns: frozenset[str]
    """Every column some file has."""

    @property
    def files(self) -> list[str]:
        """The CSVs the rows came from, sorted."""
        return sorted({row["file"] for row in self.rows})


def load(paths: list[str]) -> Table:
    rows: list[Row] = []
    names: list[str] = []
    columns: set[str] = set()
    for path in paths:
        header, read = _read(path)
        for name in _expressions(header):
            if name not in names:
                names.append(name)
        columns.update(header)
        rows += read
    return Table(rows, names, frozenset(columns))


def _read(path: str) -> tuple[list[str], list[Row]]:
    if not Path(path).is_file():
        raise ReportError(f"{path}: no such file", "give the CSV that sampler attach or trace wrote (--out)")
    try:
        with open(path, newline="", encoding="utf-8") as f:
            lines = list(csv.reader(f))
    except (csv.Error, UnicodeDecodeError, OSError) as e:
        raise ReportError(f"{path}: not a sampler CSV ({str(e).splitlines()[0]})",
                          "give the CSV that sampler attach or trace wrote") from None
    if not lines:
        raise ReportError(f"{path}: the file is empty", "it has no header: was the run stopped before it "
                          "attached?")
    header = lines[0]
    missing = [c for c in (*FIXED_BEFORE, *FIXED_AFTER) if c not in header]
    if missing:
        raise ReportError(f"{path}: not a sampler CSV: column {missing[0]!r} is missing",
                          f"a sampler CSV has the columns {', '.join(FIXED_BEFORE)}, the expressions, "
                          f"{', '.join(FIXED_AFTER)}")
    rows = []
    for number, cells in enumerate(lines[1:], start=2):
        if not cells:
            continue
        if len(cells) > len(header):
            raise ReportError(f"{path}: not a sampler CSV (line {number} has {len(cells)} fields, the header "
                              f"{len(header)})", "give the CSV that sampler attach or trace wrote")
        row: Row = dict(zip(header, [*cells, *[""] * (len(header) - len(cells))]))
        for column in NUMBERS:
            row[column] = to_number(row[column])
        pid = to_number(row["pid"])
        if row["elapsed_s"] is None or pid is None or not float(pid).is_integer():
            raise ReportError(f"{path}: not a sampler CSV: elapsed_s and pid must be numbers in every row",
                              "give the CSV that sampler attach or trace wrote")
        row["pid"] = int(pid)
        row["file"] = path
        rows.append(row)
    return header, rows


def _expressions(header: list[str]) -> list[str]:
    first, last = header.index(FIXED_BEFORE[-1]) + 1, header.index(FIXED_AFTER[0])
    return header[first:last]  # none: a trace that counted calls


def to_number(text: Any) -> float | int | None:
    """A cell as a number (int when it is written as one), None when it is not one."""
    if isinstance(text, (int, float)) or text is None:
        return text
    text = str(text).strip()
    if not text or "_" in text:  # Python reads 1_000; a CSV cell of it is text
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return None
    return None if math.isnan(number) and text.lower() not in ("nan", "+nan", "-nan") else number


def cells(rows: Iterable[Row], name: str) -> list[Any]:
    """The column's cells; None where a row has no such column (a file without it)."""
    return [row.get(name) for row in rows]


def present(values: Sequence[Any]) -> list[Any]:
    """The values that are there: not None, not an empty cell."""
    return [value for value in values if value is not None and value != ""]


def numeric(values: Sequence[Any]) -> list[float | int] | None:
    """The values as numbers when every one that is there is one (None for text: strings, pointers)."""
    there = present(values)
    if not there:
        return None
    numbers = [to_number(value) for value in there]
    if any(number is None for number in numbers):
        return None
    return [number for number in numbers if number is not None]
