"""Python functions as probes (``--at py:module.function``): where the interpreter starts running a
frame, taken only for that function's code object.

The native place: 3.8-3.10 enter _PyEval_EvalFrameDefault for every frame they run (its frame in
the second argument register, the first in 3.8); 3.11 and later run a Python-to-Python call inside
the same call of the eval loop and start every frame at its label ``start_frame``, whose address
the interpreter's DWARF gives (pyenv's builds, Debian's with python3.11-dbg), where the thread's
current frame (its thread state's) is the new one. Every Python call of the process reaches that
place. In ``sampler trace`` (--probe auto, the default) a jump there runs a test in the target that
reads the frame's code object and lets only this function's calls go on to an int3 (filters.py;
docs/cost.md); elsewhere (``attach``, --probe int3, a place no jump can take) the int3 is at the place
itself and sampler lets go at once every hit whose frame runs another code object, which costs every
Python call of the process a stop. A generator or coroutine of the function is a hit each time it is
resumed, as it starts its frame again.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sampler import notice
from sampler.debuginfo.dies import descendants, name_of, origin
from sampler.debuginfo.dwarf import Debug, Function
from sampler.debuginfo.locate import Place
from sampler.debuginfo.modules import Modules
from sampler.errors import LocationNotFound, UnsupportedTarget
from sampler.language import pyexpr
from sampler.python.codes import code_at
from sampler.python.interpreter import Interpreter
from sampler.python.objects import Read, Unreadable

EVAL = "_PyEval_EvalFrameDefault"
GENERATOR_FLAGS = 0x20 | 0x80 | 0x200
"""CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR."""
OWNED_BY_THREAD = 0
OWNED_BY_CSTACK = 3
"""A frame's owner (3.12, 3.13): the eval loop's entry frame, on the C stack, before a frame started from C."""


@dataclass
class PyProbe:
    """One Python function's probe: its code object, and how a hit finds the frame it starts."""

    interpreter: Interpreter
    code: int
    name: str
    frame_register: str | None
    """3.8-3.10, and the eval loop's entry in 3.11 and 3.12: the argument register that holds the frame;
    None: the thread state's current frame."""
    entry_counts: bool = False
    """3.11 and later: the eval loop's entry is a place of this probe too, so a start_frame's (RESUME's) hit
    of a frame that entry started (from C) is the same start, not counted again: the frame says so itself
    (3.11: its ``is_entry``; 3.12 and later: the frame before it is the eval loop's own entry frame, owned
    by the C stack). Debian's 3.11 goes on from its entry without start_frame; pyenv's builds pass it."""
    at_entry: bool = False
    """This place is the eval loop's entry, ahead of start_frame or RESUME (3.11 and later)."""
    _generator: bool | None = field(default=None, init=False, repr=False)

    def started(self, registers: Any, tid: int) -> int | None:
        """The frame of this probe's function that the hit thread starts, or None: another function's,
        the frame a generator function's call makes only to make its generator (3.11, 3.12: RETURN_GENERATOR;
        the generator starts when it first runs), or a start seen at the eval loop's entry already."""
        frame = self.frame(registers, tid)
        code = self.frame_code(frame)
        if code != self.code:
            return None
        interpreter = self.interpreter
        if self.entry_counts and not self.at_entry and self._started_from_c(frame):
            return None
        if interpreter.version >= (3, 11) and self.generator and \
                interpreter.objects.read(frame + interpreter.layout["iframe.owner"], 1)[0] == OWNED_BY_THREAD:
            return None
        return frame

    def _started_from_c(self, frame: int) -> bool:
        """The frame was started by the eval loop's entry (called from C), not by a Python call inside it."""
        objects, layout = self.interpreter.objects, self.interpreter.layout
        if self.interpreter.version < (3, 12):
            return bool(objects.read(frame + layout["iframe.is_entry"], 1)[0])
        previous = objects.word(frame + layout["iframe.previous"])
        return previous != 0 and objects.read(previous + layout["iframe.owner"], 1)[0] == OWNED_BY_CSTACK

    @property
    def generator(self) -> bool:
        """The function is a generator, coroutine or async generator (its code's flags, read once)."""
        if self._generator is None:
            objects, layout = self.interpreter.objects, self.interpreter.layout
            flags = int.from_bytes(objects.read(self.code + layout["code.flags"], 4), "little")
            self._generator = bool(flags & GENERATOR_FLAGS)
        return self._generator

    def frame(self, registers: Any, tid: int) -> int:
        """The frame the thread starts at this hit (its PyFrameObject or _PyInterpreterFrame)."""
        if self.frame_register is not None:
            return int(getattr(registers, self.frame_register))
        interpreter = self.interpreter
        for tstate in interpreter.thread_states(interpreter.main_interpreter()):
            if interpreter.objects.field(tstate, "tstate.native_thread_id") & 0xFFFFFFFF == tid:
                return interpreter.top_frame(tstate)
        raise Unreadable(f"no Python thread state is thread {tid}'s")

    @property
    def code_offset(self) -> int:
        """Where a frame holds its code object (a PyFrameObject's before 3.11, a _PyInterpreterFrame's after)."""
        return self.interpreter.layout["frame.code" if self.interpreter.version < (3, 11) else "iframe.code"]

    def frame_code(self, frame: int) -> int:
        return self.interpreter.objects.word(frame + self.code_offset)

    def locals(self, frame: int) -> dict[str, int]:
        """The frame's arguments and locals by name (their objects; 0: not set yet)."""
        interpreter = self.interpreter
        objects = interpreter.objects
        lay = interpreter.layout
        if interpreter.version < (3, 11):
            names_tuple = objects.field(self.code, "code.varnames")
            start = frame + lay["frame.localsplus"]
        else:
            names_tuple = objects.field(self.code, "code.localsplusnames")
            start = frame + lay["iframe.localsplus"]
        count = objects.signed(names_tuple + lay["var.size"])
        if not 0 <= count <= 4096:
            raise Unreadable(f"a code object of {count} locals: not believed")
        raw_names = objects.read(names_tuple + lay["tuple.items"], 8 * count) if count else b""
        raw_values = objects.read(start, 8 * count) if count else b""
        found = {}
        for i in range(count):
            name = objects.text(int.from_bytes(raw_names[8 * i:8 * i + 8], "little"), 256)
            found[name] = int.from_bytes(raw_values[8 * i:8 * i + 8], "little")
        return found


