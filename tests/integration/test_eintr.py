"""A thread blocked in a system call is left alone (issue 33): stopped with PTRACE_INTERRUPT,
epoll_wait and sigtimedwait return EINTR when it resumes (signal(7)); nginx logged 27
"epoll_wait() failed (4: Interrupted system call)" lines during one trace.

targets/eintr has three threads blocked for good in epoll_wait, poll and sigtimedwait,
counting the EINTRs they get, and a main thread that calls work() every millisecond (its
first instruction is one sampler single-steps, holding the other threads)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import Target, assert_code_matches_files, read_counter, sampler

RUNS = {
    "trace": ["trace", "--at", "work", "--duration", "2s"],
    "attach": ["attach", "--at", "work", "--expr", "*counter", "--rate", "50", "--duration", "2s"],
    "zero-stop": ["attach", "--expr", "calls", "--rate", "50", "--duration", "1s"],
}


@pytest.mark.parametrize("run", list(RUNS))
def test_threads_blocked_in_system_calls_get_no_eintr(start_target: Callable[..., Target], tmp_path: Path,
                                                      run: str) -> None:
    # GIVEN a program with threads blocked in epoll_wait, poll and sigtimedwait
    target = start_target("eintr")
    calls_before = read_counter(target, "calls")
    # WHEN sampler attaches, samples or traces its busy thread, and detaches
    result = sampler(*RUNS[run], "--pid", str(target.pid), "--out", str(tmp_path / "e.csv"), "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN none of the blocked calls was interrupted, and the program went on
    assert read_counter(target, "eintrs") == 0
    assert read_counter(target, "calls") > calls_before
    target.assert_untouched()
    assert_code_matches_files(target.pid)


def test_a_trace_of_two_such_processes_interrupts_none(start_target: Callable[..., Target], tmp_path: Path) -> None:
    targets = [start_target("eintr") for _ in range(2)]
    result = sampler("trace", "--pid", str(targets[0].pid), "--pid", str(targets[1].pid), "--at", "work",
                     "--duration", "2s", "--out", str(tmp_path / "e.csv"), "--quiet")
    assert result.returncode == 0, result.stderr
    for target in targets:
        assert read_counter(target, "eintrs") == 0
        target.assert_untouched()
