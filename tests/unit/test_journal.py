"""The journal of patched bytes and its repair: durable, tolerant of bad entries, trusting only its own."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sampler.errors import JournalError, ProcessNotFound, UntrustedJournal
from sampler.safety import repair
from sampler.safety.journal import Journal
from sampler.target import procfs


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "journal"
    monkeypatch.setenv("SAMPLER_JOURNAL_DIR", str(path))
    return path


@pytest.fixture
def sleeper() -> Iterator[int]:
    proc = subprocess.Popen(["sleep", "60"])
    yield proc.pid
    proc.kill()
    proc.wait()


def entry(folder: Path, pid: int, text: str) -> Path:
    folder.mkdir(mode=0o700, exist_ok=True)
    path = folder / f"{pid}-{procfs.start_time(pid)}.json"
    path.write_text(text)
    return path


def test_record_then_clear(folder: Path, sleeper: int) -> None:
    journal = Journal(sleeper)
    journal.record(0x1000, 0x55)
    path = folder / f"{sleeper}-{procfs.start_time(sleeper)}.json"
    assert json.loads(path.read_text())["patches"] == {"0x1000": 0x55}
    assert (folder.stat().st_mode & 0o777, path.stat().st_mode & 0o777) == (0o700, 0o600)
    journal.clear()
    assert not path.exists()


def test_a_gone_process_has_no_journal(folder: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(ProcessNotFound):
        Journal(proc.pid)


def test_a_folder_others_may_write_is_refused(folder: Path, sleeper: int) -> None:
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UntrustedJournal, match="may be written by others"):
        Journal(sleeper).record(0x1000, 0x55)
    with pytest.raises(UntrustedJournal):
        repair.repair(sleeper)


def test_a_folder_of_another_user_is_refused(folder: Path, sleeper: int) -> None:
    folder.mkdir(mode=0o700)
    os.chown(folder, 4242, 4242)
    with pytest.raises(UntrustedJournal, match="belongs to uid 4242"):
        repair.repair()


def test_a_linked_folder_is_refused(folder: Path, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    folder.symlink_to(real)
    with pytest.raises(JournalError, match="cannot open the journal folder"):
        repair.repair()


@pytest.mark.parametrize("text, why", [
    ("{not json", "cannot be read"),
    ("[]", "is not a journal entry"),
    ('{"pid": 1}', "malformed"),
    ('{"pid": "x", "start_time": 1, "patches": {}}', "malformed"),
    ('{"pid": 5, "start_time": 1, "patches": {"zz": 1}}', "malformed"),
    ('{"pid": 5, "start_time": 1, "patches": {"0x10": 300}}', "malformed"),
])
def test_a_bad_entry_is_said_once_and_never_blocks(folder: Path, sleeper: int, text: str, why: str) -> None:
    path = entry(folder, sleeper, text)
    fixed = repair.repair(sleeper)
    assert len(fixed) == 1 and fixed[0].problem and why in fixed[0].note, fixed
    assert not path.exists()
    assert repair.repair(sleeper) == []


def test_a_linked_entry_is_not_followed(folder: Path, sleeper: int, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    folder.mkdir(mode=0o700)
    link = folder / f"{sleeper}-{procfs.start_time(sleeper)}.json"
    link.symlink_to(elsewhere)
    fixed = repair.repair(sleeper)
    assert fixed[0].problem and "cannot open" in fixed[0].note
    assert not link.exists() and elsewhere.read_text() == "{}"


def test_bytes_that_cannot_be_put_back_are_said_and_dropped(folder: Path, sleeper: int) -> None:
    # an address the process has not mapped (a library unmapped since)
    path = entry(folder, sleeper, json.dumps({"pid": sleeper, "start_time": procfs.start_time(sleeper),
                                              "patches": {"0x10": 0x55}}))
    fixed = repair.repair(sleeper)
    assert len(fixed) == 1 and fixed[0].restored == 0 and fixed[0].problem
    assert "could not put back 0x10" in fixed[0].note
    assert not path.exists()


def test_a_reused_pid_is_dropped_untouched(folder: Path, sleeper: int) -> None:
    folder.mkdir(mode=0o700)
    started = procfs.start_time(sleeper)
    assert started is not None
    path = folder / f"{sleeper}-{started - 1}.json"
    path.write_text(json.dumps({"pid": sleeper, "start_time": started - 1, "patches": {"0x1": 0x90}}))
    fixed = repair.repair()
    assert [(f.pid, f.restored, f.problem) for f in fixed] == [(sleeper, 0, False)]
    assert not path.exists()
