"""`sampler stack` as text (read as gdb's `thread apply all bt`) and as JSON Lines (one object per
process)."""

from __future__ import annotations

import json
from typing import Any

from sampler.printable import printable
from sampler.python.interpreter import PyFrame, PyThread
from sampler.stacks.collect import ProcessStacks, ThreadStack
from sampler.stacks.python import merged
from sampler.target.threads import Thread
from sampler.unwind.frames import Frame
from sampler.unwind.goroutines import Goroutine


def as_json(process: ProcessStacks, native: bool = False) -> str:
    """``native`` is for the text; the JSON always carries both a thread's native ``frames`` and,
    for CPython, its ``python`` frames."""
    record = {"pid": process.pid, "name": process.name, "python": process.python,
              "threads": [_thread_record(t) for t in process.threads],
              "python_threads_unmatched": [_python_thread_record(t) for t in process.python_unmatched],
              "goroutines": None if process.goroutines is None else [_goroutine_record(g) for g in process.goroutines],
              "notes": process.notes, "took_s": round(process.took_s, 4)}
    return json.dumps(record, separators=(",", ":")) + "\n"


def _goroutine_record(g: Goroutine) -> dict[str, Any]:
    created = None if g.created_by is None else dict(zip(("function", "file", "line"), g.created_by))
    return {"goid": g.goid, "status": g.status, "wait_reason": g.wait_reason, "thread": g.thread,
            "frames": None if g.stack is None else [_frame_record(f) for f in g.stack.frames],
            "ended": None if g.stack is None else g.stack.ended, "created_by": created, "torn": g.torn}


def failed(pid: int, why: str, out_format: str) -> str:
    """A process that could not be read, among several."""
    if out_format == "json":
        return json.dumps({"pid": pid, "error": why}, separators=(",", ":")) + "\n"
    return f"Process {pid}: not read: {printable(why)}\n"


def _thread_record(found: ThreadStack) -> dict[str, Any]:
    t = found.thread
    return {
        "tid": t.tid, "name": t.name, "state": t.state,
        "syscall": None if t.syscall is None else {
            "name": t.syscall.name, "number": t.syscall.number, "arguments": list(t.syscall.arguments),
            "running": t.syscall.running, "shown": str(t.syscall)},
        "wchan": t.wchan, "kernel": list(t.kernel) if t.kernel is not None else None,
        "read": found.how, "stopped_us": None if found.stopped_us is None else round(found.stopped_us, 1),
        "frames": None if found.stack is None else [_frame_record(f) for f in found.stack.frames],
        "ended": None if found.stack is None else found.stack.ended,
        **({} if found.python is None else _python_thread_record(found.python))}


def _python_thread_record(t: PyThread) -> dict[str, Any]:
    return {"python": [_python_frame_record(f) for f in t.frames],
            "python_thread": {"name": t.name, "ident": t.thread_id, "holds_gil": t.holds_gil, "torn": t.torn,
                              "problem": t.problem}}


def _python_frame_record(f: PyFrame) -> dict[str, Any]:
    return {"function": f.function, "file": f.file, "line": f.line, "name": f.name}


def _frame_record(frame: Frame) -> dict[str, Any]:
    return {"pc": frame.pc, "function": frame.name if frame.function is not None or frame.signal else None,
            "offset": frame.offset, "module": frame.module, "file": frame.file, "line": frame.line,
            "inlined": frame.inlined, "how": frame.how}


def as_text(process: ProcessStacks, native: bool = False) -> str:
    """A CPython's threads show their Python frames (with ``native``, merged with the native ones);
    a thread that runs no Python, its native frames."""
    python = f", CPython {process.python}" if process.python else ""
    lines = [f"Process {process.pid} ({printable(process.name)}){python}: {len(process.threads)} thread(s)"]
    for found in process.threads:
        lines.append("")
        lines += _thread_text(found, native)
    for t in process.python_unmatched:
        lines += ["", f"Python thread {_python_name(t)} (its kernel thread not known):"]
        lines += [_python_frame_text(i, f) for i, f in enumerate(t.frames)]
    if process.goroutines is not None:
        lines += ["", f"{len(process.goroutines)} goroutine(s)"]
        for g in process.goroutines:
            lines += ["", *_goroutine_text(g)]
    lines += [f"note: {printable(note)}" for note in process.notes]
    return "\n".join(lines) + "\n"


