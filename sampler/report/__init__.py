"""`sampler report`: the answer a run was after, from its CSVs (statistics, histograms, a plot)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sampler.output import hist
from sampler.report import stats
from sampler.report.load import ReportError, Row, Table, cells, load, numeric, present


@dataclass(frozen=True)
class Request:
    paths: list[str]
    hists: tuple[str, ...] = ()
    lhists: tuple[tuple[str, float, float, float], ...] = ()
    by_s: float | None = None
    plot: str | None = None
    as_json: bool = False
    count_by: tuple[str, ...] = ()
    top: int = 10


def run(request: Request) -> str:
    """What `sampler report` prints."""
    table = load(request.paths)
    for name in (*request.hists, *(h[0] for h in request.lhists), *request.count_by):
        _check_column(table, name)
    for name, low, high, step in request.lhists:
        if step <= 0 or high <= low:
            raise ReportError(f"--lhist {name} {low:g} {high:g} {step:g}: needs MIN < MAX and STEP > 0",
                              "e.g. --lhist delta 0 20000 1000")
    result = stats.report(table, request.by_s)
    histograms, counted = [], []
    for key, pid, rows in stats.runs(table):
        who = f"PID {key}" if pid else key  # 0: all the processes of a run together
        absent = [name for name in (*request.hists, *(h[0] for h in request.lhists), *request.count_by)
                 if not stats.has_values(table, rows, name)]
        for name in request.hists:
            if name in absent:
                continue
            values = _values(rows, name)
            histograms.append((f"{name} ({who})", hist.power_of_two(values)))
        for name, low, high, step in request.lhists:
            if name in absent:
                continue
            values = _values(rows, name)
            histograms.append((f"{name} ({who})", hist.linear(values, low, high, step)))
        for name in request.count_by:
            if name in absent:
                continue
            counted.append((f"{name} ({who})", stats.top_values(rows, name, request.top)))
    if request.plot:
        from sampler.report.plot import plot  # matplotlib only when asked for
        result["plot"] = {"path": request.plot, "panels": plot(table, request.plot)}
    if request.as_json:
        result["histograms"] = {title: [{"bucket": b, "count": c} for b, c in buckets]
                                for title, buckets in histograms}
        result["counts"] = dict(counted)
        return json.dumps(result, indent=2) + "\n"
    text = stats.render(result)
    for title, buckets in histograms:
        text += "\n" + hist.render(title, buckets)
    for title, top in counted:
        text += "\n" + hist.render_counts(title, top)
    if request.plot:
        text += f"\nplot: {request.plot}\n"
    return text


def _check_column(table: Table, name: str) -> None:
    if name not in (*table.expressions, *stats.OWN, "late_us", "thread", "pid"):
        raise ReportError(f"no column {name!r} in {', '.join(table.files)}",
                          f"the columns are {', '.join([*table.expressions, *stats.OWN])}")


def _values(rows: list[Row], name: str) -> list[float]:
    if name not in stats.OWN and name != "late_us":
        rows = [row for row in rows if not stats.failed_in(row["error"], name, row)]
    there = present(cells(rows, name))
    if not there:
        return []  # no value in these rows (a process of the run whose every sample missed)
    numbers = numeric(there)
    if numbers is None:
        raise ReportError(f"{name} is not numeric: no histogram", "give a column of numbers")
    return [float(v) for v in numbers]


__all__ = ["ReportError", "Request", "run"]
