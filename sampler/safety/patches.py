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

An in-process probe's jump (issue 36) is five such patches of one group: each byte says what
sampler wrote there, and the five go back at once, only with the process's threads stopped (a
``Holder`` the caller hands in, which knows ptrace: this layer does not), and only where all five
are still the jump and the code around is as it was. A dead sampler's jump keeps the target
running (into a trampoline that stays mapped), so unlike an int3 it is put back at leisure.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Protocol

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
    written: int = INT3
    """What sampler wrote there: an int3, or a byte of an in-process probe's jump."""
    group: int = 0
    """The first address of the bytes written at once with it (an in-process probe's 5-byte jump,
    put back only at once and with the process's threads stopped); 0: a byte of its own."""

    @property
    def placed(self) -> bool:
        """Whether it says which file and offset it is in."""
        return self.offset >= 0

    def to_json(self) -> dict[str, object]:
        return {"byte": self.original, "before": self.before.hex(), "after": self.after.hex(),
                "device": self.device, "inode": self.inode, "offset": self.offset, "build_id": self.build_id,
                "written": self.written, "group": self.group}

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
        inode, offset, group = value.get("inode"), value.get("offset"), value.get("group", 0)
        if not isinstance(inode, int) or not isinstance(offset, int) or len(before) > CONTEXT \
                or len(after) > CONTEXT or inode < 0 or not isinstance(group, int) or not 0 <= group < 1 << 64:
            raise ValueError("a patch's place is out of range")
        return Patch(_byte(value.get("byte")), before, after, _text(value, "device"), inode, offset, build_id,
                     _byte(value.get("written", INT3)), group)


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


class Holder(Protocol):
    """Every thread of a process stopped for the time of a ``with`` (process/freeze.py): what a
    multi-byte patch needs to go back (a thread running through half-written bytes would run garbage)."""

    def __call__(self, pid: int) -> AbstractContextManager[object]: ...


def put_back_through(fd: int, patches: dict[int, Patch], held: AbstractContextManager[object] | None = None,
                     ) -> tuple[int, list[str]]:
    """Put each original byte back through ``fd`` (a /proc/PID/mem descriptor) where sampler's byte
    stands and the bytes around are as they were (positions of the other patches aside):
    (bytes restored, 'ADDRESS: reason' of each not put back for a reason to say).

    The bytes of one multi-byte patch (an in-process probe's jump) go back at once, only inside
    ``held`` (the process's threads stopped: ``nullcontext()`` for a forked child stopped at its
    first instruction); without it they are not written, and the reason says so."""
    restored = 0
    failed: list[str] = []
    groups: dict[int, dict[int, Patch]] = {}
    for address, patch in patches.items():
        if patch.group:
            groups.setdefault(patch.group, {})[address] = patch
            continue
        reason = _unchanged_around(fd, address, bytes([patch.original]), bytes([patch.written]), patch, patches)
        if reason is None:
            continue  # back already, or gone with the memory
        if reason:
            failed.append(f"{address:#x}: {reason}")
            continue
        try:
            if os.pwrite(fd, bytes([patch.original]), address) == 1:
                restored += 1
        except OSError as e:
            failed.append(f"{address:#x}: {e.strerror}")
    if groups:
        if held is None:
            failed += [f"{group:#x}: an in-process probe's jump goes back only with the process's threads stopped "
                       "(sampler repair --pid does it): nothing written" for group in groups]
        else:
            with held:
                for group, theirs in groups.items():
                    got, why = _put_back_group(fd, theirs, patches)
                    restored += got
                    if why:
                        failed.append(f"{group:#x}: {why}")
    return restored, failed


