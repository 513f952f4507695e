"""`py:` values (language/pyexpr.py) read from a CPython process, at a probe's hit or with nothing
stopped: the module from sys.modules, then attributes and items, each step through the interpreter's
own layout (python/objects.py). What the program changes while it is read may tear a value (a
zero-stop row is read again when a value moved meanwhile: consistent.py); a name that is not there
is the row's error, in the program's own words ("no module 'app' in sys.modules").
"""

from __future__ import annotations

from sampler.debuginfo.modules import Modules
from sampler.errors import ExpressionError, UnsupportedTarget
from sampler.language.pyexpr import PyPath
from sampler.process.reads import Read, UnreadableMemory
from sampler.python.interpreter import Interpreter
from sampler.python.objects import Described, Unreadable
from sampler.sample import Value


class PyValues:
    """The py: expressions of one process."""

    def __init__(self, modules: Modules, read: Read, interpreter: Interpreter | None = None) -> None:
        """Refused in one line when the process runs no CPython sampler reads."""
        try:
            self.interpreter = interpreter or Interpreter(modules, read)
        except UnsupportedTarget as e:
            raise ExpressionError(f"py: expressions: {e.message}", e.hint) from None
        self.objects = self.interpreter.objects

    def evaluate(self, path: PyPath, read: Read, frame_locals: dict[str, int] | None = None) -> tuple[Value, str]:
        """(value, '') or (None, why not). ``frame_locals``: a Python probe's frame, by name."""
        objects = self.objects
        objects.reading = read
        try:
            obj = self._find(path, frame_locals or {})
            if path.length:
                return objects.length(obj), ""
            value = objects.value(obj)
        except Unreadable as e:
            return None, str(e)
        except UnreadableMemory as e:
            return None, f"not read ({e})"
        finally:
            objects.reading = None
        if value is None:
            return "None", ""  # (an empty cell is a value not read)
        if isinstance(value, bool):
            return int(value), ""
        if isinstance(value, bytes):
            return value.hex(), ""
        if isinstance(value, Described):
            return str(value), ""
        return value, ""

    def _find(self, path: PyPath, frame_locals: dict[str, int]) -> int:
        objects = self.objects
        names = list(path.names)
        if names[0] in frame_locals:
            obj = frame_locals[names[0]]
            rest = names[1:]
            if not obj:
                raise Unreadable(f"{names[0]} is not set yet in the frame")
        else:
            try:
                obj, rest = self.interpreter.named(names), []
            except Unreadable as e:
                if frame_locals and str(e) == f"no module '{names[0]}' in sys.modules":
                    raise Unreadable(f"no argument or local '{names[0]}' in the frame, and no module "
                                     f"'{names[0]}' in sys.modules (a module's global: py:module.name)") from None
                raise
        for name in rest:
            obj = objects.attribute(obj, name)
        for kind, value in path.steps:
            obj = objects.attribute(obj, value) if kind == "attr" else objects.item(obj, value)  # type: ignore[arg-type]
        return obj
