"""The durable log of the bytes sampler has patched, so that a later `sampler repair`
(or the next attach) can put them back after sampler itself died.

One file per target process, named PID-STARTTIME.json, fsynced before the byte is patched,
removed once every byte is restored: its first line a JSON object (the process, and the patches
then), written atomically; each later change a line appended to it (the patches added, a semaphore
counted in or out), read in order. A change is one line of its own, not the whole entry again
(8,000 probes rewrote thousands of entries 8,000 times); a last line cut short by a crash
names bytes not patched yet (the line goes first) and is passed over. The process
start time (procfs.start_time) makes sure a reused PID is never touched, and each patch
keeps its place (patches.Patch: the file, the offset in it, its build-id, the bytes around)
so that a process which exec'd since is never written into.

The folder is /run/sampler for root, else $XDG_RUNTIME_DIR/sampler or
/tmp/sampler-UID (SAMPLER_JOURNAL_DIR overrides). A name in /tmp can be created
first by anyone, so the journal trusts a folder only when it belongs to the user and
no one else may write to it, and a file only when it belongs to the user, is a
regular file, and is opened without following a link. Anything else is refused with
JournalError and left untouched; in place of an untrusted /tmp/sampler-UID, sampler
makes a private folder of its own (/tmp/sampler-UID-XXXXXXXX) and says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from sampler import notice
from sampler.errors import JournalError, ProcessNotFound, UntrustedJournal
from sampler.safety.patches import Patch
from sampler.target import procfs

SUFFIX = ".json"
MAX_ENTRY = 64 << 20
"""Bytes of an entry read at most (8,192 probes' jumps, each byte with its place, are some 12 MiB)."""


def journal_dir() -> Path:
    """/run/sampler for root; a user's own runtime folder otherwise (SAMPLER_JOURNAL_DIR overrides)."""
    if os.environ.get("SAMPLER_JOURNAL_DIR"):
        return Path(os.environ["SAMPLER_JOURNAL_DIR"])
    if os.geteuid() == 0:
        return Path("/run/sampler")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "sampler" if runtime else Path(f"/tmp/sampler-{os.geteuid()}")


def folder_fd(create: bool) -> int | None:
    """A descriptor of the journal folder, once it is known to be the user's own.

    None when it does not exist and ``create`` is false. JournalError when it is not
    to be trusted (another owner, writable by group or others, a link) or cannot be made;
    except /tmp/sampler-UID, which anyone can make first: then a private folder
    /tmp/sampler-UID-XXXXXXXX (made by sampler, mode 0700, found again by the next run)
    takes its place, and the untrusted one is left untouched.
    """
    global _said
    folder = journal_dir()
    try:
        return _open_trusted(folder, create)
    except JournalError as e:  # another's folder, a link or a file where the folder should be
        if folder != _shared_tmp():
            raise
        fallback = _private_folder(create)
        if fallback is None:
            return None
        if not _said:
            notice.say(f"{e.message}; using sampler's private folder {fallback} instead")
            _said = True
        return _open_trusted(fallback, create=False)


_said = False
"""The fallback was said (once per run)."""


@contextmanager
def open_folders() -> Iterator[list[int]]:
    """Every journal folder of the user's to read (for repair): the usual one when it is to be
    trusted, and each private /tmp/sampler-UID-* of earlier runs; closed on the way out."""
    fds: list[int] = []
    shared = journal_dir() == _shared_tmp()
    try:
        try:
            primary = _open_trusted(journal_dir(), create=False)
        except JournalError:
            if not shared:
                raise
            primary = None
        if primary is not None:
            fds.append(primary)
        for folder in _private_folders() if shared else []:
            fd = _open_trusted(folder, create=False)
            if fd is not None:
                fds.append(fd)
        yield fds
    finally:
        for fd in fds:
            os.close(fd)


def _shared_tmp() -> Path:
    return Path(f"/tmp/sampler-{os.geteuid()}")


def _private_folders() -> list[Path]:
    """The user's own /tmp/sampler-UID-* folders, by name (others' are passed over)."""
    prefix = f"sampler-{os.geteuid()}-"
    found = []
    for name in sorted(os.listdir("/tmp")):
        if name.startswith(prefix):
            try:
                fd = _open_trusted(Path("/tmp") / name, create=False)
            except JournalError:
                continue  # someone else's, or not a folder: not ours
            if fd is not None:
                os.close(fd)
                found.append(Path("/tmp") / name)
    return found


def _private_folder(create: bool) -> Path | None:
    """The first of the user's private folders, made when none is there and ``create``."""
    found = _private_folders()
    if found or not create:
        return found[0] if found else None
    try:
        return Path(tempfile.mkdtemp(prefix=f"sampler-{os.geteuid()}-", dir="/tmp"))  # 0700, a new name
    except OSError as e:
        raise JournalError(f"cannot create a private journal folder in /tmp: {e.strerror}") from None


def _open_trusted(folder: Path, create: bool) -> int | None:
    if create:
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise JournalError(f"cannot create the journal folder {folder}: {e.strerror}") from None
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if create:
            raise JournalError(f"the journal folder {folder} vanished") from None
        return None
    except OSError as e:
        raise JournalError(f"cannot open the journal folder {folder}: {e.strerror}") from None
    try:
        _check_owned(os.fstat(fd), f"the journal folder {folder}")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_owned(info: os.stat_result, what: str) -> None:
    if info.st_uid != os.geteuid():
        raise UntrustedJournal(f"{what} belongs to uid {info.st_uid}, not to sampler's user (uid {os.geteuid()}): "
                           "sampler does not trust it and touched nothing")
    if info.st_mode & 0o022:
        raise UntrustedJournal(f"{what} may be written by others (mode {stat.S_IMODE(info.st_mode):o}): "
                           "sampler does not trust it and touched nothing")


def read_entry(folder: int, name: str) -> dict[str, object]:
    """The parsed JSON of one entry in the (checked) folder; JournalError if it is not to be trusted."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, dir_fd=folder)
    except OSError as e:
        raise JournalError(f"cannot open journal entry {name}: {e.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise JournalError(f"journal entry {name} is not a regular file")
        _check_owned(info, f"journal entry {name}")
        with os.fdopen(fd, "rb", closefd=False) as f:
            text = f.read(MAX_ENTRY + 1)
        if len(text) > MAX_ENTRY:
            raise ValueError(f"over {MAX_ENTRY >> 20} MiB")
        return _folded(text.splitlines())
    except (OSError, ValueError) as e:
        raise JournalError(f"journal entry {name} cannot be read: {e}") from None
    finally:
        os.close(fd)


def _folded(lines: list[bytes]) -> dict[str, object]:
    """The entry its lines make, in order: the first (the process and its patches), then each change; a
    last line that does not parse was cut short by a crash (its bytes were not patched yet)."""
    data: dict[str, object] = {}
    patches: dict[str, object] = {}
    semaphores: dict[str, object] = {}
    for number, line in enumerate(lines):
        try:
            change = json.loads(line)
        except ValueError:
            if number == len(lines) - 1 and number:
                break
            raise
        if not isinstance(change, dict):
            raise ValueError(f"line {number + 1} is not a journal entry's")
        for key in ("pid", "start_time"):
            if key in change:
                data[key] = change[key]
        for key, into in (("patches", patches), ("semaphores", semaphores)):
            more = change.get(key, {})
            if not isinstance(more, dict):
                raise ValueError(f"line {number + 1}: {key} has the wrong type")
            into.update(more)
        out = change.get("semaphores_out", [])
        for address in out if isinstance(out, list) else []:
            semaphores.pop(str(address), None)
    if not lines:
        raise ValueError("it is empty")
    data["patches"], data["semaphores"] = patches, semaphores
    return data


def entry_names(folder: int) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if n.endswith(SUFFIX))
    except OSError as e:
        raise JournalError(f"cannot list the journal folder {journal_dir()}: {e.strerror}") from None


def remove_entry(folder: int, name: str) -> None:
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise JournalError(f"cannot remove journal entry {name}: {e.strerror}") from None


@dataclass(frozen=True)
class Entry:
    """One journal file, checked: which process, and which bytes to put back."""

    name: str
    pid: int
    start_time: int
    patches: dict[int, Patch]
    """address -> the original byte and its place."""
    semaphores: dict[int, Patch] = dataclasses.field(default_factory=dict)
    """USDT semaphores counted in: address -> its place (semaphores.py)."""


def parse_entry(name: str, data: dict[str, object]) -> Entry:
    """Check the fields of an entry; JournalError saying what is missing or wrong."""
    try:
        pid, started, patches = data["pid"], data["start_time"], data["patches"]
        if not isinstance(pid, int) or not isinstance(started, int) or not isinstance(patches, dict):
            raise TypeError("pid, start_time and patches have the wrong types")
        parsed = {int(a, 16): Patch.from_json(b) for a, b in patches.items()}
        counted = data.get("semaphores", {})
        if not isinstance(counted, dict):
            raise TypeError("semaphores has the wrong type")
        semaphores = {int(a, 16): Patch.from_json(b) for a, b in counted.items()}
        if pid <= 0 or any(a <= 0 for a in (*parsed, *semaphores)):
            raise ValueError("an address or byte out of range")
    except (KeyError, TypeError, ValueError) as e:
        raise JournalError(f"journal entry {name} is malformed ({e})") from None
    return Entry(name, pid, started, parsed, semaphores)


class Journal:
    """The patches of one target process.

    The folder is checked and opened once, at the first record, and held until ``close``.
    The entry is written (and synced) when a byte is first recorded and removed whole by
    ``clear`` at detach: nothing is written while a thread of the target waits."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        started = procfs.start_time(pid)
        if started is None:
            raise ProcessNotFound(f"no process with PID {pid}")
        self.name = f"{pid}-{started}{SUFFIX}"
        self.path = journal_dir() / self.name
        self.start_time = started
        self.patches: dict[int, Patch] = {}
        self.semaphores: dict[int, Patch] = {}
        """USDT semaphores counted in (semaphores.py)."""
        self._folder: int | None = None
        self._written = False
        """The entry is on disk: a change is appended to it."""

    def record(self, address: int, patch: Patch) -> None:
        """Note a byte about to be patched (durable when this returns)."""
        self.record_many({address: patch})

    def record_many(self, patches: dict[int, Patch]) -> None:
        """Note several bytes at once (one write and sync): a batch of probes, a forked child's copies."""
        new = {a: b for a, b in patches.items() if self.patches.get(a) != b}
        if not new:
            return
        self.patches.update(new)
        self._write({"patches": {f"{a:#x}": p.to_json() for a, p in new.items()}})

    def record_semaphore(self, address: int, place: Patch) -> None:
        """Note a semaphore about to be counted in (durable when this returns)."""
        self.semaphores[address] = place
        self._write({"semaphores": {f"{address:#x}": place.to_json()}})

    def forget_semaphore(self, address: int) -> None:
        """A semaphore about to be counted out (durable when this returns: see semaphores.py)."""
        if self.semaphores.pop(address, None) is not None:
            self._write({"semaphores_out": [f"{address:#x}"]})

    def clear(self) -> None:
        """Every byte is back: the entry goes."""
        self.patches.clear()
        self.semaphores.clear()
        self._written = False
        if self._folder is not None:
            remove_entry(self._folder, self.name)

    def close(self) -> None:
        """Let go of the folder (the entry stays if bytes are still patched)."""
        if self._folder is not None:
            os.close(self._folder)
            self._folder = None

    def _write(self, change: dict[str, object]) -> None:
        """``change`` appended to the entry as a line of its own (the entry made whole first, atomically)."""
        if self._folder is None:
            self._folder = folder_fd(create=True)
        folder = self._folder
        assert folder is not None
        if self._written:
            try:
                fd = os.open(self.name, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
                try:
                    if not stat.S_ISREG(os.fstat(fd).st_mode):
                        raise JournalError(f"the journal {self.path} is not a regular file")
                    _write_all(fd, json.dumps(change).encode() + b"\n")
                    os.fsync(fd)
                finally:
                    os.close(fd)
                return
            except FileNotFoundError:
                pass  # (removed meanwhile: made whole again)
            except OSError as e:
                raise JournalError(f"cannot write the journal {self.path}: {e.strerror}") from None
        data = json.dumps({"pid": self.pid, "start_time": self.start_time,
                           "patches": {f"{a:#x}": p.to_json() for a, p in self.patches.items()},
                           "semaphores": {f"{a:#x}": p.to_json() for a, p in self.semaphores.items()}}).encode() + b"\n"
        tmp = self.name + ".tmp"
        try:
            try:
                os.unlink(tmp, dir_fd=folder)
            except FileNotFoundError:
                pass
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=folder)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as e:
            raise JournalError(f"cannot write the journal {self.path}: {e.strerror}") from None
        self._written = True


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of ``data`` written (a full disk writes part of a batch's line and says so: OSError then)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(28, "no space left on device")
        view = view[written:]
