"""The CPython interpreter of a process: where its _PyRuntime is, its version and layout, and
what each of its threads runs in Python (frames, innermost first), which one holds the GIL, and the
names the `threading` module gave them.

Found by the symbol _PyRuntime in the program or a loaded library (libpython3.X.so); the version
from Py_Version (3.11 and later) or the file's name (python3.X, libpython3.X.so), else the version
string in its read-only data. Nothing here stops a thread: the caller decides whether the threads
are held while it reads (collect.py).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from sampler.debuginfo.elffile import BadFile
from sampler.debuginfo.modules import Module, Modules
from sampler.errors import UnsupportedTarget
from sampler.process.reads import UnreadableMemory
from sampler.python import layouts
from sampler.python.lines import line_at
from sampler.python.objects import Objects, Read, Unreadable

MAX_THREADS = 4096
NAMES_S = 1.0
READ_BUDGET_S = 10.0
"""How long one collection of every thread's frames may read at most (a stack, a profile's tick): a
target's data can make a walk long (1,024 thread states whose frame points at itself took 30 s); past
it the threads not read say so."""
MAX_TOTAL_FRAMES = 1 << 16
"""Frames of all threads in one collection at most."""
MAX_CODE_BYTES = 64 << 20
"""Bytes of line tables kept for the code objects seen (each up to MAX_TABLE)."""
MAX_FRAMES = 1024
MAX_TABLE = 1 << 20
"""A line table of more bytes than this is not read."""
PTHREAD_TID = 0x2D0
"""glibc's struct pthread: where the thread's own tid is (x86_64, glibc 2.26 and later), for 3.8-3.10,
whose thread states know only their pthread_t; a guess checked against the process's threads."""
CSTACK = 3
"""FRAME_OWNED_BY_CSTACK (3.12 and later): the interpreter's own shim frame, not the program's."""
_PYTHONISH = re.compile(r"python", re.I)
DEBUG_SYMBOLS = ("_Py_RefTotal", "_Py_GetGlobalRefTotal", "_Py_ForgetReference")
"""Symbols only a debug build of CPython has (Py_REF_DEBUG, Py_TRACE_REFS)."""
_NAME = re.compile(r"(?:lib)?python(\d)\.(\d+)([a-z]*)(?:\.so|$)")
_VERSION_TEXT = re.compile(rb"(?<![0-9.])3\.(\d{1,2})\.\d{1,2}(?:(?:a|b|rc)\d{1,2})?\+? \(")


@dataclass
class PyFrame:
    function: str
    """Its qualified name where the version keeps one (3.11 and later: ``Thread.run``), as py-spy
    shows it; else the code's name."""
    file: str
    line: int
    name: str = ""
    """The code's own name (co_name)."""
    entry: bool = False
    """The first frame of a call of the interpreter's eval loop (3.11 and later): the frames until
    the next entry run in one native _PyEval_EvalFrameDefault."""


@dataclass
class PyThread:
    thread_state: int
    thread_id: int
    """threading.get_ident(): the pthread_t."""
    tid: int | None
    """The kernel's thread id; None when it cannot be told."""
    frames: list[PyFrame] = field(default_factory=list)
    holds_gil: bool = False
    name: str | None = None
    problem: str | None = None
    """Why its frames stop short (a pointer that leads nowhere: torn or damaged)."""
    torn: bool = False
    """Read while it ran (--nonblocking), and its innermost frame changed meanwhile."""


class NotPython(UnsupportedTarget):
    pass