def _unchanged_around(fd: int, address: int, original: bytes, written: bytes, first: Patch,
                      patches: dict[int, Patch], last: Patch | None = None) -> str | None:
    """'' when ``written`` stands at ``address`` with the bytes around as ``first`` (and ``last``,
    for several bytes) saw them; None when the original stands there (or the memory is gone); else
    why nothing may be written."""
    last = last or first
    low = address - len(first.before)
    size = len(first.before) + len(written) + len(last.after)
    try:
        now = os.pread(fd, size, low)
    except OSError as e:  # unmapped since (a library closed), or the process is going
        return e.strerror or "unreadable"
    here = now[len(first.before):len(first.before) + len(written)]
    if len(now) != size or here == original or original == written or (here != written and len(written) == 1):
        return None  # (an int3 gone: put back already, or by another program's code)
    if here != written:
        return "the bytes there are neither what sampler wrote nor the original: nothing written"
    was = first.before + written + last.after
    if any(a != b and low + i not in patches for i, (a, b) in enumerate(zip(now, was))):
        return "the code around it is not what sampler patched: nothing written"
    return ""


def _put_back_group(fd: int, theirs: dict[int, Patch], patches: dict[int, Patch]) -> tuple[int, str]:
    """The bytes of one multi-byte patch back at once: (bytes restored, why not or '')."""
    addresses = sorted(theirs)
    if addresses != list(range(addresses[0], addresses[0] + len(addresses))):
        return 0, "its bytes are not one run: nothing written"
    original = bytes(theirs[a].original for a in addresses)
    written = bytes(theirs[a].written for a in addresses)
    reason = _unchanged_around(fd, addresses[0], original, written, theirs[addresses[0]], patches,
                               theirs[addresses[-1]])
    if reason is None or reason:
        return 0, reason or ""
    try:
        return (len(original), "") if os.pwrite(fd, original, addresses[0]) == len(original) else (0, "short write")
    except OSError as e:
        return 0, e.strerror or "not written"


def put_back_into(pid: int, patches: dict[int, Patch], hold: Holder | None = None) -> tuple[int, str]:
    """``put_back_through`` a descriptor opened now (a child stopped at its first instruction,
    which cannot exec before it is let go, nor run: its one thread is stopped; ``hold`` stops it
    for a jump's bytes when it may be running): (bytes restored, what failed or '')."""
    try:
        fd = procfs.open_mem(pid, writable=True)
    except OSError as e:
        return 0, f"cannot open the memory of process {pid}: {e.strerror}"
    try:
        jumps = hold is not None and any(patch.group for patch in patches.values())
        restored, failed = put_back_through(fd, patches, hold(pid) if hold is not None and jumps else nullcontext())
    finally:
        os.close(fd)
    return restored, f"could not put back {', '.join(failed)}" if failed else ""


def open_checked(pid: int) -> tuple[int, list[procfs.Mapping]] | str:
    """A writable /proc/PID/mem descriptor (the caller closes it) and the mappings read after it was
    opened (an exec after the open is harmless: the descriptor holds the old memory); else why not."""
    try:
        fd = procfs.open_mem(pid, writable=True)
    except OSError as e:
        return f"cannot open the memory of process {pid}: {e.strerror}"
    try:
        return fd, procfs.maps(pid)
    except ProcessNotFound:
        os.close(fd)
        return f"process {pid} is gone"


def restore_checked(pid: int, patches: dict[int, Patch], hold: Holder | None = None) -> tuple[int, str]:
    """For a journal's patches of process ``pid``, found by PID alone: put back only the bytes
    whose mapping is still the same file at the same offset, with the same build-id and the
    same bytes around. (bytes restored, why each other was not put back, or '')."""
    opened = open_checked(pid)
    if isinstance(opened, str):
        return 0, opened
    fd, mappings = opened
    try:
        placed: dict[int, Patch] = {}
        refused: list[str] = []
        build_ids: dict[tuple[str, int], str | None] = {}
        for address, patch in patches.items():
            why = moved(pid, mappings, address, patch, build_ids)
            if why:
                refused.append(f"{address:#x}: {why}")
            else:
                placed[address] = patch
        jumps = any(patch.group for patch in placed.values())
        restored, failed = put_back_through(fd, placed, hold(pid) if jumps and hold is not None else None)
    finally:
        os.close(fd)
    problems = refused + failed
    return restored, f"not put back: {'; '.join(problems)}" if problems else ""


def moved(pid: int, mappings: list[procfs.Mapping], address: int, patch: Patch,
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
