"""Which bytes of which process sampler has patched, kept on disk so that a later
`sampler repair` (or the guardian) can put them back after sampler itself died.

One JSON file per target process under /run/sampler (SAMPLER_JOURNAL_DIR overrides),
named PID-STARTTIME, written atomically and fsynced before the byte is patched, and
removed once every byte is restored. The process start time (field 22 of
/proc/PID/stat) makes sure a reused PID is never touched.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from sampler import process
from sampler.errors import ProcessNotFound, SamplerError

INT3 = 0xCC


def journal_dir() -> Path:
    """/run/sampler for root; a user's own runtime folder otherwise (SAMPLER_JOURNAL_DIR overrides)."""
    if "SAMPLER_JOURNAL_DIR" in os.environ:
        return Path(os.environ["SAMPLER_JOURNAL_DIR"])
    if os.geteuid() == 0:
        return Path("/run/sampler")
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "sampler" if runtime else Path(f"/tmp/sampler-{os.geteuid()}")


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


class Journal:
    """The patches of one target process."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        started = start_time(pid)
        if started is None:
            raise ProcessLookupError(pid)
        self.path = journal_dir() / f"{pid}-{started}.json"
        self.start_time = started
        self.patches: dict[int, int] = {}

    def record(self, address: int, original: int) -> None:
        """Note a byte about to be patched (durable when this returns)."""
        if self.patches.get(address) == original:
            return
        self.patches[address] = original
        self._write()

    def forget(self, address: int) -> None:
        """Note a byte restored; the file goes when nothing is patched."""
        if self.patches.pop(address, None) is None:
            return
        if self.patches:
            self._write()
        else:
            self.path.unlink(missing_ok=True)

    def _write(self) -> None:
        folder = self.path.parent
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            if folder.stat().st_uid != os.geteuid():
                raise JournalError(f"the journal folder {folder} belongs to another user")
            data = {"pid": self.pid, "start_time": self.start_time,
                    "patches": {f"{a:#x}": b for a, b in self.patches.items()}}
            tmp = self.path.with_suffix(".tmp")
            with open(tmp, "w") as f:
                json.dump(data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:
            raise JournalError(f"cannot write the journal {self.path}: {e.strerror}") from None


class JournalError(SamplerError):
    """The journal cannot be written: sampler will not patch what it could not put back."""

    hint = "set SAMPLER_JOURNAL_DIR to a folder of your own"


@dataclass(frozen=True)
class Repair:
    pid: int
    restored: int
    """Bytes put back."""
    note: str


def repair(pid: int | None = None, skip_traced: bool = False) -> list[Repair]:
    """Put back what earlier runs left patched: for ``pid``, or every entry when None.

    An entry whose process is gone, or whose PID now belongs to another process
    (another start time), is dropped without touching anything. With ``skip_traced``,
    a process that is traced right now (a sampler may still own it) is left alone.
    """
    results = []
    folder = journal_dir()
    for path in sorted(folder.glob("*.json")) if folder.exists() else []:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        entry_pid = int(data["pid"])
        if pid is not None and entry_pid != pid:
            continue
        if start_time(entry_pid) != int(data["start_time"]):
            path.unlink(missing_ok=True)
            results.append(Repair(entry_pid, 0, "process gone or PID reused: entry dropped"))
            continue
        if skip_traced and _traced(entry_pid):
            results.append(Repair(entry_pid, 0, "traced right now (a sampler may own it): left alone"))
            continue
        restored = 0
        with open(f"/proc/{entry_pid}/mem", "r+b", buffering=0) as mem:
            for address_text, original in data["patches"].items():
                address = int(address_text, 16)
                mem.seek(address)
                if mem.read(1) == bytes([INT3]) and original != INT3:
                    mem.seek(address)
                    mem.write(bytes([original]))
                    restored += 1
        path.unlink(missing_ok=True)
        results.append(Repair(entry_pid, restored, f"{restored} byte(s) restored"))
    return results


def _traced(pid: int) -> bool:
    try:
        return int(process.status_fields(pid).get("TracerPid", "0") or 0) != 0
    except ProcessNotFound:
        return False


def restore_code(pid: int) -> int:
    """Put back, from the program file, every int3 in the program's code that the file does not have.

    For when a debugger had to be killed with its breakpoints (its own internal ones
    too) still in the target: sampler does not know their original bytes, the file does.
    Returns the bytes restored.
    """
    restored = 0
    try:
        exe = os.readlink(f"/proc/{pid}/exe")
        with open(f"/proc/{pid}/exe", "rb") as f:  # the file even in another mount namespace
            binary = f.read()
        with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
            for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
                fields = line.split()
                if len(fields) < 6 or "x" not in fields[1] or fields[5] != exe:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                offset = int(fields[2], 16)
                mem.seek(start)
                code = mem.read(end - start)
                for index, byte in enumerate(code):
                    if byte == INT3 and binary[offset + index] != INT3:
                        mem.seek(start + index)
                        mem.write(binary[offset + index:offset + index + 1])
                        restored += 1
    except OSError:
        pass  # gone, or not ours to write
    return restored
