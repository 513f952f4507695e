"""Strings as people ask about them (issue 23): literals in comparisons, str(p, n) and
buf(p, n) as bpftrace has them, --stop-when on a string, counts by value in report; on the
Go HTTP server and on Debian's redis-server."""

from __future__ import annotations

import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    finish,
    have_delve,
    one_line_error,
    redis_cli,
    sampler,
    start_redis,
    start_sampler,
    wait_until_patched,
)

PATHS = ["/", "/items", "/items/42", "/health", "/ping", "/a,b", '/say "hi"']


@pytest.fixture
def httpd(start_target: Callable[..., Target]) -> Target:
    if not have_delve():
        pytest.skip("the Go targets are missing (make setup builds them)")
    return start_target("httpd-go")


def test_go_strings_compare_and_cut(httpd: Target, tmp_path: Path) -> None:
    # GIVEN the Go server serving its client's seven paths in turn
    out = tmp_path / "paths.csv"
    # WHEN each request's path is read whole, compared, tested for a prefix, cut to 2 bytes,
    # read again through its data pointer and length (what a stripped program gives), and as hex
    result = sampler("trace", "--backend", "ptrace", "--pid", str(httpd.pid), "--at", "main.serve",
                     "--expr", "p=r.URL.Path", "--expr", 'items=r.URL.Path == "/items"',
                     "--expr", 'not_root=r.URL.Path != "/"', "--expr", 'pre=startswith(r.URL.Path, "/items")',
                     "--expr", "two=str(r.URL.Path, 2)", "--expr", "raw=str(r.URL.Path.str, len(r.URL.Path))",
                     "--expr", "hex=buf(r.URL.Path.str, 2)", "--max-events", "21", "--out", str(out), "--quiet",
                     timeout=120)
    # THEN every row agrees with the path it read, in every form
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert len(rows) == 21
    for row in rows:
        path = row["p"]
        assert path in PATHS and row["error"] == "", row
        assert row["items"] == ("true" if path == "/items" else "false"), row
        assert row["not_root"] == ("false" if path == "/" else "true"), row
        assert row["pre"] == ("true" if path.startswith("/items") else "false"), row
        assert row["two"] == path[:2] and row["raw"] == path, row
        assert len(row["hex"]) == 4 and row["hex"].startswith(path[:2].encode().hex()), row  # 2 bytes, even past "/"
    assert {row["p"] for row in rows} == set(PATHS)  # 21 calls in a row: each path three times
    httpd.assert_untouched()


