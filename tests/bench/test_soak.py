"""The soak's short form runs end to end and counts no harm at all."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.integration.targets import run_bench


def test_soak_quick_harms_nothing(built_targets: None, tmp_path: Path) -> None:
    run_bench("soak.py", tmp_path)
    with open(tmp_path / "soak.csv", newline="") as f:
        runs = list(csv.DictReader(f))
    assert len(runs) == 10 == len({(r["way"], r["target"]) for r in runs})  # every way on its targets, once
    assert {"delve", "delve-rpc", "ptrace", "ptrace zero-stop", "trace ptrace"} <= {r["way"] for r in runs}
    for run in runs:
        assert run["exit_code"] != "70", run
        for harm in ("internal_error", "exit_unexpected", "target_died", "left_traced", "left_stopped",
                     "stopped_working", "code_changed", "csv_broken"):
            assert run[harm] == "False", (harm, run)
    report = (tmp_path / "SOAK.md").read_text()
    assert "## Memory over 50,000 zero-stop samples" in report
