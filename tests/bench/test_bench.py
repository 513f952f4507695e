"""The overhead harness runs end to end (bench-quick). It asserts files and columns, never a speed."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pandas as pd

from tests.integration.targets import ROOT, have_delve

COLUMNS = ["target", "mode", "backend", "rate_asked", "rate_reached", "ratio_min", "ratio_median",
           "ratio_max", "windows", "pause_us_p50", "pause_us_p95", "wait_us_p50", "wait_us_p95",
           "sampler_cpu_per_s"]


def test_bench_quick_writes_its_results(built_targets: None, tmp_path: Path) -> None:
    # one pair of windows of 2 s per cell (each holds at least one whole second of the target's
    # throughput lines; a late line is waited for), one rate, each way on one target (ptrace's on
    # C, delve-rpc on Go): the harness end to end, in the suite's time (make bench-quick: two
    # windows of 2.2 s at 10 and 100/s, ptrace's ways on Go too)
    result = subprocess.run([sys.executable, "bench/overhead.py", "--quick", "--windows", "1", "--seconds", "2",
                             "--rates", "100", "--once", "--warmup", "0.5", "--results", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    frame = pd.read_csv(tmp_path / "overhead.csv")
    assert list(frame.columns) == COLUMNS
    modes = set(frame["mode"])
    assert {"ptrace", "ptrace zero-stop", "every-hit ptrace", "every-hit in-process"} <= modes
    assert set(frame[frame["mode"].isin(["ptrace", "ptrace zero-stop"])]["target"]) == {"C -O2"}  # --once
    if have_delve():
        assert "delve-rpc" in modes and set(frame[frame["mode"] == "delve-rpc"]["target"]) == {"Go"}
    for row in frame.itertuples():
        assert row.windows >= 1, (row, result.stderr[-1000:])
        assert row.rate_reached > 0
        assert 0 < row.ratio_min <= row.ratio_median <= row.ratio_max < 100
        assert row.sampler_cpu_per_s > 0
        if row.mode in ("ptrace zero-stop", "every-hit in-process"):
            assert row.pause_us_p50 == 0
        elif row.mode != "every-hit bpftrace":
            assert row.pause_us_p50 > 0 and not math.isnan(row.wait_us_p50)
    inprocess = frame[frame["mode"] == "every-hit in-process"].iloc[0]
    every_hit = frame[frame["mode"] == "every-hit ptrace"].iloc[0]
    assert inprocess.rate_reached > 10 * every_hit.rate_reached  # calls counted a second, against int3 hits
    ticked = frame[frame["rate_asked"].astype(str).isin(["100", "100.0"])]
    assert len(ticked) >= 3, frame
    # a schedule that works, not a speed: at least a tenth of the rate asked (a clean-clone CI run
    # on a loaded 2-core machine reached 49 of 100/s in one 2 s window; the figures are bench's)
    assert ((ticked["rate_reached"] / ticked["rate_asked"].astype(float)) > 0.1).all(), "rates far below asked"
    assert (tmp_path / "overhead.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = (tmp_path / "REPORT.md").read_text()
    assert "cores" in report and "kernel" in report and "| target | mode |" in report