def _python_name(t: PyThread) -> str:
    name = f'"{printable(t.name)}"' if t.name is not None else f"{t.thread_id:#x}"
    return name + (", holds the GIL" if t.holds_gil else "")


def _python_frame_text(index: int, frame: PyFrame) -> str:
    return f"#{index:<3}{'[python]':18} {printable(frame.function)} at {printable(frame.file)}:{frame.line}"


def _thread_text(found: ThreadStack, native: bool = False) -> list[str]:
    t = found.thread
    lines = [f'Thread {t.tid} "{printable(t.name)}" state {t.state}: {_call(t)}; {found.how}']
    py = found.python
    if py is not None:
        lines.append(f"  Python thread {_python_name(py)}" + (" (it ran while it was read: torn)" if py.torn else ""))
    if py is not None and py.frames and not native:
        lines += [_python_frame_text(i, frame) for i, frame in enumerate(py.frames)]
        if py.problem:
            lines.append(f"    (the Python stack ends here: {printable(py.problem)})")
    elif py is not None and py.frames:
        lines += [_python_frame_text(i, f) if isinstance(f, PyFrame) else _frame_text(i, f)
                  for i, f in enumerate(merged(found.stack, py))]
        if found.stack is not None and found.stack.ended:
            lines.append(f"    (the native stack ends here: {printable(found.stack.ended)})")
    elif found.stack is not None:
        lines += [_frame_text(i, frame) for i, frame in enumerate(found.stack.frames)]
        if found.stack.ended:
            lines.append(f"    (the stack ends here: {printable(found.stack.ended)})")
    if t.kernel:
        lines += [f"  kernel #{i} {printable(frame)}" for i, frame in enumerate(t.kernel)]
    elif t.kernel is None:
        lines.append("  kernel stack: not readable on this host")
    return lines


def _goroutine_text(g: Goroutine) -> list[str]:
    """As a Go panic prints one: ``goroutine 6 [chan receive]:``, its frames, ``created by``."""
    state = g.wait_reason or g.status
    on = f", on thread {g.thread}" if g.thread is not None else ""
    lines = [f"goroutine {g.goid} [{printable(state)}]{on}:" + (" (it ran while it was read: torn)" if g.torn else "")]
    if g.stack is not None:
        lines += [_frame_text(i, frame) for i, frame in enumerate(g.stack.frames)]
        if g.stack.ended:
            lines.append(f"    (the stack ends here: {printable(g.stack.ended)})")
    if g.created_by is not None:
        function, file, line = g.created_by
        lines.append(f"created by {printable(function or '??')}" + (f" at {printable(file)}:{line}" if file else ""))
    return lines


def _call(t: Thread) -> str:
    call = "system call not readable" if t.syscall is None else str(t.syscall)
    return call + (f", waiting in {printable(t.wchan)}" if t.wchan else "")


def _frame_text(index: int, frame: Frame) -> str:
    if frame.signal:
        return f"#{index:<3}<signal handler called>"
    name = printable(frame.name)
    if frame.offset is not None and not frame.inlined:
        name += f"+{frame.offset:#x}"
    where = f" at {printable(frame.file)}:{frame.line}" if frame.file is not None else ""
    module = f" ({printable(frame.module)})" if frame.module else ""
    address = "                  " if frame.inlined else f"{frame.pc:#018x}"
    inlined = " [inlined]" if frame.inlined else ""
    return f"#{index:<3}{address} in {name}{inlined}{module}{where}"