def resolve(modules: Modules, read: Read, location: str, say: Callable[[str], None] = notice.say
            ) -> list[tuple[Place, PyProbe]]:
    """``py:module.function`` (``py:module.Class.method``) as the native places of its probe; one line
    when the process runs no CPython sampler reads, the function is not there, or the interpreter's
    frame start cannot be found."""
    try:
        interpreter = Interpreter(modules, read)
    except UnsupportedTarget as e:
        raise LocationNotFound(f"--at {location}: {e.message}", e.hint) from None
    written = BY_LINE.match(location.strip())
    if written is not None:
        code, name = _code_at(interpreter, written.group(1), int(written.group(2)), location, say)
    else:
        path = pyexpr.parse(location.strip())
        if path.steps or path.length:
            raise LocationNotFound(f"--at {location}: a function is named by dots alone, or by FILE.py:LINE",
                                   "e.g. --at py:app.handle or --at py:app.py:42")
        code, name = _code_of(interpreter, path.names, location)
    module = interpreter.module
    if interpreter.version < (3, 11):
        symbol = module.function_symbol(EVAL)
        if symbol is None:
            raise LocationNotFound(f"--at {location}: no symbol {EVAL} in {module.path}", "")
        register = "rdi" if interpreter.version == (3, 8) else "rsi"
        addresses = [symbol + module.bias]
        return [(Place(a, module, None, f"py:{name}"), PyProbe(interpreter, code, name, register)) for a in addresses]
    debug, function = dwarf_function(interpreter, EVAL, f"--at {location}", "starts a frame")
    starts = _frame_starts(debug, function, FRAME_STARTS[interpreter.version >= (3, 13)])
    if not starts:
        raise LocationNotFound(f"--at {location}: the DWARF of {module.path} gives no address for {EVAL}'s "
                               "start of a frame", "")
    starts = [a + module.bias for a in starts]
    entry = module.function_symbol(EVAL)
    found = [(Place(a, module, None, f"py:{name}"), PyProbe(interpreter, code, name, None, entry is not None))
             for a in sorted(set(starts))]
    if entry is not None:
        # a frame started from C (a generator resumed by next(), a callback) enters the eval loop; a PGO
        # build can fold that path's start_frame into the entry's own checks (Debian's 3.11: no row of
        # start_frame's lines there, and no generator's run was seen); --latency ends such a run at the
        # eval loop's return (pylatency.py)
        found.append((Place(entry + module.bias, module, None, f"py:{name}"),
                      PyProbe(interpreter, code, name, "rsi", True, at_entry=True)))
    return found


