"""The fault suite runs end to end (faults-quick) and every trial in it passes every check."""

from __future__ import annotations

import csv
from pathlib import Path

from tests.integration.targets import have_delve, run_bench


def test_faults_quick_harms_no_target(built_targets: None, tmp_path: Path) -> None:
    run_bench("faults.py", tmp_path)
    with open(tmp_path / "faults.csv", newline="") as f:
        trials = list(csv.DictReader(f))
    faults = {row["fault"] for row in trials}
    assert {"SIGKILL", "SIGKILL worker", "target exits", "target SIGSTOP", "second sampler", "gdb attaches",
            "disk full", "output removed", "SIGKILL worker, loaded"} <= faults
    if have_delve():
        assert {"delve", "delve-rpc"} <= {row["way"] for row in trials}
    # the one harm tolerated: forked children that copied the int3 in the moment of the worker's
    # SIGKILL (KILL_WINDOW_S in bench/faults.py; docs/safety.md), every other check passed
    window = [row for row in trials if row["window_children"] != "0"]
    assert all(row["fault"].startswith("SIGKILL worker") and row["target"] == "forks" and row["code_intact"] == "True"
               and row["csv_whole"] == "True" and row["exit_expected"] == "True" and row["message_clean"] == "True"
               for row in window), window
    failed = [row for row in trials if row["ok"] != "True" and row not in window]
    # and one death in the window docs/safety.md describes, which nothing outside the target can close: a
    # thread at the int3 when its tracer is SIGKILLed dies of SIGTRAP before any guardian can run (the forker
    # at its hot function once, and the C target at its rare one once, in clean-clone runs); every other
    # check of that trial passed. Two such deaths in one run, or any other failure, fail the test.
    trapped = [row for row in failed if row["fault"].startswith("SIGKILL worker") and "died of SIGTRAP" in row["note"]
               and row["csv_whole"] == "True" and row["exit_expected"] == "True" and row["message_clean"] == "True"]
    assert len(trapped) <= 1 and all(row in trapped for row in failed), failed
    for row in trials:
        assert row["csv_whole"] == "True" and int(row["rows"]) >= 1, row
        if row["target_survived"] != "" and row not in window and row not in trapped:
            assert row["target_survived"] == "True" and row["code_intact"] == "True", row
    report = (tmp_path / "FAULTS.md").read_text()
    assert "| way | target | fault |" in report
    assert window or trapped or "## Trials that did not pass every check\n\nNone." in report


def test_inprocess_faults_quick_the_target_lives_through_every_kill_and_its_code_is_its_files(
        built_targets: None, tmp_path: Path) -> None:
    # the worker, the guardian, both SIGKILLed mid-trace of ringbuf-c's ring_read with an in-process probe
    # (and the worker under an int3, for contrast: not asserted, the window docs/safety.md describes)
    run_bench("inprocess_faults.py", tmp_path)
    with open(tmp_path / "inprocess-faults.csv", newline="") as f:
        trials = [row for row in csv.DictReader(f) if row["probe"] == "inprocess"]
    assert {row["killed"] for row in trials} == {"worker", "guardian", "both"}
    for row in trials:
        assert row["survived"] == "True" and row["code_intact"] == "True", row
        assert row["exit"] == ("0" if row["killed"] == "guardian" else "137"), row
        if row["killed"] == "both":
            assert "5 byte(s) restored" in row["repair"], row
    assert "| target | probe | killed |" in (tmp_path / "INPROCESS-FAULTS.md").read_text()