def test_stop_when_a_string_is_seen_and_report_counts_by_value(httpd: Target, tmp_path: Path) -> None:
    # GIVEN a trace of 70 requests in a row (each path ten times)
    out = tmp_path / "paths.csv"
    result = sampler("trace", "--backend", "ptrace", "--pid", str(httpd.pid), "--at", "main.serve",
                     "--expr", "p=r.URL.Path", "--max-events", "70", "--out", str(out), "--quiet", timeout=120)
    assert result.returncode == 0, result.stderr
    # WHEN report counts the rows by path
    counted = sampler("report", str(out), "--count-by", "p", "--top", "3")
    # THEN the three shown have ten each, as the server's client sends them
    assert counted.returncode == 0, counted.stderr
    block = counted.stdout.split("@p (PID ")[1].splitlines()[1:4]
    assert len(block) == 3 and all(line.split()[-3] == "10" and line.endswith("14.3 %") for line in block), block
    # AND a run ends at the first row whose path is "/health"
    out = tmp_path / "until.csv"
    result = sampler("trace", "--backend", "ptrace", "--pid", str(httpd.pid), "--at", "main.serve",
                     "--expr", "p=r.URL.Path", "--stop-when", 'p == "/health"', "--out", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert rows[-1]["p"] == "/health" and all(row["p"] != "/health" for row in rows[:-1]), rows
    assert 1 <= len(rows) <= 7 and "--stop-when 'p == \"/health\"' held" in result.stderr, result.stderr
    httpd.assert_untouched()


@pytest.mark.parametrize("backend", ["delve", "delve-rpc"])
def test_delve_refuses_samplers_own_string_functions_in_one_line(httpd: Target, backend: str) -> None:
    line = one_line_error(sampler("attach", "--backend", backend, "--pid", str(httpd.pid), "--at", "main.serve",
                                  "--expr", "s=str(r.URL.Path, 3)"))
    assert "str(): sampler's own, read by the ptrace backend" in line, line
    httpd.assert_untouched()


@pytest.fixture
def redis(start_target: Callable[..., Target]) -> tuple[Target, int]:
    return start_redis(start_target, "--loglevel", "warning")


def test_the_replies_a_debian_redis_writes_read_with_str_and_buf(redis: tuple[Target, int], tmp_path: Path) -> None:
    # GIVEN Debian's redis-server (stripped: no DWARF, no types), and every write(2) it makes traced
    # with its buffer read as a string of the length it was given, and its first bytes as hex
    target, port = redis
    out = tmp_path / "writes.csv"
    proc = start_sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "libc:write",
                         "--expr", "reply=str(arg1, arg2)", "--expr", 'pong=str(arg1, arg2) == "+PONG\\r\\n"',
                         "--expr", "head=buf(arg1, 3)", "--out", str(out), "--quiet")
    wait_until_patched(target.pid)
    # WHEN one client sends five PINGs and three ECHOs, one after another
    answers = redis_cli(port, stdin="PING\nPING\nECHO hello\nPING\nECHO hello\nPING\nECHO hello\nPING\n")
    assert answers.split() == ["PONG", "PONG", "hello", "PONG", "hello", "PONG", "hello", "PONG"], answers
    deadline = time.monotonic() + 10
    while len(out.read_text().splitlines()) < 9 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    # THEN the rows hold each reply as redis wrote it: five +PONG, three bulk strings "hello"
    rows = [row for row in assert_csv_whole(out) if row["error"] == ""]
    replies = [row["reply"] for row in rows]
    assert replies.count("+PONG\\r\\n") == 5 and replies.count("$5\\r\\nhello\\r\\n") == 3, replies
    assert all((row["pong"] == "true") == (row["reply"] == "+PONG\\r\\n") for row in rows), rows
    assert all(row["head"] == "2b504f" for row in rows if row["pong"] == "true"), rows  # "+PO"
    assert_code_matches_files(target.pid)


# -- counts kept in sampler: --count-by and --hist on trace -------------------------------


def test_counts_and_a_histogram_kept_in_sampler_and_exported(httpd: Target, tmp_path: Path) -> None:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    # GIVEN the Go server's client cycling through seven paths
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # WHEN 70 requests in a row are counted by path and their lengths kept as a histogram, in sampler
    # (no row per request), with the counts exported
    proc = start_sampler("trace", "--backend", "ptrace", "--pid", str(httpd.pid), "--at", "main.serve",
                         "--expr", "p=r.URL.Path", "--expr", "n=len(r.URL.Path)", "--count-by", "p", "--hist", "n",
                         "--max-events", "70", "--metrics", f"127.0.0.1:{port}")
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    # THEN the counts come at the end: ten for each path, and lengths 1 to 9 in their buckets
    counts = stdout.split("@p (PID ")[1].split("\n\n")[0].splitlines()[1:]
    assert len(counts) == 7 and all(line.split()[-3] == "10" for line in counts), stdout
    assert {line.rsplit(None, 3)[0] for line in counts} == set(PATHS), counts
    assert "@n (PID" in stdout and "[8, 16)" in stdout and "seq," not in stdout, stdout
    assert "70 samples (0 with errors) to the counts on stdout" in stderr, stderr
    # AND a second run serves them to a scrape while it runs
    proc = start_sampler("trace", "--backend", "ptrace", "--pid", str(httpd.pid), "--at", "main.serve",
                         "--expr", "p=r.URL.Path", "--count-by", "p", "--metrics", f"127.0.0.1:{port}",
                         "--duration", "60s", "--quiet")
    try:
        deadline, families = time.monotonic() + 30, {}
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
                    families = {f.name: f for f in text_string_to_metric_families(answer.read().decode())}
            except OSError:
                continue
            if len(families.get("sampler_value_count", types_none()).samples) >= 7:  # a total for each path
                break
    finally:
        proc.send_signal(signal.SIGINT)
        finish(proc)
    totals = {s.labels["value"]: s.value for s in families["sampler_value_count"].samples
              if s.name == "sampler_value_count_total"}
    assert set(totals) == set(PATHS) and all(v >= 1 for v in totals.values()), totals
    httpd.assert_untouched()


def types_none():  # type: ignore[no-untyped-def]
    """An empty metric family, for a scrape that has none yet."""
    from types import SimpleNamespace

    return SimpleNamespace(samples=[])
