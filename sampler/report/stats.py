"""The statistics of each column of a run: what `sampler report` prints and --json gives."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from sampler.report.load import ReportError, Row, Table, cells, numeric, present
from sampler.sample import PROBE

Stats = dict[str, Any]
QUANTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
OWN = ("pause_us", "wait_us")
"""sampler's own columns that get the same statistics as the expressions."""


def column_stats(rows: list[Row], name: str) -> Stats:
    """rows, errors, and for numbers min/p50/p95/p99/max/mean and how often the value changed;
    first and last value for every column."""
    failed = [name not in OWN and failed_in(row["error"], name, row) for row in rows]
    there = present([value for value, bad in zip(cells(rows, name), failed) if not bad])
    stats: Stats = {"rows": len(rows), "errors": sum(failed), "values": len(there)}
    numbers = numeric(there)
    shown = numbers if numbers is not None else there  # numbers as numbers, in --json too
    stats["first"] = _plain(shown[0]) if shown else None
    stats["last"] = _plain(shown[-1]) if shown else None
    if not numbers:
        stats["numeric"] = False
        return stats
    stats["numeric"] = True
    ordered = sorted(numbers)
    stats["min"], stats["max"] = _plain(ordered[0]), _plain(ordered[-1])
    for key, q in QUANTILES:
        stats[key] = _plain(nearest(ordered, q))
    stats["mean"] = float(math.fsum(numbers) / len(numbers))
    stats["changes"] = sum(1 for before, after in zip(numbers, numbers[1:]) if after != before)
    return stats


def nearest(ordered: list[float | int], q: float) -> float | int:
    """The q-quantile of sorted values, as the value nearest to its rank (numpy's 'nearest':
    rank q * (n - 1), halves rounded to even)."""
    return ordered[round(q * (len(ordered) - 1))]


def failed_in(error: str, name: str, row: Row | None = None) -> bool:
    """The row's error names this expression ('name: why; other: why'), or the whole sample
    failed (a miss: no expression was read). With ``row``: a column that holds a value did not
    fail, whatever the error says (--latency's notes on latency_us have no 'name: ' part)."""
    if not error:
        return False
    if row is not None and row.get(name) not in (None, "") and not _nan(row.get(name)):
        return False
    parts = [part.strip() for part in error.split("; ")]
    return any(part.startswith(f"{name}: ") for part in parts) or not any(": " in p for p in parts) \
        or parts[0].startswith("breakpoint not hit")


