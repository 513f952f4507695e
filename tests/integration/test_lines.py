"""Lines that say what happened (issue 33): when sampling began, that a quiet trace is alive,
why no call was seen, how the target was left, and what PID 2 is."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

from tests.integration.targets import Target, one_line_error, sampler


def test_the_sampling_line_comes_when_the_breakpoints_are_in(start_target: Callable[..., Target],
                                                             tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    result = sampler("trace", "--pid", str(target.pid), "--at", "ring_read", "--max-events", "5",
                     "--out", str(tmp_path / "t.csv"))
    assert result.returncode == 0, result.stderr
    lines = result.stderr.splitlines()
    first = next(i for i, line in enumerate(lines) if "attaching to PID" in line)
    ready = next(i for i, line in enumerate(lines) if "breakpoints in" in line)
    assert first < ready, lines
    assert "sampling" not in lines[first]  # (it said "sampling PID N" before anything was in)
    said = re.match(rf"sampler: breakpoints in (\d+\.\d\d) s after start: sampling PID {target.pid} on every hit$",
                    lines[ready])
    assert said and 0 < float(said.group(1)) < 60, lines[ready]


def test_no_call_seen_names_the_children_let_go(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a program whose children alone call child_only(), forked every 10 ms
    target = start_target("forker", "fork", "10", "60")
    result = sampler("trace", "--pid", str(target.pid), "--at", "child_only", "--duration", "2s", "--quiet",
                     "--out", str(tmp_path / "t.csv"))
    os.kill(target.pid, signal.SIGUSR1)
    assert result.returncode == 0, result.stderr
    said = re.search(r"no call of child_only was seen: the breakpoint was in, never hit in the target itself; "
                     r"(\d+) child process\(es\) it forked were let go untraced: --follow-forks traces them",
                     result.stderr)
    assert said and int(said.group(1)) > 10, result.stderr
    assert "jemalloc" not in result.stderr


def test_a_stopped_target_is_said_to_be_left_stopped(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    os.kill(target.pid, signal.SIGSTOP)
    try:
        result = sampler("trace", "--pid", str(target.pid), "--at", "ring_read", "--duration", "1s",
                         "--out", str(tmp_path / "t.csv"))
        assert result.returncode == 0, result.stderr
        assert "target left stopped (as it was: sampler does not resume a stop it did not make)" in result.stderr
        assert "left running" not in result.stderr
        assert "the target was stopped by a signal" in result.stderr
        assert target.status()["State"].startswith("T")
    finally:
        os.kill(target.pid, signal.SIGCONT)
    target.assert_untouched()


def test_a_kernel_thread_is_named_as_one() -> None:
    error = one_line_error(sampler("attach", "--pid", "2", "--expr", "x"))
    assert re.fullmatch(r"sampler: PID 2 \(\S+\) is a kernel thread: it runs no program to sample: "
                        r"give the PID of a user-space process", error), error


def test_an_expr_of_one_probe_is_not_an_error_of_the_other(start_target: Callable[..., Target],
                                                           tmp_path: Path) -> None:
    # GIVEN two probes, an --expr for one of them (tick's second), counted; both called once a
    # second (never() with RINGBUF_NEVER=call: with ring_read, 14,000 hits in 2.5 s, the tracer was
    # saturated on a loaded host and tick's rows came too late for the run)
    import os

    target = start_target("ringbuf-c", env={**os.environ, "RINGBUF_NEVER": "call"})
    out = tmp_path / "p.csv"
    result = sampler("trace", "--pid", str(target.pid), "--at", "tick", "--expr", "second", "--at", "never",
                     "--duration", "3.5s", "--count-by", "second", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN never's rows are left out of second's counts, and said to be (they were "(error) 100 %")
    assert "(error)" not in result.stdout, result.stdout
    said = re.search(r"\((\d+) samples of probes without second: not counted\)", result.stdout)
    assert said and int(said.group(1)) >= 2, result.stdout
    counted = re.findall(r"^(\d+)\s+1\s+", result.stdout, re.M)
    assert len(counted) >= 2, result.stdout
    # AND the report of the file counts second for tick only
    report = sampler("report", str(out), "--count-by", "second")
    assert report.returncode == 0, report.stderr
    assert re.search(r"@second \(PID \d+ at tick\)", report.stdout), report.stdout
    assert not re.search(r"@second \(PID \d+ at never\)", report.stdout), report.stdout
