"""The short form of `make bench-attach`: every tool takes its first sample on every binary."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration.targets import have_delve, read_csv, run_bench


def test_bench_attach_measures_every_tool_on_every_binary(tmp_path: Path) -> None:
    if not have_delve():
        pytest.skip("dlv or the Go targets are missing (make setup installs them)")
    run_bench("attach.py", tmp_path)
    rows = read_csv(tmp_path / "attach.csv")
    measured = {(r["binary"], r["tool"]) for r in rows}
    assert measured == {("ringbuf-c (C)", "sampler (ptrace)")} | {
        (binary, tool) for binary in ("ringbuf-go", "httpd-go")
        for tool in ("sampler (ptrace)", "sampler (delve)", "dlv attach")}, measured
    for row in rows:
        assert row["ok"] == "True", row
        assert 0 < float(row["first_row_s"]) < 30 and 5 < float(row["peak_rss_mb"]) < 2000, row
    assert "| httpd-go |" in (tmp_path / "ATTACH.md").read_text()
