"""`sampler stack`: where every thread of a process is, right now (issue 35).

This first part reads what the kernel shows of each thread, from /proc, without stopping or
tracing anything: its name, state, the system call it waits in and its arguments, its wait
channel, and its kernel stack where the host lets root read it (/proc/PID/task/TID/stack: root
only, on a kernel built with CONFIG_STACKTRACE; else each thread says it is not readable). The
user stack (unwinding by CFI, frame pointers and Go's pclntab; goroutines) is not read yet: each
thread says so, in text and in JSON (``frames``: null).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sampler.printable import printable
from sampler.target import procfs
from sampler.target.threads import Thread, threads_of

NOT_UNWOUND = "user stack: not read yet (sampler stack gives the kernel's side of each thread for now)"


def report(pids: Sequence[int], out_format: str = "text") -> str:
    """Every thread of each process, as text (gdb's `thread apply all bt` order) or JSON Lines
    (one object per process)."""
    processes = [(pid, procfs.comm(pid), threads_of(pid)) for pid in pids]
    if out_format == "json":
        return "".join(json.dumps(_record(pid, name, threads), separators=(",", ":")) + "\n"
                       for pid, name, threads in processes)
    return "\n".join(_text(pid, name, threads) for pid, name, threads in processes)


def _record(pid: int, name: str, threads: list[Thread]) -> dict[str, Any]:
    return {"pid": pid, "name": name, "threads": [{
        "tid": t.tid, "name": t.name, "state": t.state,
        "syscall": None if t.syscall is None else {
            "name": t.syscall.name, "number": t.syscall.number, "arguments": list(t.syscall.arguments),
            "running": t.syscall.running, "shown": str(t.syscall)},
        "wchan": t.wchan, "kernel": list(t.kernel) if t.kernel is not None else None,
        "frames": None} for t in threads], "goroutines": None}


def _text(pid: int, name: str, threads: list[Thread]) -> str:
    lines = [f"Process {pid} ({printable(name)}): {len(threads)} thread(s)"]
    for t in threads:
        call = "system call not readable" if t.syscall is None else str(t.syscall)
        wait = f", waiting in {printable(t.wchan)}" if t.wchan else ""
        lines.append("")
        lines.append(f'Thread {t.tid} "{printable(t.name)}" state {t.state}: {call}{wait}')
        if t.kernel:
            lines += [f"  kernel #{i} {printable(frame)}" for i, frame in enumerate(t.kernel)]
        elif t.kernel is None:
            lines.append("  kernel stack: not readable on this host")
        lines.append(f"  {NOT_UNWOUND}")
    return "\n".join(lines) + "\n"
