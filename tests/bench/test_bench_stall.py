"""The short form of bench/stall.py (in `make bench-limit`): the stall each tracer causes,
clocked inside the target and matched to every sample."""

from __future__ import annotations

from pathlib import Path

from tests.integration.targets import read_csv, run_bench


def test_bench_stall_matches_every_sample_to_the_stall_it_caused(tmp_path: Path) -> None:
    run_bench("stall.py", tmp_path)
    rows = read_csv(tmp_path / "stall.csv")
    assert {(r["program"], r["tracer"], r["rate"]) for r in rows} == {
        (program, tracer, rate) for program in ("C", "Go") for tracer in ("reference", "python", "sampler")
        for rate in ("10", "1000")}
    for row in rows:
        # every sample found its stall in the target's own list, by the call's index
        assert int(row["samples"]) >= 10 and row["matched"] == row["samples"], row
        stalls = [float(s) for s in row["stalls_us"].split()]
        assert all(5 < s < 1_000_000 for s in stalls), row
        if row["tracer"] == "sampler":  # the program lost at least what sampler held it for
            assert float(row["median_stall_us"]) >= float(row["median_pause_us"]), row
    assert "| C | idle | 10 Hz |" in (tmp_path / "STALL.md").read_text()