class Interpreter:
    """One process's CPython: opened once, its threads read as often as asked."""

    def __init__(self, modules: Modules, read: Read) -> None:
        module, runtime = _find(modules)
        self.module = module
        self.runtime = runtime
        self.version = _version(module, read)
        try:
            self.layout = layouts.layout(self.version, lambda size: read(runtime, size))
        except layouts.Unsupported as e:
            raise UnsupportedTarget(f"{module.path}: {e}", "sampler reads CPython 3.8 to 3.13") from None
        except (UnreadableMemory, Unreadable) as e:
            raise UnsupportedTarget(f"{module.path}: its _PyRuntime cannot be read ({e})", "") from None
        self.objects = Objects(self.version, self.layout, read)
        self._secret(module, read)
        self._code: dict[tuple[int, bytes], tuple[str, str, str | None, int, bytes, int]] = {}
        self._code_bytes = 0
        self._lines: dict[tuple[bytes, int, int], int] = {}
        """Each line table's line at an offset, decoded once (a 1 MiB table took 0.34 s a frame)."""
        self._budget = MAX_TOTAL_FRAMES
        """Frames the collection under way may read yet."""
        self._names: dict[int, str] = {}
        self._names_read = -NAMES_S

    def _secret(self, module: Module, read: Read) -> None:
        """The process's hash secret, so that dicts are probed by hash (checked before it is used)."""
        symbol = module.object_symbol("_Py_HashSecret")
        if symbol is None:
            return
        try:
            raw = read(symbol.address + module.bias, 16)
            modules = self.objects.field(self.main_interpreter(), "interp.modules")
            if modules:
                self.objects.trust_secret((int.from_bytes(raw[:8], "little"), int.from_bytes(raw[8:], "little")),
                                          modules)
        except (Unreadable, UnreadableMemory):
            pass

    @property
    def version_text(self) -> str:
        return f"{self.version[0]}.{self.version[1]}"

    # -- threads ------------------------------------------------------------------

    def main_interpreter(self) -> int:
        interp = self.objects.word(self.runtime + self.layout["runtime.interpreters_head"])
        if not interp:
            raise Unreadable("no interpreter yet (_PyRuntime.interpreters.head is NULL)")
        return interp

    def thread_states(self, interp: int) -> list[int]:
        found: list[int] = []
        seen: set[int] = set()
        tstate = self.objects.field(interp, "interp.threads_head")
        while tstate and len(found) < MAX_THREADS and tstate not in seen:
            found.append(tstate)
            seen.add(tstate)
            tstate = self.objects.field(tstate, "tstate.next")
        return found

    def gil_holder(self, interp: int) -> int | None:
        """The thread state that holds the GIL, None when it is free (or not read)."""
        lay = self.layout
        try:
            gil = self.objects.field(interp, "interp.gil") if "interp.gil" in lay else self.runtime + lay["runtime.gil"]
            if not gil:
                return None
            locked = int.from_bytes(self.objects.read(gil + lay["gil.locked"], 4), "little")
            return self.objects.word(gil + lay["gil.last_holder"]) if locked else None
        except Unreadable:
            return None

    def threads(self, tids: set[int] | None = None, wanted: set[int | None] | None = None,
                names: bool = True) -> list[PyThread]:
        """Every Python thread of the main interpreter (those on ``tids``, the process's threads) with
        its frames, innermost first (only those on ``wanted`` when given: a profile's running threads)."""
        self.objects.deadline = time.monotonic() + READ_BUDGET_S
        try:
            return self._threads(tids, wanted, names)
        finally:
            self.objects.deadline = None

    def _threads(self, tids: set[int] | None, wanted: set[int | None] | None, names: bool) -> list[PyThread]:
        interp = self.main_interpreter()
        holder = self.gil_holder(interp)
        found: list[PyThread] = []
        self._budget = MAX_TOTAL_FRAMES
        for tstate in self.thread_states(interp):
            try:
                thread = PyThread(tstate, self.objects.field(tstate, "tstate.thread_id"), None)
            except Unreadable:
                if found and self.objects.deadline is not None and time.monotonic() > self.objects.deadline:
                    found[-1].problem = found[-1].problem or "the time for reading this process ran out: the " \
                        "Python threads after this one were not read"
                    break  # (the threads read until then are kept)
                raise
            thread.tid = self._tid(tstate, thread.thread_id, tids)
            if wanted is not None and thread.tid not in wanted:
                continue
            thread.holds_gil = tstate == holder
            try:
                before = self.top_frame(tstate)
                self._frames(tstate, thread.frames)
                thread.torn = self.top_frame(tstate) != before
            except Unreadable as e:
                thread.problem = str(e)
            found.append(thread)
        named = self.thread_names(interp) if names else {}
        for thread in found:
            thread.name = named.get(thread.thread_id)
        return found

    def _tid(self, tstate: int, thread_id: int, tids: set[int] | None) -> int | None:
        try:
            if "tstate.native_thread_id" in self.layout:
                tid = self.objects.field(tstate, "tstate.native_thread_id") & 0xFFFFFFFF
            else:
                tid = int.from_bytes(self.objects.read(thread_id + PTHREAD_TID, 4), "little")
        except Unreadable:
            return None
        return tid if tids is None or tid in tids else None

    def thread_names(self, interp: int) -> dict[int, str]:
        """threading._active's threads by ident: their names (none when threading is not imported),
        read again at most once a second (a profile asks at every tick)."""
        now = time.monotonic()
        if now - self._names_read < NAMES_S:
            return self._names
        self._names_read = now
        self._names = self._read_names(interp)
        return self._names

    def _read_names(self, interp: int) -> dict[int, str]:
        names: dict[int, str] = {}
        try:
            threading = self.module_object(interp, "threading")
            if threading is None:
                return names
            active = self.objects.attribute(threading, "_active")
            for key, value in self.objects.dict_items(active, MAX_THREADS):
                try:
                    ident = self.objects.integer(key)
                    names[ident] = self.objects.text(self.objects.attribute(value, "_name"), 256)
                except Unreadable:
                    continue
        except Unreadable:
            pass
        return names

    def named(self, names: tuple[str, ...] | list[str]) -> int:
        """The object ``a.b.c`` names: a module of sys.modules (the longest dotted prefix that is one),
        then attributes; Unreadable when no prefix is a module."""
        interp = self.main_interpreter()
        for count in range(len(names), 0, -1):
            obj = self.module_object(interp, ".".join(names[:count]))
            if obj:
                for name in names[count:]:
                    obj = self.objects.attribute(obj, name)
                return obj
        raise Unreadable(f"no module {names[0]!r} in sys.modules")

    def module_object(self, interp: int, name: str) -> int | None:
        modules = self.objects.field(interp, "interp.modules")
        return self.objects.dict_get(modules, name) if modules else None

    # -- frames -------------------------------------------------------------------

    def top_frame(self, tstate: int) -> int:
        """The innermost frame: when it is another after the frames were read, the thread called or
        returned meanwhile and the frames read may mix two moments (torn). A thread that only went on
        in the same frame is not torn: its innermost line may be a few instructions old."""
        objects = self.objects
        if self.version < (3, 11):
            return objects.field(tstate, "tstate.frame")
        if self.version >= (3, 13):
            return objects.field(tstate, "tstate.current_frame")
        cframe = objects.field(tstate, "tstate.cframe")
        return objects.field(cframe, "cframe.current_frame") if cframe else 0

    def _frames(self, tstate: int, out: list[PyFrame]) -> None:
        lay = self.layout
        objects = self.objects
        seen_frames: set[int] = set()

        def visit(frame: int) -> None:
            """A frame met again is a chain that loops (no real one does); one past the budget, refused."""
            if frame in seen_frames:
                raise Unreadable(f"the frame chain loops back to {frame:#x}: not believed")
            if self._budget <= 0:
                raise Unreadable(f"more than {MAX_TOTAL_FRAMES} frames in all: the rest not read")
            seen_frames.add(frame)
            self._budget -= 1

        if self.version < (3, 11):
            frame = self.top_frame(tstate)
            while frame and len(out) < MAX_FRAMES:
                visit(frame)
                code = objects.field(frame, "frame.code")
                lasti = int.from_bytes(objects.read(frame + lay["frame.lasti"], 4), "little", signed=True)
                offset = lasti * 2 if self.version >= (3, 10) else lasti
                out.append(self._frame(code, offset, entry=True))
                frame = objects.field(frame, "frame.back")
            return
        frame = self.top_frame(tstate)
        seen = 0
        entry_next = False
        while frame and seen < MAX_FRAMES:
            seen += 1
            visit(frame)
            owner = objects.read(frame + lay["iframe.owner"], 1)[0]
            if self.version >= (3, 12) and owner == CSTACK:
                if out:
                    out[-1].entry = True
                frame = objects.field(frame, "iframe.previous")
                continue
            code = objects.field(frame, "iframe.code")
            if self.version >= (3, 13) and objects.type_name(code) != "code":
                frame = objects.field(frame, "iframe.previous")
                continue
            instr = objects.field(frame, "iframe.instr")
            offset = instr - (code + lay["code.code_adaptive"])
            if offset > MAX_TABLE * 8:
                offset = -1
            entry = self.version == (3, 11) and objects.read(frame + lay["iframe.is_entry"], 1)[0] != 0
            out.append(self._frame(code, offset - (offset & 1), entry=entry))
            entry_next = entry
            frame = objects.field(frame, "iframe.previous")
        if out and not entry_next:
            out[-1].entry = True

    def _frame(self, code: int, offset: int, entry: bool) -> PyFrame:
        name, file, qualname, first, table, _ = self.code_info(code)
        key = (table, first, offset)  # (a bytes object keeps its hash: a long table is hashed once)
        line = self._lines.get(key)
        if line is None:
            if len(self._lines) > 100_000:
                self._lines.clear()
            line = self._lines[key] = line_at(self.version, table, first, offset)
        return PyFrame(qualname or name, file, line, name, entry)

    def code_info(self, code: int) -> tuple[str, str, str | None, int, bytes, int]:
        """(name, file, qualname, first line, line table, argument count) of a code object; kept by
        its address and its fields' pointers (an address freed and used again is read again)."""
        objects = self.objects
        lay = self.layout
        head = objects.read(code, max(lay["code.linetable"], lay["code.filename"], lay["code.name"],
                                      lay.get("code.qualname", 0)) + 8)

        def word(key: str) -> int:
            return int.from_bytes(head[lay[key]:lay[key] + 8], "little")

        key = (code, head[8:])  # (not its reference count: that changes at every call)
        known = self._code.get(key)
        if known is not None:
            return known
        name = objects.text(word("code.name"), MAX_NAME_CHARS)
        file = objects.text(word("code.filename"), 4096)
        qualname = objects.text(word("code.qualname"), MAX_NAME_CHARS) if "code.qualname" in lay else None
        first = int.from_bytes(head[lay["code.firstlineno"]:lay["code.firstlineno"] + 4], "little", signed=True)
        argcount = int.from_bytes(head[lay["code.argcount"]:lay["code.argcount"] + 4], "little", signed=True)
        table_obj = word("code.linetable")
        table = objects.bytes_of(table_obj, MAX_TABLE) if table_obj else b""
        info = (name, file, qualname, first, table, argcount)
        if len(self._code) > 50_000 or self._code_bytes + len(table) > MAX_CODE_BYTES:
            self._code.clear()
            self._lines.clear()
            self._code_bytes = 0
        self._code[key] = info
        self._code_bytes += len(table)
        return info