def dwarf_function(interpreter: Interpreter, name: str, where: str, does: str) -> tuple[Debug, Function]:
    """The interpreter's function ``name`` in its DWARF: one line when there is none."""
    module = interpreter.module
    debug = module.debug(remote=False)
    function = debug.function_named(name) if debug is not None else None
    if debug is None or function is None:
        raise LocationNotFound(f"{where}: {module.path} has no DWARF for {name}, where CPython "
                               f"{interpreter.version_text} {does}",
                               "install its debug file (Debian: python3.X-dbg) or give a build with -g")
    return debug, function


def _code_of(interpreter: Interpreter, names: tuple[str, ...], location: str) -> tuple[int, str]:
    objects = interpreter.objects
    try:
        obj = interpreter.named(names)
        kind = objects.type_name(obj)
        if kind == "method":
            obj = objects.field(obj, "method.function")
            kind = objects.type_name(obj)
        if kind in ("classmethod", "staticmethod"):
            obj = objects.word(obj + 16)  # (cm_callable / sm_callable, after the object's header)
            kind = objects.type_name(obj)
        if kind != "function":
            raise LocationNotFound(f"--at {location}: a {kind}, not a Python function", "")
        code = objects.field(obj, "function.code")
        qualname = interpreter.code_info(code)[2] or interpreter.code_info(code)[0]
        return code, qualname
    except Unreadable as e:
        raise LocationNotFound(f"--at {location}: {e}", "check the spelling (a module run as the program, "
                               "`python -m http.server` or a script, is __main__: py:__main__.NAME)") from None


def _code_at(interpreter: Interpreter, file: str, line: int, location: str, say: Callable[[str], None]
             ) -> tuple[int, str]:
    try:
        code, name, first, last = code_at(interpreter, file, line)
    except Unreadable as e:
        hint = "give a line inside a function (its def line is one)" if "holds line" in str(e) else \
            "give the end of the path of a file the program imported (py:app.py:42, py:web/app.py:42)"
        raise LocationNotFound(f"--at {location}: {e}", hint) from None
    if line != first:
        say(f"--at {location}: {name} ({file}:{first}-{last}), where its frame starts (a Python probe is "
                   "its function's start)")
    return code, name


BY_LINE = re.compile(r"^py:(.+\.py):(\d+)$")
"""``py:FILE.py:LINE``."""

FRAME_STARTS = {False: ("start_frame",), True: ("TARGET_RESUME", "TARGET_RESUME_CHECK", "TARGET_INSTRUMENTED_RESUME")}
"""Where a frame starts in the eval loop: 3.11 and 3.12 go to start_frame for every frame they start;
3.13's specialized calls push the frame and go straight to its first instruction, RESUME (or its
specialized and monitored forms), which every function starts with."""


def _frame_starts(debug: Debug, function: Function, labels: tuple[str, ...]) -> list[int]:
    """The labels' addresses (file addresses), and for start_frame where the line after it starts in
    every copy of its code the compiler made (Debian's PGO build of 3.11 has three copies of that code
    and gives the label one of them: two thirds of the calls were missed)."""
    found: set[int] = set()
    starts: set[int] = set()
    pieces = [(f.low, f.high) for f in debug.functions_of(function)]
    for die in descendants(function.die):
        if die.tag != "DW_TAG_label":
            continue
        abstract = origin(die, "DW_AT_abstract_origin")
        label = name_of(die) or name_of(abstract)
        if label not in labels:
            continue
        low = die.attributes.get("DW_AT_low_pc")
        if low is not None:
            found.add(int(low.value))
        if label != "start_frame":
            continue  # (RESUME's handlers: the label alone; the line after it is further in the same code)
        declared = debug.declared_at(die) or (debug.declared_at(abstract) if abstract is not None else None)
        if declared is None:
            continue
        file, line = declared
        for start, end in pieces:
            starts.update(debug.line_starts(function.die, file, line + 1, start, end))
    kept = sorted(found)
    for address in sorted(starts):  # one place a copy: a start close after a label or another start is the
        if not any(0 <= address - at <= ONE_COPY for at in kept):  # same copy's (an inlined call's rows between
            kept.append(address)                                    # its line's): it would count a call twice
    return sorted(kept)


ONE_COPY = 128
"""Bytes within which two starts of start_frame's next line are one copy of its code."""
