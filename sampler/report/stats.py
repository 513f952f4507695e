"""The statistics of each column of a run: what `sampler report` prints and --json gives."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd  # type: ignore[import-untyped]

from sampler.report.load import Table, numeric
from sampler.sample import PROBE

Stats = dict[str, Any]
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
OWN = ("pause_us", "wait_us")
"""sampler's own columns that get the same statistics as the expressions."""


def column_stats(rows: pd.DataFrame, name: str) -> Stats:
    """rows, errors, and for numbers min/p50/p95/p99/max/mean and how often the value changed;
    first and last value for every column."""
    series = rows[name] if name in rows.columns else pd.Series([None] * len(rows), dtype=object)
    failed = rows["error"].map(lambda text: failed_in(text, name)) if name not in OWN else \
        pd.Series([False] * len(rows), index=rows.index)
    present = series[~failed].dropna()
    if present.dtype == object:  # an empty cell is no value (another probe's row, a failed read)
        present = present[present.astype(str) != ""]
    stats: Stats = {"rows": len(rows), "errors": int(failed.sum()), "values": len(present)}
    numbers = numeric(present)
    shown = numbers if numbers is not None else present  # numbers as numbers, in --json too
    stats["first"] = _plain(shown.iloc[0]) if len(shown) else None
    stats["last"] = _plain(shown.iloc[-1]) if len(shown) else None
    if numbers is None or numbers.empty:
        stats["numeric"] = False
        return stats
    stats["numeric"] = True
    stats["min"], stats["max"] = _plain(numbers.min()), _plain(numbers.max())
    for key, q in QUANTILES:
        stats[key] = _plain(numbers.quantile(q, interpolation="nearest"))
    stats["mean"] = float(numbers.mean())
    stats["changes"] = int((numbers.diff().fillna(0) != 0).sum())
    return stats


def failed_in(error: str, name: str) -> bool:
    """The row's error names this expression ('name: why; other: why'), or the whole sample
    failed (a miss: no expression was read)."""
    if not error:
        return False
    parts = [part.strip() for part in error.split("; ")]
    return any(part.startswith(f"{name}: ") for part in parts) or not any(": " in p for p in parts) \
        or parts[0].startswith("breakpoint not hit")


def _plain(value: Any) -> Any:
    """numpy scalars as Python numbers (for JSON), integers kept integers."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def runs(table: Table) -> list[tuple[str, int, pd.DataFrame]]:
    """The table's runs: the rows of one PID in one file, keyed by the PID (and the file when
    the PID is in several: a trace and an attach run of one process stay apart); in a run with
    a probe column, the rows of each probe apart ("PID at PROBE"). A file with several PIDs (a
    run of many processes) also gives the rows of all of them together, first ("all N processes")."""
    files_of = table.rows.groupby("pid")["file"].nunique()
    found = []
    for path, rows in table.rows.groupby("file", sort=True):  # a run of many processes: all of them too
        if rows["pid"].nunique() > 1:
            several = table.rows["file"].nunique() > 1
            found.append((f"all {rows['pid'].nunique()} processes" + (f" ({path})" if several else ""), 0, rows))
    for (pid, path), rows in table.rows.groupby(["pid", "file"], sort=True):
        key = str(pid) if files_of[pid] == 1 else f"{pid} ({path})"
        probes = rows[PROBE].astype(str) if PROBE in rows.columns else None
        if probes is None or probes.nunique() < 2:
            found.append((key, int(pid), rows))
            continue
        for probe in dict.fromkeys(probes):  # in the order they first came
            found.append((f"{key} at {probe}", int(pid), rows[probes == probe]))
    return found


def probe_of(rows: pd.DataFrame) -> str | None:
    """The probe all of a run's rows came from, when the run is one probe's rows of several."""
    if PROBE not in rows.columns or rows.empty:
        return None
    probes = set(rows[PROBE].astype(str))
    return next(iter(probes)) if len(probes) == 1 and probes != {""} else None


def report(table: Table, by_s: float | None = None) -> dict[str, Any]:
    """Per run (a PID in a file; several runs or processes stay apart): the statistics of every
    column, and with ``by_s`` of every window of that many seconds."""
    result: dict[str, Any] = {"pids": {}}
    for key, pid, rows in runs(table):
        entry: dict[str, Any] = {
            "pid": pid,
            "run": key,
            "probe": probe_of(rows) if key.endswith(f" at {probe_of(rows)}") else None,
            "files": sorted(set(rows["file"])),
            "rows": len(rows),
            "seconds": float(rows["elapsed_s"].max() - rows["elapsed_s"].min()),
            "columns": {name: column_stats(rows, name) for name in (*table.expressions, *OWN)
                        if name in rows.columns and name != PROBE and _has_values(rows, name)},
        }
        if by_s:
            windows = []
            start = rows["elapsed_s"].min()
            for index, window in rows.groupby(((rows["elapsed_s"] - start) // by_s).astype(int), sort=True):
                windows.append({"from_s": float(start + index * by_s), "to_s": float(start + (index + 1) * by_s),
                                "columns": {name: column_stats(window, name) for name in table.expressions
                                            if name in window.columns}})
            entry["windows"] = windows
        result["pids"][key] = entry
    return result


def _has_values(rows: pd.DataFrame, name: str) -> bool:
    """Some row has a value in the column (a probe's rows have none in another probe's columns)."""
    if name in OWN or PROBE not in rows.columns:
        return True
    return bool((rows[name].astype(str) != "").any())


def top_values(rows: pd.DataFrame, name: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` most frequent values of a column (strings included), with their share;
    rows where the column failed are counted under no value."""
    series = rows[name] if name in rows.columns else pd.Series([None] * len(rows), dtype=object)
    if name not in (*OWN, "thread", "late_us", "pid"):
        series = series[~rows["error"].map(lambda text: failed_in(text, name))]
    counts = series.dropna().astype(str).value_counts()
    total = len(series.dropna())
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:count]
    return [{"value": value, "count": int(n), "share": n / total if total else 0.0} for value, n in ordered]


def format_number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    text = str(value)
    return text if len(text) <= 24 else text[:21] + "..."


def render(result: dict[str, Any]) -> str:
    """The report as aligned text tables, one per PID."""
    lines: list[str] = []
    keys = ("rows", "errors", "min", "p50", "p95", "p99", "max", "mean", "first", "last", "changes")
    for entry in result["pids"].values():
        at = entry.get("probe")
        who = f"PID {entry['pid']}" if entry["pid"] else entry["run"].capitalize()
        lines.append(f"{who}{f' at {at}' if at else ''}: {entry['rows']} rows, "
                     f"{entry['seconds']:.1f} s in {', '.join(entry['files'])}")
        table = [["column", *keys]]
        for name, stats in entry["columns"].items():
            table.append([name, *(format_number(stats.get(key)) for key in keys)])
        lines += _aligned(table)
        for window in entry.get("windows", []):
            lines.append(f"  {window['from_s']:.1f}-{window['to_s']:.1f} s")
            rows = [["column", *keys]] + [[name, *(format_number(s.get(k)) for k in keys)]
                                          for name, s in window["columns"].items()]
            lines += ["  " + line for line in _aligned(rows)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _aligned(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row, widths))).rstrip() for row in table]
