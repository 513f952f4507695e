"""Putting back what an earlier run (or a killed debugger) left in a process's code.

From the journal (journal.py): the bytes sampler patched, with their originals, each put
back only into the code it was taken from (patches.py).
From the program file: every int3 in the program's code that the file does not have,
for when a debugger was killed with its own breakpoints in the target (sampler does
not know their original bytes; the file does).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sampler.errors import AlreadyTraced, JournalError, SamplerError, UntrustedJournal
from sampler.safety import journal, patches, semaphores
from sampler.target import procfs

INT3 = 0xCC


@dataclass(frozen=True)
class Repair:
    pid: int
    restored: int
    """Bytes put back."""
    note: str
    problem: bool = False
    """The entry was bad or its bytes could not all be put back (said to the user once)."""


def repair(pid: int | None = None, skip_traced: bool = False, hold: patches.Holder | None = None,
           count_out: bool = True) -> list[Repair]:
    """Put back what earlier runs left patched: for ``pid``, or every entry when None.

    An entry whose process is gone, or whose PID now belongs to another process
    (another start time), is dropped without touching anything. With ``skip_traced``,
    a process that is traced right now (a sampler may still own it) is left alone.
    A byte whose code is not the code it was taken from (the process ran another program
    since: another file, offset, build-id or bytes around) is not written. A malformed or
    unreadable entry, or one whose bytes cannot (or must not) be put back, is said
    once in the result and removed: it never blocks a later attach. A folder or file
    that is not the user's own raises JournalError and nothing is touched. ``hold`` stops a
    process's threads for an in-process probe's jump to go back (without it, a jump stays). Without
    ``count_out`` the entry's USDT semaphores are dropped, not counted out (the guardian counted out
    those it knew of already: a counter taken off twice would undo another reader's count).
    """
    results: list[Repair] = []
    with journal.open_folders() as folders:
        for folder in folders:
            results += _repair_folder(folder, pid, skip_traced, hold, count_out)
    return results


def _repair_folder(folder: int, pid: int | None, skip_traced: bool, hold: patches.Holder | None,
                   count_out: bool = True) -> list[Repair]:
    results = []
    for name in journal.entry_names(folder):
        if pid is not None and not name.startswith(f"{pid}-"):
            continue
        try:
            entry = journal.parse_entry(name, journal.read_entry(folder, name))
        except UntrustedJournal:
            raise
        except JournalError as e:
            journal.remove_entry(folder, name)
            results.append(Repair(pid or 0, 0, f"{e.message}: entry removed", problem=True))
            continue
        if pid is not None and entry.pid != pid:
            continue
        if procfs.start_time(entry.pid) != entry.start_time:
            journal.remove_entry(folder, name)
            results.append(Repair(entry.pid, 0, "process gone or PID reused: entry dropped"))
            continue
        if skip_traced and procfs.traced(entry.pid):
            results.append(Repair(entry.pid, 0, "traced right now (a sampler may own it): left alone"))
            continue
        restored, problem = patches.restore_checked(entry.pid, entry.patches, hold)
        journal.remove_entry(folder, name)  # (first: a semaphore is never counted out twice)
        counted, not_counted = semaphores.count_out_checked(entry.pid, entry.semaphores if count_out else {})
        problem = "; ".join(p for p in (problem, not_counted) if p)
        note = f"{restored} byte(s) restored" + (f", {counted} USDT semaphore(s) counted out" if counted else "")
        if problem:
            note += f"; {problem}: entry removed"
        results.append(Repair(entry.pid, restored, note, problem=bool(problem)))
    return results


CHUNK = 1 << 20
INT3_BYTE = bytes([INT3])


def refuse_if_traced(pid: int) -> None:
    """``sampler repair --pid``: a process still traced is left to its tracer (AlreadyTraced)."""
    tracer = procfs.tracer_pid(pid)
    if tracer:
        raise AlreadyTraced(f"process {pid} is traced by PID {tracer}: a sampler may still be running",
                            "stop that sampler first; it restores its bytes itself")


def restore_code(pid: int) -> int:
    """Put back, from the program file, every int3 in the program's code that the file does not have.

    Returns the bytes restored (0 when the process is gone or not ours to write).
    """
    restored = 0
    try:
        exe = procfs.exe_path(pid)
        # the file even in another mount namespace; only what is mapped is read (a program
        # file may claim a sparse tail of many GB)
        with open(f"/proc/{pid}/exe", "rb") as f, \
                os.fdopen(procfs.open_mem(pid, writable=True), "r+b", buffering=0) as mem:
            for mapping in procfs.maps(pid):
                if not mapping.executable or mapping.path != exe:
                    continue
                for start in range(mapping.start, mapping.end, CHUNK):  # a chunk at a time: bounded memory
                    mem.seek(start)
                    code = mem.read(min(CHUNK, mapping.end - start))
                    f.seek(mapping.offset + start - mapping.start)
                    binary = f.read(len(code))
                    index = code.find(INT3_BYTE)
                    while index >= 0:
                        if index < len(binary) and binary[index] != INT3:
                            mem.seek(start + index)
                            mem.write(binary[index:index + 1])
                            restored += 1
                        index = code.find(INT3_BYTE, index + 1)
    except (OSError, SamplerError):
        pass  # gone, or not ours to write
    return restored