MAX_NAME_CHARS = 512


def _find(modules: Modules) -> tuple[Module, int]:
    """The module that defines _PyRuntime, from each file's own symbols (CPython exports it: no
    debug file is opened for a process that runs no Python)."""
    for module in modules.everything():
        if not _PYTHONISH.search(module.name) and not module.is_main:
            continue  # (a library of another name: not read; an embedding program may be any name)
        try:
            symbol = module.file.symbols().get("_PyRuntime")
        except BadFile:
            continue
        if symbol is not None and not symbol.is_function:
            return module, symbol.address + module.bias
    raise NotPython(f"{modules.main.path} is not CPython: no _PyRuntime in the program or its libraries",
                    "py: names and Python stacks need a CPython 3.8-3.13 process")


def _version(module: Module, read: Read) -> tuple[int, int]:
    found = _NAME.search(module.name)
    if found is not None and found.group(3) and ("d" in found.group(3) or "t" in found.group(3)):
        kind = "debug (Py_DEBUG)" if "d" in found.group(3) else "free-threaded"
        raise UnsupportedTarget(f"{module.path} is a {kind} build of CPython: its objects' layout is not the "
                                "release build's that sampler reads", "sample a release build")
    try:
        own = module.file.symbols()
    except BadFile:
        own = {}
    if any(name in own for name in DEBUG_SYMBOLS):
        raise UnsupportedTarget(f"{module.path} is a debug build of CPython (it counts references: "
                                "Py_REF_DEBUG): its objects' layout is not the release build's that sampler reads",
                                "sample a release build")
    symbol = module.object_symbol("Py_Version")
    if symbol is not None:
        try:
            hexversion = int.from_bytes(read(symbol.address + module.bias, 4), "little")
            if hexversion >> 24 == 3:
                return 3, (hexversion >> 16) & 0xFF
        except Exception:
            pass
    if found is not None:  # (its name, checked above)
        return int(found.group(1)), int(found.group(2))
    try:
        section = module.file.section_bytes(".rodata")
    except BadFile:
        section = None
    if section is not None:
        match = _VERSION_TEXT.search(section[1][:64 << 20])
        if match is not None:
            return 3, int(match.group(1))
    raise UnsupportedTarget(f"{module.path}: has _PyRuntime, and no version sampler can read (no Py_Version, "
                            "no python3.X in its name, no version text)", "sampler reads CPython 3.8 to 3.13")
