"""When sampler itself is killed: the guardian, the journal and `sampler repair`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sampler import journal
from tests.integration.targets import ROOT, Target, assert_text_matches_file, one_line_error


@pytest.fixture(autouse=True)
def own_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "journal"
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(folder))
    yield folder


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sampler", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=60)


def kill_while_armed(target: Target, tmp_path: Path, *extra: str) -> None:
    """Start sampler with a breakpoint that is never hit (armed all the time), SIGKILL it."""
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "attach", "--backend", "ptrace",
                             "--pid", str(target.pid), "--at", "never", "--expr", "b->w",
                             "--hit-timeout", "10s", "--out", str(tmp_path / "k.csv"), "--quiet", *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    folder = journal.journal_dir()
    while not (folder.exists() and any(folder.glob(f"{target.pid}-*.json"))):
        assert proc.poll() is None and time.monotonic() < deadline, "sampler never armed its breakpoint"
        time.sleep(0.02)
    time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    target.wait_for(lambda: target.status()["TracerPid"].strip() == "0", 10, "the dead tracer did not let go")


def code_differs(target: Target) -> bool:
    try:
        assert_text_matches_file(target)
    except AssertionError:
        return True
    return False


def test_the_guardian_restores_the_byte_when_sampler_is_killed(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    target = start_target("ringbuf-c")
    kill_while_armed(target, tmp_path)
    target.wait_for(lambda: not code_differs(target), 5, "the guardian did not restore the code")
    target.wait_for(lambda: not list(own_journal.glob("*.json")), 5, "the journal entry stayed")
    target.assert_untouched()


def test_without_guardian_repair_puts_the_byte_back(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN a target left with sampler's int3 in it (no guardian)
    target = start_target("ringbuf-c")
    kill_while_armed(target, tmp_path, "--no-guardian")
    assert code_differs(target)
    entry = next(own_journal.glob(f"{target.pid}-*.json"))
    patches = json.loads(entry.read_text())["patches"]
    assert len(patches) == 1 and list(patches.values())[0] != 0xCC
    # WHEN repairing it
    result = run("repair", "--pid", str(target.pid))
    # THEN the code is the file's again and the entry is gone
    assert result.returncode == 0, result.stderr
    assert f"PID {target.pid}: 1 byte(s) restored" in result.stderr
    assert_text_matches_file(target)
    assert not entry.exists()
    target.assert_untouched()
    assert "nothing to repair" in run("repair", "--all").stderr


def test_a_new_attach_repairs_what_an_earlier_run_left(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    kill_while_armed(target, tmp_path, "--no-guardian")
    result = run("attach", "--backend", "ptrace", "--pid", str(target.pid), "--at", "ring_read",
                 "--expr", "b->w", "--count", "2", "--out", str(tmp_path / "a.csv"))
    assert result.returncode == 0, result.stderr
    assert f"an earlier run left PID {target.pid} patched: 1 byte(s) restored" in result.stderr
    assert_text_matches_file(target)
    target.assert_untouched()


def test_a_reused_pid_is_never_touched(own_journal: Path) -> None:
    # GIVEN an entry for a live PID but another process's start time
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        own_journal.mkdir(parents=True)
        started = journal.start_time(sleeper.pid)
        assert started is not None
        entry = own_journal / f"{sleeper.pid}-{started - 1}.json"
        entry.write_text(json.dumps({"pid": sleeper.pid, "start_time": started - 1,
                                     "patches": {"0x1": 0x90}}))
        # WHEN repairing everything
        fixed = journal.repair()
        # THEN the entry is dropped and nothing was written
        assert [(f.pid, f.restored) for f in fixed] == [(sleeper.pid, 0)]
        assert "PID reused" in fixed[0].note
        assert not entry.exists()
        assert sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait()


def test_repair_needs_a_pid_or_all() -> None:
    line = one_line_error(run("repair"))
    assert "give --pid PID or --all" in line


def test_repair_refuses_a_process_a_sampler_holds(start_target: Callable[..., Target]) -> None:
    from tests.integration.targets import Seizer

    target = start_target("ringbuf-c")
    seizer = Seizer(target.pid)
    try:
        line = one_line_error(run("repair", "--pid", str(target.pid)))
        assert f"traced by PID {seizer.proc.pid}" in line
    finally:
        seizer.release()
    assert os.path.exists(f"/proc/{target.pid}")
