"""The journal of patched bytes and its repair: durable, tolerant of bad entries, trusting only its own."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sampler.errors import JournalError, ProcessNotFound, UntrustedJournal
from sampler.safety import repair
from sampler.safety.journal import Journal, parse_entry, read_entry
from sampler.safety.patches import Describer, Patch, restore_checked
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
    journal.record(0x1000, Patch(0x55, b"\x01\x02", b"\x03", "fd:01", 42, 0x1000, "ab"))
    path = folder / f"{sleeper}-{procfs.start_time(sleeper)}.json"
    assert json.loads(path.read_text())["patches"] == {"0x1000": {
        "byte": 0x55, "before": "0102", "after": "03", "device": "fd:01", "inode": 42, "offset": 0x1000,
        "build_id": "ab", "written": 0xCC, "group": 0}}
    assert (folder.stat().st_mode & 0o777, path.stat().st_mode & 0o777) == (0o700, 0o600)
    journal.clear()
    assert not path.exists()


def test_each_change_is_a_line_appended_and_the_entry_reads_as_their_sum(folder: Path, sleeper: int) -> None:
    # GIVEN a journal that records a byte, then three at once, a semaphore in and out, and one byte again
    journal = Journal(sleeper)
    first, other = (Patch(0x55, b"\x01", b"\x02", "fd:01", 42, 0x1000 + n, "ab") for n in range(2))
    journal.record(0x1000, first)
    journal.record_many({0x2000 + n: dataclasses.replace(other, written=0xE9, group=0x2000) for n in range(3)})
    journal.record_semaphore(0x3000, first)
    journal.forget_semaphore(0x3000)
    journal.record(0x1000, first)  # (the same: nothing written)
    path = folder / journal.name
    lines = path.read_bytes().splitlines()
    # THEN the first line is the entry then, each change a line of its own
    assert len(lines) == 4 and list(json.loads(lines[0])["patches"]) == ["0x1000"]
    assert len(json.loads(lines[1])["patches"]) == 3
    # AND the entry read is the sum of the lines, a last line cut short (a crash while it was written) passed over
    with path.open("ab") as f:
        f.write(b'{"patches": {"0x4000": {"by')
    with journal_folder(folder) as fd:
        entry = parse_entry(journal.name, read_entry(fd, journal.name))
    assert sorted(entry.patches) == [0x1000, 0x2000, 0x2001, 0x2002] and entry.semaphores == {}
    assert entry.patches[0x2001].written == 0xE9 and entry.pid == sleeper
    journal.clear()
    assert not path.exists()


@contextlib.contextmanager
def journal_folder(folder: Path) -> Iterator[int]:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield fd
    finally:
        os.close(fd)


def test_a_gone_process_has_no_journal(folder: Path) -> None:
    proc = subprocess.Popen(["true"])
    proc.wait()
    with pytest.raises(ProcessNotFound):
        Journal(proc.pid)


def test_a_folder_others_may_write_is_refused(folder: Path, sleeper: int) -> None:
    folder.mkdir()
    folder.chmod(0o777)
    with pytest.raises(UntrustedJournal, match="may be written by others"):
        Journal(sleeper).record(0x1000, Patch(0x55))
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
    ('{"pid": 5, "start_time": 1, "patches": {"0x10": {"byte": 1, "before": "zz"}}}', "malformed"),
    ('{"pid": 5, "start_time": 1, "patches": {"0x10": {"byte": 1, "inode": "x", "offset": 0}}}', "malformed"),
    ('{"pid": 5, "start_time": 1, "patches": {"0x10": {"byte": 1, "before": "' + "00" * 17 + '"}}}',
     "malformed"),
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
                                              "patches": {"0x10": Patch(0x55, offset=0x10).to_json()}}))
    fixed = repair.repair(sleeper)
    assert len(fixed) == 1 and fixed[0].restored == 0 and fixed[0].problem
    assert "0x10: nothing is mapped there now: nothing written" in fixed[0].note
    assert not path.exists()


def test_an_entry_of_an_older_sampler_names_no_file_and_writes_nothing(folder: Path, sleeper: int) -> None:
    # GIVEN an entry in the format before issue 32 (a bare byte), at an int3 the process holds
    address = own_int3(sleeper)
    path = entry(folder, sleeper, json.dumps({"pid": sleeper, "start_time": procfs.start_time(sleeper),
                                              "patches": {f"{address:#x}": 0x55}}))
    # WHEN repairing: THEN nothing is written, the line says why, the entry goes
    [fixed] = repair.repair(sleeper)
    assert fixed.restored == 0 and fixed.problem and "does not say which file it was in" in fixed.note
    assert read_byte(sleeper, address) == 0xCC and not path.exists()


def own_int3(pid: int) -> int:
    """An address of an int3 in ``pid``'s program code as its file has it (padding)."""
    exe = procfs.exe_path(pid)
    for mapping in procfs.maps(pid):
        if mapping.executable and mapping.path == exe:
            with open(f"/proc/{pid}/mem", "rb") as mem:
                mem.seek(mapping.start)
                code = mem.read(mapping.end - mapping.start)
            if b"\xcc" in code:
                return mapping.start + code.index(b"\xcc")
    pytest.skip("no int3 in the program's code")


def read_byte(pid: int, address: int) -> int:
    with open(f"/proc/{pid}/mem", "rb") as mem:
        mem.seek(address)
        return mem.read(1)[0]


def test_a_patch_goes_back_only_into_the_code_it_came_from(sleeper: int) -> None:
    """patches.restore_checked: a described patch goes back; another file, offset, build-id or
    bytes around: nothing is written, and the reason is said."""
    # GIVEN an int3 that is the program's own (its file has it), described as sampler would
    address = own_int3(sleeper)
    with open(f"/proc/{sleeper}/mem", "rb") as mem:
        patch = Describer(sleeper, mem.fileno()).describe(address, 0x90)
    assert patch.placed and len(patch.before) == len(patch.after) == 16 and patch.inode > 0
    assert patch.build_id, "sleep has a build-id"
    # WHEN its place is wrong in one way: THEN nothing is written, and the note says which
    for wrong, why in [(dataclasses.replace(patch, inode=patch.inode + 1), "not what sampler patched"),
                       (dataclasses.replace(patch, offset=patch.offset + 1), "not what sampler patched"),
                       (dataclasses.replace(patch, build_id="00" * 20), "has build-id"),
                       (dataclasses.replace(patch, before=bytes(16)), "the code around it is not")]:
        restored, note = restore_checked(sleeper, {address: wrong})
        assert restored == 0 and why in note and "nothing written" in note, note
        assert read_byte(sleeper, address) == 0xCC
    # AND when all of it holds, the byte goes back (and only once)
    assert restore_checked(sleeper, {address: patch}) == (1, "")
    assert read_byte(sleeper, address) == 0x90
    assert restore_checked(sleeper, {address: patch}) == (0, "")


def test_a_reused_pid_is_dropped_untouched(folder: Path, sleeper: int) -> None:
    folder.mkdir(mode=0o700)
    started = procfs.start_time(sleeper)
    assert started is not None
    path = folder / f"{sleeper}-{started - 1}.json"
    path.write_text(json.dumps({"pid": sleeper, "start_time": started - 1, "patches": {"0x1": 0x90}}))
    fixed = repair.repair()
    assert [(f.pid, f.restored, f.problem) for f in fixed] == [(sleeper, 0, False)]
    assert not path.exists()
