"""Seeing the answer: the short form, report, --stop-when, JSON Lines, --metrics, --live."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    Target,
    finish,
    have_delve,
    one_line_error,
    read_csv,
    sampler,
    start_sampler,
    unique_name,
    wait_for_rows,
)

CAPACITY = 20000


@pytest.mark.parametrize("target_name,backend,path", [
    ("ringbuf-c", "ptrace", "ring.w"), ("ringbuf-go", "ptrace", "main.ring.w"),
    ("ringbuf-go", "delve", "main.ring.w"), ("ringbuf-go", "delve-rpc", "main.ring.w")])
def test_the_short_form_reads_fields_of_the_globals(start_target: Callable[..., Target], target_name: str,
                                                    backend: str, path: str) -> None:
    if backend != "ptrace" and not have_delve():
        pytest.skip("dlv is missing (make setup installs it)")
    # GIVEN a bundled ring buffer, and the expression a new user is told about
    target = start_target(target_name)
    # WHEN sampling w-r with no --at
    result = sampler("attach", "--pid", str(target.pid), "--backend", backend, "--expr", "w-r", "--count", "4",
                     "--interval", "0.1s")
    # THEN each name is said once as the global's field it is, and the values are the ring's
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if " is " in line and "w-r:" in line]
    assert said == [f"sampler: w-r: w is {path}, r is {path[:-1]}r"], result.stderr
    rows = [line.split(",") for line in result.stdout.splitlines()[1:]]
    # ptrace without --at reads w, then r, while the ring runs (zero-stop): no snapshot. r may have
    # passed the w read a moment before, and by any amount when the worker was preempted between
    # the two reads (36,000 past in a loaded CI run): most rows are within the ring, not all. The
    # stopping backends read both at once: every row is.
    assert len(rows) == 4, result.stdout
    within = [0 <= _signed(int(row[5])) <= CAPACITY if backend != "ptrace" else
              -CAPACITY <= _signed(int(row[5])) <= CAPACITY for row in rows]
    assert all(within) if backend != "ptrace" else sum(within) >= 2, result.stdout
    target.assert_untouched()


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def test_a_field_of_several_globals_is_listed_not_guessed(start_target: Callable[..., Target]) -> None:
    target = start_target("httpd-go")
    result = sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--expr", "tab", "--count", "2",
                     "--quiet")
    line = one_line_error(result)
    assert "tab is a field of several globals: main.current.tab, main.lastErr.tab, main.page.escapeErr.tab" in line
    target.assert_untouched()


def test_a_name_that_is_nowhere_says_so(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    line = one_line_error(sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--expr", "nothere",
                                  "--quiet"))
    assert "no variable 'nothere'" in line and "nor a field of a global" in line


@pytest.fixture(scope="module")
def bug_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run on the C ring buffer with its off-by-one: w - r reaches capacity + 1."""
    from tests.integration.targets import BIN
    target = Target([str(BIN / "ringbuf-c"), "--bug"])
    out = tmp_path_factory.mktemp("report") / "bug.csv"
    try:
        result = sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--at", "ring_read",
                         "--expr", "delta=b->w - b->r", "--expr", "bug=b->bug", "--rate", "50", "--count", "60",
                         "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stderr
    finally:
        target.stop()
    return out


