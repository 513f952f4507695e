"""`sampler stack`: every thread of a real process, beside gdb's list of the same threads; nothing
is stopped or traced."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable

import pytest

from tests.integration.targets import Target, one_line_error, sampler, unused_pid


def test_every_thread_with_its_system_call_beside_gdb(start_target: Callable[..., Target]) -> None:
    # GIVEN the C ring buffer: its main thread sleeps once a second, a reader and a writer spin
    target = start_target("ringbuf-c")
    # WHEN its stacks are asked for, as JSON and as text
    result = sampler("stack", "--pid", str(target.pid), "--format", "json")
    assert result.returncode == 0, result.stderr
    [process] = [json.loads(line) for line in result.stdout.splitlines()]
    # THEN one object, every thread of the process, named as the kernel names them
    assert process["pid"] == target.pid and process["name"] == "ringbuf-c"
    threads = {t["tid"]: t for t in process["threads"]}
    assert set(threads) == {int(tid) for tid in os.listdir(f"/proc/{target.pid}/task")}
    assert len(threads) == 3 and all(t["name"] == "ringbuf-c" for t in threads.values())
    main = threads[target.pid]  # between its lines it sleeps in clock_nanosleep (glibc's sleep)
    assert main["state"] == "S" and main["syscall"]["name"] == "clock_nanosleep", main
    assert all(t["state"] in "RS" and t["frames"] is None for t in threads.values())
    text = sampler("stack", "--pid", str(target.pid)).stdout
    assert text.startswith(f"Process {target.pid} (ringbuf-c): 3 thread(s)")
    assert f'Thread {target.pid} "ringbuf-c" state S: clock_nanosleep(' in text
    # AND gdb lists the same threads (LWP ids); make setup installs gdb, so under CI it must be there
    assert shutil.which("gdb") is not None or not os.environ.get("CI"), "gdb is missing (make setup installs it)"
    if shutil.which("gdb") is not None:
        gdb = subprocess.run(["gdb", "-q", "-batch", "-p", str(target.pid), "-ex", "info threads"],
                             capture_output=True, text=True, timeout=60)
        assert {int(lwp) for lwp in re.findall(r"\(LWP (\d+)\)", gdb.stdout)} == set(threads), gdb.stdout
    target.assert_untouched()


def test_a_process_that_is_not_there_is_one_line() -> None:
    line = one_line_error(sampler("stack", "--pid", str(unused_pid())))
    assert "no process with PID" in line


@pytest.mark.parametrize("args, expected", [([], "give the target"),
                                            (["--pid", "1", "--all"], "--all goes with --pgrep")])
def test_the_target_is_asked_for_as_the_other_commands_ask(args: list[str], expected: str) -> None:
    assert expected in one_line_error(sampler("stack", *args))
