"""Reading sampler's CSVs (from attach and trace) into one table, with clear refusals."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd  # type: ignore[import-untyped]

from sampler.errors import UsageError
from sampler.sample import FIXED_AFTER, FIXED_BEFORE


class ReportError(UsageError):
    """A file that is not a sampler CSV, or a name that is not one of its columns."""


@dataclass(frozen=True)
class Table:
    rows: pd.DataFrame
    """Every row of every file, with ``file`` added; ``elapsed_s`` as float, ``pid`` as int."""
    expressions: list[str]
    """The expression columns, in the order of the first file that has each."""


def load(paths: list[str]) -> Table:
    frames, names = [], []
    for path in paths:
        frame = _read(path)
        for name in _expressions(frame, path):
            if name not in names:
                names.append(name)
        frame["file"] = path
        frames.append(frame)
    rows = pd.concat(frames, ignore_index=True)
    return Table(rows, names)


def _read(path: str) -> pd.DataFrame:
    if not Path(path).is_file():
        raise ReportError(f"{path}: no such file", "give the CSV that sampler attach or trace wrote (--out)")
    try:
        frame = pd.read_csv(path, dtype={"thread": str, "error": str}, keep_default_na=False,
                            na_values={name: [""] for name in ("pause_us", "wait_us", "late_us", "elapsed_s")})
    except pd.errors.EmptyDataError:
        raise ReportError(f"{path}: the file is empty", "it has no header: was the run stopped before it "
                          "attached?") from None
    except (pd.errors.ParserError, UnicodeDecodeError, ValueError) as e:
        raise ReportError(f"{path}: not a sampler CSV ({str(e).splitlines()[0]})",
                          "give the CSV that sampler attach or trace wrote") from None
    missing = [c for c in (*FIXED_BEFORE, *FIXED_AFTER) if c not in frame.columns]
    if missing:
        raise ReportError(f"{path}: not a sampler CSV: column {missing[0]!r} is missing",
                          f"a sampler CSV has the columns {', '.join(FIXED_BEFORE)}, the expressions, "
                          f"{', '.join(FIXED_AFTER)}")
    for column in ("elapsed_s", "pause_us", "wait_us", "late_us", "pid"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce")
    if frame["elapsed_s"].isna().any() or frame["pid"].isna().any():
        raise ReportError(f"{path}: not a sampler CSV: elapsed_s and pid must be numbers in every row",
                          "give the CSV that sampler attach or trace wrote")
    frame["pid"] = frame["pid"].astype(int)
    frame["error"] = frame["error"].fillna("").astype(str)
    return frame


def _expressions(frame: pd.DataFrame, _path: str) -> list[str]:
    columns = list(frame.columns)
    first, last = columns.index(FIXED_BEFORE[-1]) + 1, columns.index(FIXED_AFTER[0])
    return columns[first:last]  # none: a trace that counted calls


def numeric(series: pd.Series) -> pd.Series | None:
    """The column as numbers when every value it has is one (None for text: strings, pointers)."""
    present = series.dropna()
    if present.empty:
        return None
    converted = pd.to_numeric(present, errors="coerce")
    if converted.isna().any():
        return None
    return pd.to_numeric(series, errors="coerce")