def test_report_gives_the_statistics_of_a_run(bug_run: Path) -> None:
    rows = read_csv(bug_run)
    deltas = sorted(int(r["delta"]) for r in rows)
    # WHEN reporting it as JSON
    result = sampler("report", str(bug_run), "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    [(pid, entry)] = report["pids"].items()
    delta = entry["columns"]["delta"]
    # THEN the figures are the CSV's own
    assert pid == rows[0]["pid"]
    assert delta["rows"] == 60 and delta["errors"] == 0
    assert delta["min"] == deltas[0] and delta["max"] == deltas[-1] and deltas[-1] <= CAPACITY + 1
    assert delta["p50"] == deltas[29] or delta["p50"] == deltas[30]
    assert delta["first"] == int(rows[0]["delta"]) and delta["last"] == int(rows[-1]["delta"])
    changes = sum(1 for a, b in itertools.pairwise(rows) if a["delta"] != b["delta"])
    assert delta["changes"] == changes
    assert entry["columns"]["bug"]["min"] == entry["columns"]["bug"]["max"] == 1
    pauses = sorted(float(r["pause_us"]) for r in rows)
    assert entry["columns"]["pause_us"]["max"] == pauses[-1]


def test_report_needs_neither_pandas_nor_numpy(bug_run: Path) -> None:
    # GIVEN a Python where pandas, numpy and matplotlib cannot be imported (the core install, the single file)
    blocked = ("import sys; sys.modules.update(pandas=None, numpy=None, matplotlib=None); "
               "sys.argv = ['sampler', *sys.argv[1:]]; from sampler.start import entry; entry()")
    args = [str(bug_run), "--hist", "delta", "--count-by", "bug", "--json"]
    without = subprocess.run([sys.executable, "-c", blocked, "report", *args], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    # THEN the report is the same as with them installed, and --plot says in one line what it needs
    assert without.returncode == 0, without.stderr
    assert json.loads(without.stdout) == json.loads(sampler("report", *args).stdout)
    plot = subprocess.run([sys.executable, "-c", blocked, "report", str(bug_run), "--plot", "x.png"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert "--plot needs matplotlib" in one_line_error(plot) and "debug-sampler[plot]" in plot.stderr


def test_report_text_histograms_and_windows(bug_run: Path) -> None:
    result = sampler("report", str(bug_run), "--hist", "delta", "--lhist", "delta", "0", "20002", "5000",
                     "--by", "0.5s")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    # the table, one row per expression and sampler's own columns
    assert any(line.split()[:2] == ["delta", "60"] for line in text.splitlines()), text
    # the power-of-two histogram: each bucket holds the CSV's values in its range
    values = [int(r["delta"]) for r in read_csv(bug_run)]
    first, second = text.split("@delta")[1:3]
    counts = _buckets(first)
    assert sum(counts.values()) == 60
    in_top = sum(1 for v in values if 16384 <= v < 32768)
    assert counts.get("[16K, 32K)", 0) == in_top, first
    assert counts.get("[0]", 0) == values.count(0), first
    # the linear histogram: 5000 wide, the last bucket from 20000 (capacity, and capacity + 1)
    linear = _buckets(second)
    assert sum(linear.values()) == 60
    assert linear.get("[15000, 20000)", 0) == sum(1 for v in values if 15000 <= v < 20000), second
    assert linear.get("[20000, 20002)", 0) == sum(1 for v in values if v >= 20000), second
    # the windows: about three of 0.5 s for 60 rows at 50/s, rows adding up
    windows = [int(n) for n in re.findall(r"^  \d+\.\d-\d+\.\d s: (\d+) rows$", text, re.M)]
    assert 2 <= len(windows) <= 4 and sum(windows) == 60, text


def _buckets(histogram: str) -> dict[str, int]:
    """'[16K, 32K)   4 |@@@ |' lines -> {'[16K, 32K)': 4}."""
    found = (re.match(r"^(\S+(?:, \S+)?)\s+(\d+) \|", line) for line in histogram.splitlines())
    return {m[1]: int(m[2]) for m in found if m}


def test_report_plots_each_expression_and_the_pause(bug_run: Path, tmp_path: Path) -> None:
    import matplotlib.image

    picture = tmp_path / "run.png"
    result = sampler("report", str(bug_run), "--plot", str(picture))
    assert result.returncode == 0, result.stderr
    image = matplotlib.image.imread(picture)
    # three panels (delta, bug, pause_us) of 2.2 inches each at 100 dpi
    assert image.shape[1] == 1000 and image.shape[0] >= 3 * 200, image.shape
    assert image.std() > 0.05  # not a blank page


@pytest.mark.parametrize("content,expected", [
    ("", "the file is empty"),
    ("hello world\n", "not a sampler CSV"),
    ("seq,time,elapsed_s,pid,thread,delta,pause_us,wait_us,late_us\n1,t,0.1,5,6,7,8,9,10\n", "'error' is missing"),
])
def test_report_refuses_what_is_not_a_sampler_csv(tmp_path: Path, content: str, expected: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    assert expected in one_line_error(sampler("report", str(bad)))


def test_report_names_a_column_that_is_not_there(bug_run: Path) -> None:
    line = one_line_error(sampler("report", str(bug_run), "--hist", "nosuch"))
    assert "no column 'nosuch'" in line and "delta" in line


def test_stop_when_catches_the_ring_at_capacity_plus_one(start_target: Callable[..., Target],
                                                         tmp_path: Path) -> None:
    # GIVEN the Go ring buffer with its off-by-one, sampled with the short form
    target = start_target("ringbuf-go", "--bug")
    out = tmp_path / "caught.csv"
    # WHEN asking to stop once w - r is over the capacity
    result = sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--expr", "delta=w-r",
                     "--rate", "200", "--duration", "60s", "--stop-when", f"delta > {CAPACITY}", "--out", str(out))
    # THEN the run ends at the first row over it, says so, and exits 0
    assert result.returncode == 0, result.stderr
    rows = read_csv(out)
    assert int(rows[-1]["delta"]) == CAPACITY + 1
    assert all(int(r["delta"]) <= CAPACITY for r in rows[:-1] if r["delta"])
    assert f"--stop-when 'delta > {CAPACITY}' held at sample {len(rows)}" in result.stderr
    assert "stopped by --stop-when" in result.stderr
    target.assert_untouched()


def test_stop_when_that_never_holds_lets_the_run_end(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    out = tmp_path / "whole.csv"
    result = sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--at", "ring_read",
                     "--expr", "delta=b->w - b->r", "--rate", "100", "--count", "30",
                     "--stop-when", f"delta > {CAPACITY}", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert len(read_csv(out)) == 30


def test_stop_when_with_an_unknown_column_is_refused(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    line = one_line_error(sampler("attach", "--pid", str(target.pid), "--expr", "delta=ring->w",
                                  "--stop-when", "nope > 3", "--quiet"))
    assert "--stop-when 'nope > 3': no column 'nope'" in line and "delta" in line
    target.assert_untouched()


def test_json_lines_have_numbers_as_numbers(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-cpp")
    out = tmp_path / "rows.jsonl"
    result = sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--at", "rb::Ring::read",
                     "--expr", "delta=this->w - this->r", "--expr", "this->name", "--count", "5", "--rate", "20",
                     "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 5
    for seq, record in enumerate(records, 1):
        assert record["seq"] == seq and record["pid"] == target.pid
        assert isinstance(record["delta"], int) and 0 <= record["delta"] <= CAPACITY
        assert record["this->name"] == "ring-cpp"
        assert isinstance(record["pause_us"], int) and record["pause_us"] > 0
        assert isinstance(record["elapsed_s"], float) and record["error"] == ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_metrics_are_scraped_and_parsed(start_target: Callable[..., Target], tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    target = start_target("ringbuf-c")
    out, port = tmp_path / "m.csv", _free_port()
    proc = start_sampler("attach", "--pid", str(target.pid), "--backend", "ptrace", "--at", "ring_read",
                         "--expr", "delta=b->w - b->r", "--rate", "20", "--duration", "30s",
                         "--metrics", f"127.0.0.1:{port}", "--out", str(out), "--quiet")
    try:
        wait_for_rows(out, proc, 5)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            text = answer.read().decode()
        rows_then = len(read_csv(out))
    finally:
        proc.send_signal(2)
        _, stderr = finish(proc)
    families = {f.name: f for f in text_string_to_metric_families(text)}
    [value] = families["sampler_value"].samples
    assert value.labels == {"pid": str(target.pid), "expression": "delta"}
    assert 0 <= value.value <= CAPACITY
    [count] = [s for s in families["sampler_samples"].samples if s.name == "sampler_samples_total"]
    assert 5 <= count.value <= rows_then + 1
    [errors] = [s for s in families["sampler_errors"].samples if s.name == "sampler_errors_total"]
    assert errors.value == 0
    buckets = {s.labels["le"]: s.value for s in families["sampler_pause_seconds"].samples
               if s.name.endswith("_bucket")}
    assert buckets["+Inf"] == count.value and buckets["0.001"] >= 1  # pauses are microseconds
    assert proc.returncode == 0, stderr
    with pytest.raises((urllib.error.URLError, ConnectionError)):  # the server ended with the run
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)
    assert not subprocess.run(["pgrep", "-f", "sampler-metrics"], capture_output=True).stdout.strip() or \
        not [p for p in subprocess.run(["pgrep", "-x", "sampler-metrics"], capture_output=True,
                                       text=True).stdout.split() if p]
    target.assert_untouched()


def test_metrics_on_a_port_in_use_is_one_line(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        line = one_line_error(sampler("attach", "--pid", str(target.pid), "--expr", "delta=ring->w",
                                      "--metrics", f"127.0.0.1:{port}", "--quiet"))
    assert f"cannot serve on 127.0.0.1:{port}" in line
    target.assert_untouched()


def test_the_live_view_in_a_real_terminal(start_target: Callable[..., Target], tmp_path: Path) -> None:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is missing (make setup installs it)")
    target = start_target("ringbuf-c")
    out, session = tmp_path / "live.csv", f"sampler-live-{target.pid}"
    command = (f"cd {ROOT} && .venv/bin/python -m sampler attach --pid {target.pid} --backend ptrace "
               f"--at ring_read --expr 'delta=b->w - b->r' --expr 'cap=b->capacity' --rate 20 --duration 4s "
               f"--live --out {out}; sleep 30")
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "140", "-y", "30", command], check=True)
    try:
        screens = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-J", "-t", session], capture_output=True,
                                    text=True, check=True).stdout
            screens.append(screen)
            if "target left running" in screen:
                break
            time.sleep(0.5)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    final = screens[-1]
    assert "target left running" in final, final
    # the view was redrawn in place: one header on the screen, not one per refresh
    assert final.count("sampler --live") == 1, final
    rows = read_csv(out)
    [cap_line] = [line for line in final.splitlines() if line.startswith("cap ")]
    assert cap_line.split()[1:5] == ["20000"] * 4, cap_line  # last, min, p50, max
    [delta_line] = [line for line in final.splitlines() if line.startswith("delta ")]
    last, low, _, high = delta_line.split()[1:5]
    values = [int(r["delta"]) for r in rows]
    assert int(last) == values[-1] and int(low) == min(values) and int(high) == max(values)
    assert any(ch in delta_line for ch in "▁▂▃▄▅▆▇█"), delta_line
    header = next(line for line in final.splitlines() if line.startswith("sampler --live"))
    assert f"{len(rows)} samples" in header
    # and while it ran, the screen showed fewer samples: it was live
    earlier = [s for s in screens[:-1] if "sampler --live" in s]
    assert earlier and f"{len(rows)} samples" not in earlier[0]


def test_the_target_by_name(start_target: Callable[..., Target]) -> None:
    name = unique_name("rbcpp")
    target = start_target("ringbuf-cpp", as_name=name)
    result = sampler("attach", "--pgrep", f"^{name}$", "--backend", "ptrace", "--expr", "w-r", "--count", "2",
                     "--quiet")
    assert result.returncode == 0, result.stderr
    assert [line.split(",")[3] for line in result.stdout.splitlines()[1:]] == [str(target.pid)] * 2
    target.assert_untouched()


def test_a_name_that_matches_several_or_none_is_one_line(start_target: Callable[..., Target]) -> None:
    name = unique_name("rbc")
    first, second = start_target("ringbuf-c", as_name=name), start_target("ringbuf-c", as_name=name)
    line = one_line_error(sampler("attach", "--pgrep", f"^{name}$", "--expr", "w-r", "--quiet"))
    assert "matches 2 processes" in line and str(first.pid) in line and str(second.pid) in line
    line = one_line_error(sampler("attach", "--pgrep", "no-such-program-here", "--expr", "w-r", "--quiet"))
    assert "no process has a name or command line that matches" in line
    first.assert_untouched()


def test_waiting_for_a_target_that_starts_later(start_target: Callable[..., Target], tmp_path: Path) -> None:
    out = tmp_path / "late.csv"
    name = unique_name("rbrust")
    proc = start_sampler("attach", "--pgrep", f"^{name}$", "--wait-target", "30s", "--backend", "ptrace",
                         "--at", "main::Ring::write", "--expr", "v", "--count", "3", "--out", str(out), "--quiet")
    time.sleep(1.0)
    target = start_target("ringbuf-rust", as_name=name)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    rows = read_csv(out)
    assert len(rows) == 3 and {r["pid"] for r in rows} == {str(target.pid)}
    target.assert_untouched()


def test_report_by_second_of_a_count_only_trace_counts_each_window(start_target: Callable[..., Target],
                                                                    tmp_path: Path) -> None:
    # GIVEN the recipe of docs/usage.md: the calls of a function, per second (tick: once a second)
    target = start_target("ringbuf-c")
    out = tmp_path / "calls.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "tick", "--duration", "4s", "--out", str(out),
                     "--quiet")
    assert result.returncode == 0, result.stderr
    rows = read_csv(out)
    # WHEN reported by second
    report = sampler("report", str(out), "--by", "1s")
    # THEN each window says how many calls it had (it printed only empty table headers), and they add up
    assert report.returncode == 0, report.stderr
    counts = [int(n) for n in re.findall(r"^  \d+\.\d-\d+\.\d s: (\d+) rows$", report.stdout, re.M)]
    assert counts and sum(counts) == len(rows) >= 3, report.stdout
    assert all(n <= 2 for n in counts), report.stdout
