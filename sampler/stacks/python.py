"""A CPython process's threads as Python: each thread's Python frames beside its native ones,
and the two merged (--native), as py-spy does: each native _PyEval_EvalFrameDefault is the
Python frames that call of the eval loop runs (3.8-3.10: one; 3.11 and later: from an entry frame
in, interpreter.PyFrame.entry).
"""

from __future__ import annotations

from sampler.python.interpreter import PyFrame, PyThread
from sampler.unwind.frames import Frame, Stack

EVAL = "_PyEval_EvalFrameDefault"


def groups(frames: list[PyFrame]) -> list[list[PyFrame]]:
    """The Python frames (innermost first) split by the call of the eval loop that runs them."""
    found: list[list[PyFrame]] = [[]]
    for frame in frames:
        found[-1].append(frame)
        if frame.entry:
            found.append([])
    return [group for group in found if group]


def is_eval(frame: Frame) -> bool:
    name = frame.function or ""
    return not frame.inlined and (name == EVAL or name.startswith(EVAL + "."))


def merged(stack: Stack | None, thread: PyThread) -> list[Frame | PyFrame]:
    """Native frames with each eval loop's frame replaced by the Python frames it runs (innermost
    first). Python frames left over when the native stack ends short go last (they are outermost)."""
    pending = groups(thread.frames)
    out: list[Frame | PyFrame] = []
    for frame in stack.frames if stack is not None else []:
        if is_eval(frame) and pending:
            out += pending.pop(0)
        else:
            out.append(frame)
    for group in pending:
        out += group
    return out


def label(frame: PyFrame) -> str:
    """A Python frame in a folded stack or a flame graph: ``function (file:line)``, as py-spy's."""
    return f"{frame.function} ({frame.file}:{frame.line})".replace(";", ":")


def folded(stack: Stack | None, thread: PyThread | None, native: bool) -> str | None:
    """The folded form (outermost first) of a thread's Python stack, merged with its native one
    with ``native``; None when the thread runs no Python."""
    if thread is None or not thread.frames:
        return None
    if not native:
        return ";".join(label(frame) for frame in reversed(thread.frames))
    names = [label(f) if isinstance(f, PyFrame) else
             (f.name if f.function is not None or f.signal else f"[{f.module or 'anon'}]").replace(";", ":")
             for f in merged(stack, thread)]
    return ";".join(reversed(names))
