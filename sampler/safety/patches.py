"""What identifies a byte sampler patched, so that it goes back only into the code it came from.

A PID and a start time name a process, but an exec keeps both. With the worker and its
guardian both killed (a whole-cgroup or OOM kill), a target that then exec'd a set-user-ID
program holds that program's code at the same addresses, and putting "the original byte"
back wherever an int3 stands wrote into it (issue 32: the next `repair` or `attach` did, 2 of
2). So each patch keeps, besides its original byte, what says which code it was in: the
bytes around it as they were, and (in the journal) the mapping's device and inode, the
byte's offset in that file and the file's build-id. A byte goes back only where all of it
still holds; elsewhere nothing is written and the reason is said.

Who checks what: the guardian and the cleaning of a forked child hold a /proc/PID/mem
descriptor of the very memory sampler patched and check the bytes around
(``put_back_through``); ``restore_checked`` (repair, every attach) starts from a PID and
checks everything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from sampler.debuginfo.mapped import build_id_of
from sampler.errors import ProcessNotFound
from sampler.target import procfs

INT3 = 0xCC
CONTEXT = 16
"""Bytes kept on each side of a patch (fewer at the edge of its mapping)."""


@dataclass(frozen=True)
class Patch:
    """One byte sampler patched: what was there, and which code it is in."""

    original: int
    before: bytes = b""
    """The CONTEXT bytes before it as they were when it was patched (fewer at a mapping's start)."""
    after: bytes = b""
    device: str = ""
    """The mapping's device as /proc/PID/maps writes it ("fd:01")."""
    inode: int = 0
    offset: int = -1
    """The byte's offset in the mapped file (-1: not known, an entry of an older sampler)."""
    build_id: str = ""
    """The mapped file's build-id in hex ('' when it has none or could not be read then)."""

    @property
    def placed(self) -> bool:
        """Whether it says which file and offset it is in."""
        return self.offset >= 0

    def to_json(self) -> dict[str, object]:
        return {"byte": self.original, "before": self.before.hex(), "after": self.after.hex(),
                "device": self.device, "inode": self.inode, "offset": self.offset, "build_id": self.build_id}

    @staticmethod
    def from_json(value: object) -> Patch:
        """From a journal entry; ValueError or TypeError when malformed. A bare byte (an older
        sampler's entry) says no place."""
        if isinstance(value, int) and not isinstance(value, bool):
            return Patch(_byte(value))
        if not isinstance(value, dict):
            raise TypeError("a patch is neither a byte nor an object")
        before, after = bytes.fromhex(_text(value, "before")), bytes.fromhex(_text(value, "after"))
        build_id = _text(value, "build_id")
        bytes.fromhex(build_id)
        inode, offset = value.get("inode"), value.get("offset")
        if not isinstance(inode, int) or not isinstance(offset, int) or len(before) > CONTEXT \
                or len(after) > CONTEXT or inode < 0:
            raise ValueError("a patch's place is out of range")
        return Patch(_byte(value.get("byte")), before, after, _text(value, "device"), inode, offset, build_id)


def _byte(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 255:
        raise ValueError("a byte out of range")
    return value


def _text(value: dict[str, object], key: str) -> str:
    text = value.get(key, "")
    if not isinstance(text, str) or len(text) > 256:
        raise TypeError(f"a patch's {key} is not a short text")
    return text


@dataclass
class Describer:
    """Makes the Patch of each byte about to be patched in one process: the bytes around from
    the memory sampler holds, the place from /proc/PID/maps (read again for an address it
    does not cover), the build-id once per file."""

    pid: int
    memory_fd: int
    _mappings: list[procfs.Mapping] = field(default_factory=list)
    _build_ids: dict[tuple[str, int], str] = field(default_factory=dict)

    def describe(self, address: int, original: int) -> Patch:
        mapping = _containing(self._mappings, address)
        if mapping is None:
            try:
                self._mappings = procfs.maps(self.pid)
            except ProcessNotFound:
                self._mappings = []
            mapping = _containing(self._mappings, address)
        if mapping is None:  # (the write that follows fails too)
            return Patch(original)
        low, high = max(mapping.start, address - CONTEXT), min(mapping.end, address + 1 + CONTEXT)
        try:
            around = os.pread(self.memory_fd, high - low, low)
        except OSError:
            around = b""
        if len(around) != high - low:
            return Patch(original)
        key = (mapping.device, mapping.inode)
        if key not in self._build_ids:
            self._build_ids[key] = (build_id_of(self.pid, mapping) or "") if mapping.inode else ""
        return Patch(original, around[:address - low], around[address - low + 1:], mapping.device, mapping.inode,
                     mapping.offset + address - mapping.start if mapping.inode else 0, self._build_ids[key])


def _containing(mappings: list[procfs.Mapping], address: int) -> procfs.Mapping | None:
    for mapping in mappings:
        if mapping.start <= address < mapping.end:
            return mapping
    return None


def put_back_through(fd: int, patches: dict[int, Patch]) -> tuple[int, list[str]]:
    """Put each original byte back through ``fd`` (a /proc/PID/mem descriptor) where an int3
    stands and the bytes around are as they were (positions of the other patches aside):
    (bytes restored, 'ADDRESS: reason' of each not put back for a reason to say)."""
    restored = 0
    failed: list[str] = []
    for address, patch in patches.items():
        low = address - len(patch.before)
        try:
            now = os.pread(fd, len(patch.before) + 1 + len(patch.after), low)
        except OSError as e:  # unmapped since (a library closed), or the process is going
            failed.append(f"{address:#x}: {e.strerror}")
            continue
        if len(now) != len(patch.before) + 1 + len(patch.after) or now[len(patch.before)] != INT3 \
                or patch.original == INT3:
            continue  # back already, or gone with the memory
        was = patch.before + bytes([INT3]) + patch.after
        if any(a != b and low + i not in patches for i, (a, b) in enumerate(zip(now, was))):
            failed.append(f"{address:#x}: the code around it is not what sampler patched: nothing written")
            continue
        try:
            if os.pwrite(fd, bytes([patch.original]), address) == 1:
                restored += 1
        except OSError as e:
            failed.append(f"{address:#x}: {e.strerror}")
    return restored, failed


def put_back_into(pid: int, patches: dict[int, Patch]) -> tuple[int, str]:
    """``put_back_through`` a descriptor opened now (a child stopped at its first instruction,
    which cannot exec before it is let go): (bytes restored, what failed or '')."""
    try:
        fd = procfs.open_mem(pid, writable=True)
    except OSError as e:
        return 0, f"cannot open the memory of process {pid}: {e.strerror}"
    try:
        restored, failed = put_back_through(fd, patches)
    finally:
        os.close(fd)
    return restored, f"could not put back {', '.join(failed)}" if failed else ""


def restore_checked(pid: int, patches: dict[int, Patch]) -> tuple[int, str]:
    """For a journal's patches of process ``pid``, found by PID alone: put back only the bytes
    whose mapping is still the same file at the same offset, with the same build-id and the
    same bytes around. (bytes restored, why each other was not put back, or '')."""
    try:
        fd = procfs.open_mem(pid, writable=True)  # first: an exec after this is harmless
    except OSError as e:
        return 0, f"cannot open the memory of process {pid}: {e.strerror}"
    try:
        try:
            mappings = procfs.maps(pid)
        except ProcessNotFound:
            return 0, f"process {pid} is gone"
        placed: dict[int, Patch] = {}
        refused: list[str] = []
        build_ids: dict[tuple[str, int], str | None] = {}
        for address, patch in patches.items():
            why = _moved(pid, mappings, address, patch, build_ids)
            if why:
                refused.append(f"{address:#x}: {why}")
            else:
                placed[address] = patch
        restored, failed = put_back_through(fd, placed)
    finally:
        os.close(fd)
    problems = refused + failed
    return restored, f"not put back: {'; '.join(problems)}" if problems else ""


def _moved(pid: int, mappings: list[procfs.Mapping], address: int, patch: Patch,
           build_ids: dict[tuple[str, int], str | None]) -> str:
    """Why the code at ``address`` is not the code ``patch`` was taken from ('' when it is)."""
    if not patch.placed:
        return "the journal entry does not say which file it was in (an older sampler's): nothing written"
    mapping = _containing(mappings, address)
    if mapping is None:
        return "nothing is mapped there now: nothing written"
    offset = mapping.offset + address - mapping.start if mapping.inode else 0
    if (mapping.device, mapping.inode, offset) != (patch.device, patch.inode, patch.offset):
        return (f"the code there now is {mapping.path or 'anonymous memory'} (inode {mapping.inode} on "
                f"{mapping.device}, offset {offset:#x}), not what sampler patched (inode {patch.inode} on "
                f"{patch.device}, offset {patch.offset:#x}; the process ran another program since?): nothing written")
    if patch.build_id:
        key = (mapping.device, mapping.inode)
        if key not in build_ids:
            build_ids[key] = build_id_of(pid, mapping)
        now = build_ids[key]
        if now is None:
            return f"cannot open {mapping.path} to check its build-id: nothing written"
        if now != patch.build_id:
            return f"{mapping.path} has build-id {now or 'none'}, not {patch.build_id}: nothing written"
    return ""
