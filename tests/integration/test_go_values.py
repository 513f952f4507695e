"""Go values in the ptrace backend, with the same results as Delve: strings as their text,
len() and cap() of strings, slices, maps and channels, and the goroutine id as the thread."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.integration.targets import Target, assert_csv_whole, assert_text_matches_file, one_line_error, sampler

READ = "main.(*Ring).Read"
EXPRESSIONS = ["--expr", "name=b.name", "--expr", "nb=len(b.buf)", "--expr", "cb=cap(b.buf)",
               "--expr", "ln=len(b.name)", "--expr", "nt=len(b.tags)", "--expr", "ne=len(b.events)",
               "--expr", "ce=cap(b.events)"]


def attach(pid: int, backend: str, *args: str) -> subprocess.CompletedProcess[str]:
    return sampler("attach", "--backend", backend, "--pid", str(pid), "--quiet", *args)


def test_ptrace_and_delve_give_the_same_go_values(go_target: Target, tmp_path: Path) -> None:
    # GIVEN the Go ring: b.name "ring-go", 20000 slots, a map of 3 tags, a channel holding 3 of 8
    columns = {}
    for backend in ("ptrace", "delve", "delve-rpc"):
        out = tmp_path / f"{backend}.csv"
        # WHEN each backend samples the same expressions at the same function
        result = attach(go_target.pid, backend, "--at", READ, *EXPRESSIONS, "--count", "2", "--rate", "10",
                        "--out", str(out))
        assert result.returncode == 0, (backend, result.stderr)
        rows = assert_csv_whole(out)
        assert all(r["error"] == "" for r in rows), rows
        columns[backend] = [{k: r[k] for k in ("thread", "name", "nb", "cb", "ln", "nt", "ne", "ce")} for r in rows]
    # THEN the values are right, and the same in every backend, the goroutine id included
    expected = {"name": "ring-go", "nb": "20000", "cb": "20000", "ln": "7", "nt": "3", "ne": "3", "ce": "8"}
    for backend, rows in columns.items():
        for row in rows:
            assert {k: row[k] for k in expected} == expected, (backend, row)
    threads = {backend: {row["thread"] for row in rows} for backend, rows in columns.items()}
    assert threads["ptrace"] == threads["delve"] == threads["delve-rpc"], threads  # only the reader calls Read
    assert all(t.isdigit() and int(t) < 1000 for t in threads["ptrace"]), "a goroutine id, not an OS thread id"
    go_target.assert_untouched()
    assert_text_matches_file(go_target)


@pytest.mark.parametrize("expression, expected", [
    ("len(b.r)", "len() of uint64: it takes a string, slice, array, map or channel"),
    ("cap(b.tags)", "cap() of a map"),
    ("len(b.buf, 1)", "len() takes one argument"),
])
def test_len_of_what_has_none_is_one_line(go_target: Target, expression: str, expected: str) -> None:
    line = one_line_error(attach(go_target.pid, "ptrace", "--at", READ, "--expr", expression, "--count", "1"))
    assert expected in line, line
    go_target.assert_untouched()
