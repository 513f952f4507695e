"""The short form of `make bench-limit`: sampler and the C reference take turns on both targets."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.targets import have_delve, read_csv, run_bench


def test_bench_limit_measures_sampler_beside_the_reference(tmp_path: Path) -> None:
    if not have_delve():
        pytest.skip("the Go target is missing (make setup builds it)")
    run_bench("limit.py", tmp_path)
    rows = read_csv(tmp_path / "limit.csv")
    for target in ("C -O2", "Go"):
        for mode in ("10 Hz", "1 kHz", "every hit"):
            mine = [r for r in rows if (r["target"], r["mode"]) == (target, mode)]
            tools = {r["tool"] for r in mine}
            assert {"reference (C)", "sampler"} <= tools, (target, mode, tools)
            for row in mine:
                if row["tool"] != "bpftrace (count only)":
                    assert 0 < float(row["median_pause_us"]) < 100_000, row
                if mode == "every hit":
                    assert float(row["hits_per_s"]) > 10, row
    assert "| C -O2 | 10 Hz |" in (tmp_path / "LIMIT.md").read_text()
