"""The short form of bench/profiling.py (make bench-profile): what a profile costs the threads it
samples, clocked inside them, beside perf record and nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.integration.targets import read_csv, run_bench


def test_bench_profile_clocks_the_target_with_and_without_each_tool(tmp_path: Path) -> None:
    run_bench("profiling.py", tmp_path)
    rows = {row["tool"]: row for row in read_csv(tmp_path / "profile.csv")}
    assert shutil.which("perf"), "perf is missing (make test-bench installs it: make bench-deps)"
    assert set(rows) == {"none", "sampler", "perf"}, rows
    assert all(int(row["units_per_s"]) > 1000 for row in rows.values()), rows  # the target worked throughout
    sampler = rows["sampler"]
    assert 30 <= float(sampler["samples_per_s_per_thread"]) <= 110, sampler  # about the 99 Hz asked
    assert 0 < float(sampler["held_us"]) < 100_000, sampler
    assert "| 1 | 99 Hz | sampler |" in (tmp_path / "PROFILE.md").read_text()
