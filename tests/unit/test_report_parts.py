"""The pieces of report, --stop-when, --live and the short form that need no target."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from sampler.errors import UsageError
from sampler.evaluation.fields import rewrite
from sampler.language.condition import Condition
from sampler.output import hist
from sampler.output.live import LiveView, sparkline
from sampler.report.stats import failed_in


def test_power_of_two_buckets_are_bpftraces() -> None:
    buckets = hist.power_of_two([-3, 0, 1, 2, 3, 4, 7, 8, 1500, 2048, 20001])
    assert buckets[:6] == [("(..., 0)", 1), ("[0]", 1), ("[1]", 1), ("[2, 4)", 2), ("[4, 8)", 2), ("[8, 16)", 1)]
    assert ("[1K, 2K)", 1) in buckets and ("[2K, 4K)", 1) in buckets and buckets[-1] == ("[16K, 32K)", 1)
    assert sum(count for _, count in buckets) == 11


def test_linear_buckets_with_the_outside_ones() -> None:
    buckets = hist.linear([-1, 0, 5, 10, 19, 20, 25], 0, 20, 10)
    assert buckets == [("(..., 0)", 1), ("[0, 10)", 2), ("[10, 20)", 2), ("[20, ...)", 2)]


def test_a_histogram_is_drawn_with_bars_in_proportion() -> None:
    text = hist.render("delta", [("[0]", 2), ("[1]", 4)])
    lines = text.splitlines()
    assert lines[0] == "@delta:"
    assert lines[1].count("@") == 26 and lines[2].count("@") == 52


@pytest.mark.parametrize("condition,row,holds", [
    ("delta > 20000", {"delta": 20001}, True),
    ("delta > 20000", {"delta": 20000}, False),
    ("delta > 20000", {"delta": None}, False),  # that row's expression failed
    ("delta >= 10 && bug == 1", {"delta": 10, "bug": 1}, True),
    ("delta < 0 || !bug", {"delta": 5, "bug": 0}, True),
    ("pause_us > 100", {"delta": 5, "pause_us": 99.0}, False),
    ("(delta - 1) % 2 == 0", {"delta": 3}, True),
])
def test_stop_when_conditions(condition: str, row: dict[str, object], holds: bool) -> None:
    assert Condition(condition, ["delta", "bug"]).holds(row) is holds  # type: ignore[arg-type]


@pytest.mark.parametrize("text,why", [("nope > 1", "no column 'nope'"), ("f(delta)", "function calls"),
                                      ("delta.x > 1", "only column names")])
def test_stop_when_refuses_what_it_cannot_check(text: str, why: str) -> None:
    with pytest.raises(Exception) as caught:
        Condition(text, ["delta"])
    assert why in str(caught.value)
    assert isinstance(caught.value, UsageError)


def test_the_short_form_rewrites_free_names_only() -> None:
    chosen = {"w": "main.ring.w", "r": "main.ring.r"}
    assert rewrite("w-r", chosen) == "main.ring.w-main.ring.r"
    assert rewrite("b.w - b->r + w", chosen) == "b.w - b->r + main.ring.w"
    assert rewrite("len(w) * 2", chosen) == "len(main.ring.w) * 2"


def test_an_error_names_the_expression_it_is_about() -> None:
    assert failed_in("delta: optimized out; cap: null pointer", "cap")
    assert not failed_in("delta: optimized out", "cap")
    assert failed_in("breakpoint not hit within 2s", "cap")  # a miss: nothing was read
    assert not failed_in("", "cap")
    # --latency's notes have no 'name: ' part: a row whose column holds a value did not fail (issue 37)
    note = "latency_us holds the kernel's part of 3 stop(s) of sampler's inside the call"
    assert failed_in(note, "latency_us")
    assert not failed_in(note, "latency_us", {"latency_us": "512.3", "error": note})
    assert failed_in(note, "latency_us", {"latency_us": "", "error": note})


def test_the_live_view_shows_last_min_p50_max_and_a_sparkline() -> None:
    from datetime import UTC, datetime

    from sampler.sample import Reading, Sample

    stream = io.StringIO()
    times = iter([0.0] + [float(i) for i in range(1, 20)])
    view = LiveView(["delta"], 42, stream=stream, clock=lambda: next(times))
    for seq, value in enumerate([5, 1, 9, 3], 1):
        view.write(Sample(seq, datetime.now(UTC), seq, 42, Reading((value,), pause_us=10.0 * seq), 0.0))
    lines = view.lines(5.0)
    assert "4 samples (0 with errors)" in lines[0] and "0.8/s" in lines[0]
    assert lines[2].split()[:5] == ["delta", "3", "1", "4", "9"]  # p50 of 5 1 9 3 is 4
    assert lines[2].split()[5] == sparkline([5, 1, 9, 3])
    assert stream.getvalue() == ""  # not a terminal: drawn once, at the end
    view.close()
    assert "delta" in stream.getvalue() and "\x1b[" not in stream.getvalue()


def test_a_sparkline_spans_the_range() -> None:
    assert sparkline([0, 7]) == "▁█"
    assert sparkline([3, 3]) == "▅▅"


def test_report_keeps_pids_apart_and_counts_errors_per_expression(tmp_path: Path) -> None:
    from sampler.report import Request, run

    header = "seq,time,elapsed_s,pid,thread,delta,name,pause_us,wait_us,late_us,error\n"
    first = tmp_path / "a.csv"
    first.write_text(header + "1,t,0.0,10,1,5,x,20,1,0,\n2,t,1.0,10,1,,x,21,1,0,delta: null pointer\n"
                     "3,t,2.0,10,1,9,y,22,1,0,\n")
    second = tmp_path / "b.csv"
    second.write_text(header + "1,t,0.0,11,1,100,z,30,1,0,\n2,t,0.5,11,1,100,z,31,1,0,\n")
    report = json.loads(run(Request([str(first), str(second)], as_json=True)))
    a, b = report["pids"]["10"]["columns"], report["pids"]["11"]["columns"]
    assert (a["delta"]["rows"], a["delta"]["errors"], a["delta"]["min"], a["delta"]["max"]) == (3, 1, 5, 9)
    assert a["delta"]["changes"] == 1 and a["name"]["numeric"] is False and a["name"]["last"] == "y"
    assert a["name"]["errors"] == 0  # the error named delta only
    assert (b["delta"]["min"], b["delta"]["changes"], b["pause_us"]["max"]) == (100, 0, 31)


def test_report_keeps_runs_of_one_pid_apart_and_counts_values(tmp_path: Path) -> None:
    from sampler.report import Request, run

    # GIVEN a trace run and an attach run of PID 10, and a trace that counted calls (no expression)
    header = "seq,time,elapsed_s,pid,thread,cmd,pause_us,wait_us,late_us,error\n"
    traced = tmp_path / "trace.csv"
    traced.write_text(header + "".join(f"{i},t,{i / 10},10,1,{c},20,1,0,\n" for i, c in
                                       enumerate(["get", "set", "get", "get", "mset\\x1b"], 1)))
    attached = tmp_path / "attach.csv"
    attached.write_text(header + "1,t,0.0,10,1,set,30,1,0,\n2,t,1.0,10,1,,31,1,0,cmd: null pointer\n")
    counted = tmp_path / "calls.csv"
    counted.write_text("seq,time,elapsed_s,pid,thread,pause_us,wait_us,late_us,error\n"
                       "1,t,0.0,12,7,5,1,0,\n2,t,0.1,12,8,5,1,0,\n3,t,0.2,12,7,5,1,0,\n")
    # WHEN reported together, with the values of cmd (and of thread) counted
    report = json.loads(run(Request([str(traced), str(attached), str(counted)], as_json=True,
                                    count_by=("cmd", "thread"), top=2)))
    # THEN each run has its own table, and the counts are per run, most frequent first
    assert set(report["pids"]) == {f"10 ({traced})", f"10 ({attached})", "12"}
    assert report["pids"][f"10 ({traced})"]["rows"] == 5 and report["pids"]["12"]["rows"] == 3
    assert report["counts"][f"cmd (PID 10 ({traced}))"] == [
        {"value": "get", "count": 3, "share": 0.6}, {"value": "mset\\x1b", "count": 1, "share": 0.2}]
    assert report["counts"][f"cmd (PID 10 ({attached}))"] == [{"value": "set", "count": 1, "share": 1.0}]
    assert report["counts"]["thread (PID 12)"][0] == {"value": "7", "count": 2, "share": 2 / 3}
    text = run(Request([str(traced)], count_by=("cmd",)))
    assert "@cmd (PID 10):\nget" in text and "3   60.0 %" in text


def test_histograms_leave_out_nan_and_infinities() -> None:
    nan, inf = float("nan"), float("inf")
    assert hist.power_of_two([nan, inf, -inf, 1]) == [("[1]", 1)]
    assert hist.linear([nan, inf, 5], 0, 10, 5) == [("[5, 10)", 1)]