def _nan(value: Any) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _plain(value: Any) -> Any:
    """Numbers as JSON gives them: integers kept integers, NaN as None."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        return int(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def group(rows: list[Row], key: Any) -> dict[Any, list[Row]]:
    """The rows by ``key(row)``, keys sorted, each group in the rows' order."""
    groups: dict[Any, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return dict(sorted(groups.items()))


def runs(table: Table) -> list[tuple[str, int, list[Row]]]:
    """The table's runs: the rows of one PID in one file, keyed by the PID (and the file when
    the PID is in several: a trace and an attach run of one process stay apart); in a run with
    a probe column, the rows of each probe apart ("PID at PROBE"). A file with several PIDs (a
    run of many processes) also gives the rows of all of them together, first ("all N processes")."""
    files_of = {pid: len({row["file"] for row in rows}) for pid, rows in group(table.rows, _pid).items()}
    several = len(table.files) > 1
    found = []
    for path, rows in group(table.rows, _file).items():  # a run of many processes: all of them too
        pids = len({row["pid"] for row in rows})
        if pids > 1:
            found.append((f"all {pids} processes" + (f" ({path})" if several else ""), 0, rows))
    for (pid, path), rows in group(table.rows, lambda row: (row["pid"], row["file"])).items():
        key = str(pid) if files_of[pid] == 1 else f"{pid} ({path})"
        probes = [str(row.get(PROBE, "")) for row in rows] if PROBE in table.columns else None
        if probes is None or len(set(probes)) < 2:
            found.append((key, pid, rows))
            continue
        for probe in dict.fromkeys(probes):  # in the order they first came
            found.append((f"{key} at {probe}", pid, [row for row, p in zip(rows, probes) if p == probe]))
    return found


def _pid(row: Row) -> int:
    return int(row["pid"])


def _file(row: Row) -> str:
    return str(row["file"])


def probe_of(rows: list[Row]) -> str | None:
    """The probe all of a run's rows came from, when the run is one probe's rows of several."""
    if not rows or PROBE not in rows[0]:
        return None
    probes = {str(row.get(PROBE, "")) for row in rows}
    return next(iter(probes)) if len(probes) == 1 and probes != {""} else None


MAX_WINDOWS = 100_000
"""--by: windows of one run at most (each is printed, empty ones too)."""


def report(table: Table, by_s: float | None = None) -> dict[str, Any]:
    """Per run (a PID in a file; several runs or processes stay apart): the statistics of every
    column, and with ``by_s`` of every window of that many seconds."""
    result: dict[str, Any] = {"pids": {}}
    for key, pid, rows in runs(table):
        elapsed = [row["elapsed_s"] for row in rows]
        entry: dict[str, Any] = {
            "pid": pid,
            "run": key,
            "probe": probe_of(rows) if key.endswith(f" at {probe_of(rows)}") else None,
            "files": sorted({row["file"] for row in rows}),
            "rows": len(rows),
            "seconds": float(max(elapsed) - min(elapsed)),
            "columns": {name: column_stats(rows, name) for name in (*table.expressions, *OWN)
                        if name in table.columns and name != PROBE and has_values(table, rows, name)},
        }
        if by_s:
            windows = []
            start = min(elapsed)
            grouped = group(rows, lambda row, s=start, b=by_s: int((row["elapsed_s"] - s) // b))
            if max(grouped) >= MAX_WINDOWS:
                raise ReportError(f"--by {by_s:g}s makes {max(grouped) + 1:,} windows of {entry['seconds']:.0f} s "
                                  f"(at most {MAX_WINDOWS:,})", "give a longer --by")
            for index in range(max(grouped) + 1):  # a window without rows is one of 0 (calls per second)
                window = grouped.get(index, [])
                windows.append({"from_s": float(start + index * by_s), "to_s": float(start + (index + 1) * by_s),
                                "rows": len(window),
                                "columns": {name: column_stats(window, name) for name in table.expressions
                                            if name in table.columns} if window else {}})
            entry["windows"] = windows
        result["pids"][key] = entry
    return result


def has_values(table: Table, rows: list[Row], name: str) -> bool:
    """Some row has a value in the column (a probe's rows have none in another probe's columns)."""
    if name in OWN or PROBE not in table.columns:
        return True
    return any(str(value) != "" for value in cells(rows, name))


def top_values(rows: list[Row], name: str, count: int) -> list[dict[str, Any]]:
    """The ``count`` most frequent values of a column (strings included), with their share;
    rows where the column failed are counted under no value."""
    if name not in (*OWN, "thread", "late_us", "pid"):
        rows = [row for row in rows if not failed_in(row["error"], name, row)]
    values = [_text(value) for value in cells(rows, name) if value is not None]
    counts = Counter(values)
    total = len(values)
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:count]
    return [{"value": value, "count": n, "share": n / total if total else 0.0} for value, n in ordered]


def _text(value: Any) -> str:
    """A value as the CSV wrote it: a float read from a number column without its '.0' when whole."""
    return str(_plain(value)) if isinstance(value, float) else str(value)


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
            lines.append(f"  {window['from_s']:.1f}-{window['to_s']:.1f} s: {window['rows']} rows")
            if window["columns"]:
                rows = [["column", *keys]] + [[name, *(format_number(s.get(k)) for k in keys)]
                                              for name, s in window["columns"].items()]
                lines += ["  " + line for line in _aligned(rows)]
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _aligned(table: list[list[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  " + "  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                             enumerate(zip(row, widths))).rstrip() for row in table]
