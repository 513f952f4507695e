"""gdb's `thread apply all bt` of a process, parsed, and compared with `sampler stack --format json`.

The comparison is the issue's: for every thread, the functions gdb names appear in sampler's stack
in the same order. A frame gdb gives an address for (the first frame of each physical frame, an inlined
function's if one is there, unless it is the innermost frame at the start of a line) must be
a frame of sampler's with that very address; a frame without one, a frame of sampler's with
the same name (gdb's internal aliases of glibc's functions,
``__GI___clock_nanosleep`` and ``__clock_nanosleep``, name what sampler calls ``clock_nanosleep``).
gdb's ``??`` frames are not compared (gdb names nothing there); sampler may name more.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass

_THREAD = re.compile(r"^Thread \d+ \((?:Thread 0x[0-9a-f]+ )?\(?LWP (\d+)\)?")
_FRAME = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?(.+?) \(")


@dataclass
class GdbFrame:
    index: int
    pc: int | None
    name: str


def gdb_stacks(pid: int) -> dict[int, list[GdbFrame]]:
    """Every thread's frames as gdb prints them (the process stopped by gdb's attach, let go at its detach)."""
    out = subprocess.run(["gdb", "-q", "-batch", "-nx", "-p", str(pid), "-ex", "set pagination off",
                          "-ex", "thread apply all bt"], capture_output=True, text=True, timeout=120).stdout
    stacks: dict[int, list[GdbFrame]] = {}
    current: list[GdbFrame] | None = None
    for line in out.splitlines():
        thread = _THREAD.match(line)
        if thread:
            current = stacks.setdefault(int(thread.group(1)), [])
            continue
        frame = _FRAME.match(line)
        if frame and current is not None:
            current.append(GdbFrame(int(frame.group(1)), int(frame.group(2), 16) if frame.group(2) else None,
                                    frame.group(3).strip()))
    return stacks


def sampler_stacks(stdout: str) -> dict[int, list[dict[str, object]]]:
    [process] = [json.loads(line) for line in stdout.splitlines()]
    return {thread["tid"]: thread["frames"] or [] for thread in process["threads"]}


def plain(name: str) -> str:
    """A function's name without glibc's internal prefixes and suffixes, or C++'s qualification, or
    the compiler's suffixes of a symbol (``time_sleep.lto_priv.0``: DWARF, which gdb reads, names it
    ``time_sleep``)."""
    name = name.split("@")[0].rsplit("::", 1)[-1]
    name = re.sub(r"(\.(lto_priv|constprop|isra|part|cold)(\.\d+)?)+$", "", name)
    while True:
        shorter = re.sub(r"^(_|GI_|libc_)", "", name)
        if shorter == name:
            break
        name = shorter
    return re.sub(r"(_impl|_internal|64)$", "", name)


def compare(gdb: dict[int, list[GdbFrame]], ours: dict[int, list[dict[str, object]]]) -> list[str]:
    """What differs, one line each: [] when every frame gdb names is in sampler's stack, in order."""
    problems = []
    assert set(gdb) == set(ours), f"threads differ: gdb {sorted(gdb)}, sampler {sorted(ours)}"
    for tid, frames in gdb.items():
        mine = ours[tid]
        at = 0
        for frame in frames:
            if frame.name.startswith("??"):
                continue
            found = None
            for k in range(at, len(mine)):
                candidate = mine[k]
                same_pc = frame.pc is not None and candidate["pc"] == frame.pc  # (gdb gives an inlined
                # function the pc of its frame, and the function it is inlined into none)
                same_name = frame.pc is None and plain(str(candidate["function"] or "")) == plain(frame.name)
                if same_pc or same_name:
                    found = k
                    break
            if found is None:
                shown = [(f["function"], hex(int(str(f["pc"])))) for f in mine]
                problems.append(f"thread {tid}: gdb's #{frame.index} {frame.name} "
                                f"({hex(frame.pc) if frame.pc else 'no pc'}) is not in sampler's stack "
                                f"after its frame #{at}: {shown}")
                break
            at = found + 1
    return problems


def named(gdb: dict[int, list[GdbFrame]], ours: dict[int, list[dict[str, object]]]) -> tuple[int, int]:
    """Of the frames gdb leaves as ``??`` at an address sampler's stack has too (gdb's unwinding
    of a program it cannot read goes astray after a frame or two: its other ``??`` frames are not
    frames), how many sampler names, and how many there are."""
    unnamed = sampler_named = 0
    for tid, frames in gdb.items():
        by_pc = {f["pc"]: f for f in ours.get(tid, [])}
        for frame in frames:
            mine = by_pc.get(frame.pc)
            if frame.name.startswith("??") and mine is not None:
                unnamed += 1
                sampler_named += mine["function"] not in (None, "??")
    return sampler_named, unnamed
