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

from sampler.safety import journal
from tests.integration.targets import ROOT, Target, assert_text_matches_file, code_differs, finish, one_line_error


@pytest.fixture(autouse=True)
def own_journal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "journal"
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(folder))
    yield folder


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "sampler", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=60)


def start_armed(target: Target, tmp_path: Path, *extra: str, backend: str = "ptrace",
                at: str = "never") -> subprocess.Popen[bytes]:
    """Start sampler on a breakpoint that is never hit (armed all the time); return once it is armed."""
    expr = "b.w" if backend.startswith("delve") else "b->w"
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "attach", "--backend", backend,
                             "--pid", str(target.pid), "--at", at, "--expr", expr,
                             "--hit-timeout", "10s", "--out", str(tmp_path / "k.csv"), "--quiet", *extra],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    folder = journal.journal_dir()
    while not (backend.startswith("delve") or (folder.exists() and any(folder.glob(f"{target.pid}-*.json")))):
        assert proc.poll() is None and time.monotonic() < deadline, "sampler never armed its breakpoint"
        time.sleep(0.02)
    time.sleep(0.2 if backend == "ptrace" else 2.0)  # delve: attached and continued
    return proc


def worker_of(proc: subprocess.Popen[bytes]) -> int:
    """The forked worker of sampler's front process: the one that traces."""
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def kill_while_armed(target: Target, tmp_path: Path, *extra: str, backend: str = "ptrace",
                     at: str = "never") -> None:
    """SIGKILL sampler's tracing worker while its breakpoint is armed (what the OOM killer does)."""
    proc = start_armed(target, tmp_path, *extra, backend=backend, at=at)
    os.kill(worker_of(proc), signal.SIGKILL)
    assert proc.wait(10) == 128 + signal.SIGKILL
    assert proc.stderr is not None
    said = proc.stderr.read().decode()
    assert said.startswith("sampler: the sampling process (PID") and "killed by SIGKILL" in said, said
    proc.stderr.close()
    target.wait_for(lambda: target.status()["TracerPid"].strip() == "0", 10, "the dead tracer did not let go")


def test_the_guardian_restores_the_byte_when_sampler_is_killed(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    target = start_target("ringbuf-c")
    kill_while_armed(target, tmp_path)
    target.wait_for(lambda: not code_differs(target.pid), 5, "the guardian did not restore the code")
    target.wait_for(lambda: not list(own_journal.glob("*.json")), 5, "the journal entry stayed")
    target.assert_untouched()


def test_killing_sampler_itself_leaves_the_target_clean(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN sampler with its int3 armed
    target = start_target("ringbuf-c")
    proc = start_armed(target, tmp_path, "--no-guardian")
    # WHEN the process the user started is SIGKILLed
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL
    # THEN its worker restores the byte and detaches by itself (no guardian here)
    target.wait_for(lambda: target.status()["TracerPid"].strip() == "0", 10, "the worker did not detach")
    assert_text_matches_file(target)
    assert not list(own_journal.glob("*.json"))
    target.assert_untouched()
    if proc.stderr is not None:
        proc.stderr.close()


def test_the_guardian_leaves_dlv_safely_when_sampler_is_killed(go_target: Target, tmp_path: Path) -> None:
    # (delve-rpc, the default Delve drive: the terminal drive's guardian is a known bug, docs/safety.md;
    # a non-strict xfail of it passed or failed alike, so it is not a test)
    # GIVEN sampler driving dlv, its breakpoint armed, killed without a word
    kill_while_armed(go_target, tmp_path, backend="delve-rpc", at="main.Never")
    # THEN the guardian took dlv out: no breakpoint left, target running, dlv gone (it puts dlv's
    # bytes back from the file once dlv is dead, a moment after the target is untraced). dlv's own
    # breakpoints stay in, handled by dlv, until it quits: the terminal's way out (to the prompt,
    # clear, continue and settle, to the prompt again, quit) took over 5 s once in eight loaded
    # clean-clone runs, so the bound is the rescue's own waits, not a typical time
    go_target.wait_for(lambda: not code_differs(go_target.pid), 20, "the guardian did not restore the code")
    assert_text_matches_file(go_target)
    go_target.assert_untouched()


def test_without_guardian_repair_puts_the_byte_back(
        start_target: Callable[..., Target], tmp_path: Path, own_journal: Path) -> None:
    # GIVEN a target left with sampler's int3 in it (no guardian)
    target = start_target("ringbuf-c")
    kill_while_armed(target, tmp_path, "--no-guardian")
    assert code_differs(target.pid)
    entry = next(own_journal.glob(f"{target.pid}-*.json"))
    patches = json.loads(entry.read_text())["patches"]
    assert len(patches) == 1 and next(iter(patches.values())) != 0xCC
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


def test_repair_puts_back_from_the_file_what_a_killed_debugger_left(
        start_target: Callable[..., Target]) -> None:
    # GIVEN an int3 a dead debugger left at a function that is never called (not in the journal)
    target = start_target("ringbuf-c")
    symbols = subprocess.run(["nm", os.readlink(f"/proc/{target.pid}/exe")], capture_output=True,
                             text=True, check=True).stdout
    offset = int(next(line.split()[0] for line in symbols.splitlines() if line.endswith(" never")), 16)
    base = int(Path(f"/proc/{target.pid}/maps").read_text().split("-", 1)[0], 16)
    with open(f"/proc/{target.pid}/mem", "r+b", buffering=0) as mem:
        mem.seek(base + offset)
        mem.write(b"\xcc")
    assert code_differs(target.pid)
    # WHEN repairing from the file
    result = run("repair", "--pid", str(target.pid), "--code-from-file")
    # THEN the byte is the file's again
    assert result.returncode == 0, result.stderr
    assert f"PID {target.pid}: 1 int3 byte(s) put back from the program file" in result.stderr
    assert_text_matches_file(target)
    target.assert_untouched()


def test_ctrl_c_at_any_moment_is_one_line_and_exit_0_or_130(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    c_target = start_target("ringbuf-c")
    # GIVEN sampler started on a C target, WHEN SIGINT comes at moments from Python's loading of
    # sampler (about 0.2 s) through the fork of its worker to the first samples
    for delay in (0.1, 0.25, 0.45):
        out = tmp_path / f"rows{delay}.csv"
        proc = subprocess.Popen([sys.executable, "-m", "sampler", "attach", "--pid", str(c_target.pid), "--backend",
                                 "ptrace", "--at", "ring_read", "--expr", "d=b->w - b->r", "--rate", "50", "--out",
                                 str(out), "--quiet"], cwd=ROOT, text=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, env={**os.environ, "PYTHONFAULTHANDLER": "1"})
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, stderr = finish(proc)  # (a hang, seen once at 0.25 s in CI, fails with where each process waited)
        # THEN it ends 0 (stopped by the signal) or 130 (before sampling), in at most one line, no traceback
        assert proc.returncode in (0, 130), (delay, proc.returncode, stderr)
        assert "Traceback" not in stderr and len(stderr.strip().splitlines()) <= 1, (delay, stderr)
        if proc.returncode == 130:
            assert "interrupted before sampling started" in stderr, (delay, stderr)
        c_target.assert_untouched()
