"""Where ptrace is not allowed: one clear line. Where it is (same user, other namespaces): it works.

Made for real on this machine: an unprivileged user (setpriv), root without
CAP_SYS_PTRACE (what a container without SYS_PTRACE is), a target in its own mount
and PID namespace (unshare). Yama is not in this kernel: its messages are unit-tested
(tests/unit/test_permission.py).
"""

from __future__ import annotations

import csv
import io
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.targets import BIN, ROOT, Target, assert_text_matches_file, have_delve, one_line_error

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
NO_PTRACE_CAP = ["setpriv", "--bounding-set=-sys_ptrace", "--inh-caps=-sys_ptrace"]


def sampler_as(prefix: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "sampler", *args], cwd=ROOT, text=True,
                          capture_output=True, timeout=120, env={**os.environ, "XDG_RUNTIME_DIR": ""})


def deltas(stdout: str) -> list[int]:
    return [int(row["d"]) for row in csv.DictReader(io.StringIO(stdout))]


@pytest.mark.parametrize("way", [["--at", "ring_read"], []], ids=["breakpoint", "zero-stop"])
def test_another_users_process_needs_root(start_target: Callable[..., Target], way: list[str]) -> None:
    target = start_target("ringbuf-c")  # root's
    line = one_line_error(sampler_as(NOBODY, "attach", "--backend", "ptrace", "--pid", str(target.pid),
                                     *way, "--expr", "ring->w", "--count", "1", "--out", "-"))
    assert f"not allowed to read the program of process {target.pid}" in line
    assert "belongs to user root (uid 0)" in line and "runs as user nobody (uid 65534)" in line
    assert "run sampler as root (sudo)" in line
    target.assert_untouched()


