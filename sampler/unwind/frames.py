"""A frame of a user stack, and a stack: what `sampler stack` prints and a ``ustack`` folds."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Frame:
    pc: int
    """Run-time address: the thread's pc for the innermost frame, a return address for its callers."""
    function: str | None = None
    offset: int | None = None
    """From the function's first instruction."""
    module: str | None = None
    """File name of the module mapped at pc (``[vdso]`` for the kernel's)."""
    file: str | None = None
    line: int | None = None
    inlined: bool = False
    """A function the compiler inlined into the frame below it in the list (gdb's inlined frames)."""
    how: str = "registers"
    """How it was found: "registers" (the innermost), "cfi", "frame pointer", "go" (pclntab), "signal"
    (the frame below a signal frame), "tail call" (gdb's: from DWARF's call sites)."""
    signal: bool = False
    """The kernel's signal frame (gdb's ``<signal handler called>``)."""

    @property
    def name(self) -> str:
        """The function, or ``??`` as gdb prints one it cannot name."""
        if self.signal:
            return "<signal handler called>"
        return self.function if self.function is not None else "??"


@dataclass
class Stack:
    frames: list[Frame] = field(default_factory=list)
    ended: str | None = None
    """Why the stack stops short of its outermost frame (None: it was unwound to the end)."""
    short_of_registers: bool = False
    """It ended for a register that was not read (the thread was not stopped): stopped, it may go on."""

    def folded(self, limit: int | None = None, unknown: bool = False) -> str:
        """Outermost first, innermost last, ``;`` between (flamegraph.pl's folded form); the
        innermost ``limit`` frames when given. ``unknown``: a frame without a name is its module
        in brackets (``[node]``; ``[anon]``: code of no file, JIT), so that a profile does not
        merge every unknown frame into one ``??``."""
        names = [(frame.name if frame.function is not None or frame.signal or not unknown
                  else f"[{frame.module or 'anon'}]").replace(";", ":") for frame in self.frames]
        if limit is not None:
            names = names[:limit]
        return ";".join(reversed(names))
