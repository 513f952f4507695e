"""Go values in the ptrace backend, with the same results as Delve: strings as their text,
len() and cap() of strings, slices, maps and channels, and the goroutine id as the thread."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
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
        result = attach(go_target.pid, backend, "--at", READ, *EXPRESSIONS, "--count", "5", "--rate", "10",
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


def test_a_stripped_go_binary_is_read_through_its_function_table(start_target, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # GIVEN the Go ring built as usual and built with -ldflags='-s -w' (no .symtab, no DWARF)
    full = start_target("ringbuf-go")
    stripped = start_target("ringbuf-go-stripped")
    cast = ["--expr", "r=*(uint64_t *)arg0", "--expr", "w=*(uint64_t *)(arg0 + 8)",
            "--expr", "n=*(int64_t *)(arg0 + 24)"]  # b.r, b.w and len(b.buf) by Go's register ABI
    # WHEN the unstripped build is sampled by name and by machine-level reads at the same line
    out = tmp_path / "full.csv"
    result = attach(full.pid, "ptrace", "--at", "main.go:53", "--expr", "br=b.r", "--expr", "bn=len(b.buf)",
                    *cast, "--count", "3", "--rate", "10", "--out", str(out))
    assert result.returncode == 0, result.stderr
    # THEN both read the same fields: b.r and len(b.buf) hold still while the one reader is stopped there
    # (the writer goroutine goes on running, so b.w may move between two reads of one row)
    for row in assert_csv_whole(out):
        assert row["error"] == "" and (row["r"], row["n"]) == (row["br"], row["bn"]) == (row["r"], "20000"), row
        assert 0 <= int(row["w"]) - int(row["r"]) <= 20000, row
    # WHEN the stripped build is sampled by its function's name and by FILE:LINE, backend chosen for it
    for at in ("main.(*Ring).Read", "main.go:53"):
        out = tmp_path / "stripped.csv"
        result = sampler("attach", "--pid", str(stripped.pid), "--at", at, *cast, "--count", "3", "--rate", "10",
                         "--out", str(out))
        assert result.returncode == 0, (at, result.stderr)
        assert "ptrace backend (Go program without DWARF" in result.stderr, result.stderr
        # THEN the same fields read as plausibly as in the unstripped build
        for row in assert_csv_whole(out):
            assert row["error"] == "" and row["n"] == "20000", (at, row)
            assert 0 <= int(row["w"]) - int(row["r"]) <= 20000, (at, row)
    stripped.assert_untouched()
    assert_text_matches_file(stripped)


@pytest.mark.parametrize("args, expected", [
    (["--expr", "b.w"], "no variable 'b'"),
    (["--expr", "arg9"], "arg0-arg8 are known"),
    (["--backend", "delve", "--expr", "arg0"], "use --backend ptrace"),
])
def test_stripped_go_bad_input_is_one_line(start_target, args: list[str], expected: str) -> None:  # type: ignore[no-untyped-def]
    stripped = start_target("ringbuf-go-stripped")
    line = one_line_error(sampler("attach", "--pid", str(stripped.pid), "--quiet", "--at", READ, *args,
                                  "--count", "1"))
    assert expected in line, line
    stripped.assert_untouched()


def test_every_backend_gives_a_pointer_as_its_address_in_hex(go_target: Target, tmp_path: Path) -> None:
    # GIVEN the Go ring, whose main.ring is a pointer that never changes, and Read's receiver b (the same)
    seen = {}
    for backend in ("ptrace", "delve", "delve-rpc"):
        for at in (("--at", READ, "--expr", "b=b"), ()):
            out = tmp_path / f"{backend}{len(at)}.csv"
            # WHEN each backend reads them, at a breakpoint and (globals only) without one
            result = attach(go_target.pid, backend, *at, "--expr", "g=main.ring", "--count", "2", "--rate", "10",
                            "--out", str(out))
            assert result.returncode == 0, (backend, result.stderr)
            rows = assert_csv_whole(out)
            seen[backend, bool(at)] = {row[name] for row in rows for name in ("g", "b") if name in row}
    # THEN every backend gives one and the same address, in hex (Delve's terminal prints the struct a
    # pointer points to: sampler asks it for &*(EXPR))
    [address] = seen["ptrace", True]
    assert address.startswith("0xc") and all(values == {address} for values in seen.values()), seen
    # AND report gives no percentiles of it
    report = sampler("report", str(tmp_path / "ptrace4.csv"), "--json")
    import json

    columns = json.loads(report.stdout)["pids"]
    stats = next(iter(columns.values()))["columns"]["b"]
    assert stats["numeric"] is False and "p50" not in stats and stats["last"] == address, stats
    go_target.assert_untouched()


def test_a_go_map_is_read_by_key_in_every_backend(start_target: Callable[..., Target], tmp_path: Path) -> None:
    from tests.integration.targets import have_delve

    if not have_delve():
        pytest.skip("dlv or the Go targets are missing (make setup installs them)")
    # GIVEN the Go server counting the requests per path in main.stats.paths (a map[string]int),
    # and the ring's b.tags {"a": 1, "b": 2, "c": 3}
    httpd = start_target("httpd-go")
    ring = start_target("ringbuf-go")
    counts = {}
    for backend in ("ptrace", "delve", "delve-rpc"):
        # WHEN each backend reads them by key
        out = tmp_path / f"{backend}.csv"
        result = attach(httpd.pid, backend, "--at", "main.serve", "--expr", 'items=main.stats.paths["/items"]',
                        "--expr", 'root=main.stats.paths["/"]', "--expr", "p=r.URL.Path", "--count", "2",
                        "--rate", "20", "--out", str(out))
        assert result.returncode == 0, (backend, result.stderr)
        counts[backend] = assert_csv_whole(out)
        tags = tmp_path / f"tags-{backend}.csv"
        result = attach(ring.pid, backend, "--at", READ, "--expr", 'a=b.tags["a"]', "--expr", 'c=b.tags["c"]',
                        "--expr", 'z=b.tags["z"]', "--count", "1", "--out", str(tags))
        assert result.returncode == 0, (backend, result.stderr)
        # THEN the ring's tags are 1 and 3, and a missing key is that row's error
        for row in assert_csv_whole(tags):
            assert (row["a"], row["c"], row["z"]) == ("1", "3", ""), (backend, row)
            assert "z: " in row["error"] and "not found" in row["error"], (backend, row)
    # AND the server's counts are counts of requests so far: positive, growing from backend to backend
    for rows in counts.values():
        assert all(row["error"] == "" and int(row["items"]) >= 1 and int(row["root"]) >= 1 for row in rows), rows
    firsts = [int(counts[b][0]["items"]) for b in ("ptrace", "delve", "delve-rpc")]
    assert firsts == sorted(firsts), firsts
    httpd.assert_untouched()
    ring.assert_untouched()