def test_root_without_cap_sys_ptrace_is_told_about_the_capability(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    line = one_line_error(sampler_as(NO_PTRACE_CAP, "attach", "--backend", "ptrace", "--pid", str(target.pid),
                                     "--at", "ring_read", "--expr", "b->w", "--count", "1", "--out", "-"))
    assert "sampler runs as root but" in line and "SYS_PTRACE" in line, line
    assert "--cap-add=SYS_PTRACE" in line
    target.assert_untouched()


def test_a_user_samples_their_own_process_without_root(start_target: Callable[..., Target]) -> None:
    target = start_target(*NOBODY, str(BIN / "ringbuf-c"), binary=False)
    result = sampler_as(NOBODY, "attach", "--backend", "ptrace", "--pid", str(target.pid), "--at", "ring_read",
                        "--expr", "d=b->w - b->r", "--count", "3", "--interval", "100ms", "--out", "-", "--quiet")
    assert result.returncode == 0, result.stderr
    values = deltas(result.stdout)
    assert len(values) == 3 and all(0 <= d <= 20000 for d in values), values  # 0: the reader caught up
    assert_text_matches_file(target)
    target.assert_untouched()


@contextmanager
def namespaced(start_target: Callable[..., Target], tmp_path: Path, binary: str) -> Iterator[tuple[Target, int]]:
    """The target in its own mount and PID namespace, run from a path that only exists there."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    script = f"mount -t tmpfs none {hidden} && cp {BIN / binary} {hidden}/ && exec {hidden}/{binary}"
    wrapper = start_target("unshare", "--mount", "--pid", "--fork", "sh", "-c", script, binary=False)
    assert "ready pid=1" in wrapper.lines, wrapper.lines  # PID 1 of its own namespace
    [pid] = Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split()
    assert os.readlink(f"/proc/{pid}/exe") == f"{hidden}/{binary}"
    try:
        assert not (hidden / binary).exists()  # not in ours
        yield wrapper, int(pid)
    finally:
        os.kill(int(pid), signal.SIGKILL)  # PID 1 of its namespace: killing unshare leaves it


def test_a_target_in_other_namespaces_is_read_through_proc(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    with namespaced(start_target, tmp_path, "ringbuf-c") as (wrapper, pid):
        result = sampler_as([], "attach", "--backend", "ptrace", "--pid", str(pid), "--at", "ring_read",
                            "--expr", "d=b->w - b->r", "--count", "3", "--interval", "100ms", "--out", "-",
                            "--quiet")
        assert result.returncode == 0, result.stderr
        values = deltas(result.stdout)
        assert len(values) == 3 and all(0 <= d <= 20000 for d in values), values  # 0: the reader caught up
        wrapper.more_throughput(2)  # still working
        assert "TracerPid:\t0\n" in Path(f"/proc/{pid}/status").read_text()


@pytest.mark.skipif(not have_delve(), reason="dlv or the Go target is missing (make setup installs them)")
def test_delve_samples_a_target_in_other_namespaces(start_target: Callable[..., Target], tmp_path: Path) -> None:
    with namespaced(start_target, tmp_path, "ringbuf-go") as (wrapper, pid):
        result = sampler_as([], "attach", "--backend", "delve-rpc", "--pid", str(pid), "--at",
                            "main.(*Ring).Read", "--expr", "d=b.w - b.r", "--count", "2", "--interval", "100ms",
                            "--out", "-", "--quiet")
        assert result.returncode == 0, result.stderr
        assert all(0 <= d <= 20000 for d in deltas(result.stdout))
        wrapper.more_throughput(2)


def test_a_journal_folder_someone_else_made_is_never_trusted(start_target: Callable[..., Target]) -> None:
    # GIVEN a user (uid 54321, no XDG_RUNTIME_DIR) whose /tmp/sampler-UID another user made first,
    # world-writable, holding an entry that names the user's own process, its real start time, and
    # a code byte that is 0xCC in the file (an immediate or padding) with a made-up "original"
    from sampler.target import procfs

    user = ["setpriv", "--reuid=54321", "--regid=54321", "--clear-groups"]
    target = start_target(*user, str(BIN / "ringbuf-go"), binary=False)
    folder = Path("/tmp/sampler-54321")
    subprocess.run(["rm", "-rf", str(folder), *map(str, Path("/tmp").glob("sampler-54321-*"))], check=True)
    folder.mkdir()
    try:
        os.chown(folder, 4242, 4242)
        folder.chmod(0o777)
        exe = procfs.exe_path(target.pid)
        code = next(m for m in procfs.maps(target.pid) if m.executable and m.path == exe)
        with open(f"/proc/{target.pid}/mem", "rb") as mem:
            mem.seek(code.start)
            address = code.start + mem.read(code.end - code.start).index(b"\xcc")
        entry = folder / f"{target.pid}-{procfs.start_time(target.pid)}.json"
        entry.write_text(f'{{"pid": {target.pid}, "start_time": {procfs.start_time(target.pid)}, '
                         f'"patches": {{"{address:#x}": 65}}}}')
        os.chown(entry, 4242, 4242)
        # WHEN the user runs sampler repair, then a breakpoint attach (which repairs first and journals)
        repaired = sampler_as(user, "repair", "--pid", str(target.pid))
        attached = sampler_as(user, "attach", "--backend", "ptrace", "--pid", str(target.pid), "--quiet",
                              "--at", "main.(*Ring).Read", "--expr", "b.w", "--count", "2", "--out", "-")
        # THEN nothing in that folder is used: repair finds nothing, the attach journals in a private
        # folder sampler made (0700, the user's), and says so once; the planted entry and the code are untouched
        assert repaired.returncode == 0 and "nothing to repair" in repaired.stderr, repaired.stderr
        assert attached.returncode == 0, attached.stderr
        said = [line for line in attached.stderr.splitlines() if "journal folder" in line]
        assert len(said) == 1 and "belongs to uid 4242" in said[0] and "private folder /tmp/sampler-54321-" in said[0]
        [private] = Path("/tmp").glob("sampler-54321-*")
        assert private.stat().st_uid == 54321 and private.stat().st_mode & 0o777 == 0o700
        assert entry.exists() and entry.read_text().endswith("65}}")
        assert_text_matches_file(target)
        target.assert_untouched()
    finally:
        subprocess.run(["rm", "-rf", str(folder), *map(str, Path("/tmp").glob("sampler-54321-*"))], check=True)
