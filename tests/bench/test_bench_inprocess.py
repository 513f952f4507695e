"""The short form of bench/inprocess.py (in `make bench-limit`): each tracer on and off one running
targets/burst, the cost a call clocked by the program; files and a ratio in one run, never a speed."""

from __future__ import annotations

from pathlib import Path

from tests.integration.targets import read_csv, run_bench


def test_bench_inprocess_measures_every_tracer_on_one_program(built_targets: None, tmp_path: Path) -> None:
    run_bench("inprocess.py", tmp_path)
    rows = {row["tracer"]: row for row in read_csv(tmp_path / "inprocess.csv")}
    assert {"sampler in-process", "sampler in-process, short bursts", "sampler int3",
            "reference tracer (C, int3)"} <= set(rows), rows
    for row in rows.values():
        assert row["intact"] == "True", row  # the code the file's after each tracer
    inprocess, int3 = rows["sampler in-process"], rows["sampler int3"]
    assert float(inprocess["untraced_ns"]) > 0 and inprocess["bursts"] not in ("", "0/0"), inprocess
    # side by side in one run: an in-process hit costs a small part of an int3's
    assert float(inprocess["cost_ns"]) * 100 < float(int3["cost_ns"]), (inprocess, int3)
    assert inprocess["recorded"].endswith("%"), inprocess
    assert "| C | 1 | sampler in-process |" in (tmp_path / "INPROCESS.md").read_text()
    # two hits a call (--latency): in the target, a small part of two int3s'
    timed, stopped = rows["sampler in-process, latency"], rows["sampler int3, latency"]
    assert timed["bursts"] not in ("", "0/0") and stopped["bursts"] not in ("", "0/0"), (timed, stopped)
    assert float(timed["cost_ns"]) * 100 < float(stopped["cost_ns"]), (timed, stopped)
