"""Python functions by where they are written (``--at py:FILE.py:LINE``): the innermost function
whose lines hold LINE, in a module of sys.modules loaded from a file whose path ends with FILE.py.

The functions are found as the program holds them: each such module's globals (functions,
classmethods, staticmethods and properties' getters, and the classes' own attributes, nested classes
too, whatever their metaclass), then the code objects each function's code holds as constants (a
nested function or a lambda: every closure made from one runs the same code object). A function's
lines run from its first (its ``def``, or its first decorator) to the largest line its line table
gives; of the functions holding the line, a named one is taken before a lambda or a comprehension
written on it. Module-level code is not a function: a line there is refused. Every walk is bounded
(modules, objects, depth), and a search that reached the bound says so.
"""

from __future__ import annotations

from sampler.python.interpreter import Interpreter
from sampler.python.lines import last_line
from sampler.python.objects import Unreadable

MODULE_DICT = 16
"""PyModuleObject's md_dict, after the object's header (3.8-3.13)."""
WRAPPED = 16
"""classmethod's and staticmethod's callable, after the object's header (3.8-3.13)."""
TYPE_SUBCLASS = 1 << 31
"""Py_TPFLAGS_TYPE_SUBCLASS: the object is a class (its type is type or a metaclass)."""
MAX_MODULES = 8192
MAX_OBJECTS = 50_000
"""Objects looked at in all (globals, class attributes, constants)."""
MAX_DEPTH = 8
"""Classes in classes, and functions in functions, followed this deep."""


def code_at(interpreter: Interpreter, file: str, line: int) -> tuple[int, str, int, int]:
    """(code object, qualified name, first line, last line) of the innermost function whose lines hold
    ``line`` in a file ending with ``file``; Unreadable says what was found instead."""
    objects = interpreter.objects
    modules = objects.field(interpreter.main_interpreter(), "interp.modules")
    walk = _Walk(interpreter, file)
    files = 0
    for _, module in objects.dict_items(modules, MAX_MODULES) if modules else []:
        try:
            if objects.type_name(module) != "module":
                continue
            globals_ = objects.word(module + MODULE_DICT)
            path = objects.dict_get(globals_, "__file__") if globals_ else None
            if not path or objects.type_name(path) != "str" or not _same(objects.text(path, 4096), file):
                continue
        except Unreadable:
            continue
        files += 1
        try:
            walk.globals(globals_)
        except Unreadable:
            continue
    if not files:
        raise Unreadable(f"no module in sys.modules was loaded from a file ending with {file}")
    holding = [(first, last, code, name) for code, (name, first, last) in walk.codes.items() if first <= line <= last]
    named = [c for c in holding if not c[3].rpartition(".")[2].startswith("<")]  # (not a lambda, genexpr, ...)
    if not holding:
        near = sorted(walk.codes.values(), key=lambda c: abs(c[1] - line))[:3]
        said = ", ".join(f"{name} ({first}-{last})" for name, first, last in near)
        bound = f"; {MAX_OBJECTS:,} objects were looked at, the bound" if walk.full else ""
        raise Unreadable(f"no function of {file} holds line {line}" + (f" (nearest: {said})" if said else "")
                         + bound)
    first, last, code, name = max(named or holding, key=lambda c: (c[0], -c[1]))  # (the innermost: the latest start)
    return code, name, first, last


class _Walk:
    def __init__(self, interpreter: Interpreter, file: str) -> None:
        self.interpreter = interpreter
        self.file = file
        self.codes: dict[int, tuple[str, int, int]] = {}
        """Each code object of the file found: (qualified name, first line, last line)."""
        self.seen: set[int] = set()

    @property
    def full(self) -> bool:
        return len(self.seen) >= MAX_OBJECTS

    def _new(self, obj: int) -> bool:
        if obj in self.seen or self.full:
            return False
        self.seen.add(obj)
        return True

    def globals(self, d: int, depth: int = 0) -> None:
        objects, layout = self.interpreter.objects, self.interpreter.layout
        for _, value in objects.dict_items(d, MAX_OBJECTS - len(self.seen)):
            if self.full:
                return
            if not self._new(value):
                continue
            try:
                kind = objects.type_name(value)
                if kind in ("classmethod", "staticmethod", "property"):
                    value = objects.word(value + WRAPPED)  # (a property's getter: fget)
                    if not value:
                        continue
                    kind = objects.type_name(value)
                if kind == "function":
                    self.code(objects.field(value, "function.code"), depth)
                elif objects.word(objects.type_of(value) + layout["type.flags"]) & TYPE_SUBCLASS and depth < MAX_DEPTH:
                    inner = objects.word(value + layout["type.dict"])  # (a class, whatever its metaclass)
                    if inner:
                        self.globals(inner, depth + 1)
            except Unreadable:
                continue

    def code(self, code: int, depth: int) -> None:
        interpreter, objects = self.interpreter, self.interpreter.objects
        if code in self.codes:
            return
        name, file, qualname, first, table, _ = interpreter.code_info(code)
        if not _same(file, self.file):
            return
        self.codes[code] = (qualname or name, first, last_line(interpreter.version, table, first))
        consts = objects.field(code, "code.consts")
        if not consts or depth >= MAX_DEPTH or objects.type_name(consts) != "tuple":
            return
        count = objects.signed(consts + interpreter.layout["var.size"])
        if not 0 < count <= 4096:
            return
        raw = objects.read(consts + interpreter.layout["tuple.items"], 8 * count)
        for i in range(count):
            const = int.from_bytes(raw[8 * i:8 * i + 8], "little")
            try:
                if self._new(const) and objects.type_name(const) == "code":
                    self.code(const, depth + 1)
            except Unreadable:
                continue


def _same(path: str, file: str) -> bool:
    """The program's path names ``file``: the same, or ending with it after a slash."""
    return path == file or path.endswith("/" + file.lstrip("/"))
