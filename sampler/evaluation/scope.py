"""What a name means at the breakpoint, for the ptrace backend (Delve's EvalScope).

Names resolve in this order: parameters and locals of the function at the breakpoint
(from its DWARF), globals (package-qualified in Go), the ABI's argument registers
(``argN``, when no DWARF name says otherwise), registers (``$rip``). Everything a hit
needs from the DWARF is looked up before the first int3 is written (``check``), not while
a thread of the target waits; names that are neither local nor global are tried as fields
of the globals (the short form, evaluation/fields.py).
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from sampler import notice
from sampler.config import SessionConfig
from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.dwarf import Debug, Function, Variable
from sampler.debuginfo.locate import NO_DEBUG_HINT, Place, defines_package, find_global
from sampler.debuginfo.locations import REGISTERS, Frame, InMemory, InRegister, OptimizedOut
from sampler.debuginfo.modules import Module, Modules
from sampler.debuginfo.types import Pointer, Scalar, Struct, Type, is_interface
from sampler.errors import ExpressionError
from sampler.evaluation import usdtargs
from sampler.evaluation.evaluate import Evaluator, Object, SampleError, Untyped, dotted_name
from sampler.evaluation.fields import short_form
from sampler.evaluation.golang import GoTypes
from sampler.evaluation.pyvalues import PyValues
from sampler.language import casts, expr
from sampler.language.expr import REGISTER_PREFIX, Expression, register_name, source_name
from sampler.process.reads import Read, Stop, UnreadableMemory
from sampler.python.objects import Unreadable
from sampler.sample import Value

if TYPE_CHECKING:  # (a Python probe's place: python/probes.py, loaded by the runs that have one)
    from sampler.python.probes import PyProbe

ARGUMENTS = {f"arg{i}": register for i, register in enumerate(("rdi", "rsi", "rdx", "rcx", "r8", "r9"))}
"""The integer arguments at a function's entry, System V AMD64 ABI."""
GO_ARGUMENTS = {f"arg{i}": register for i, register in
                enumerate(("rax", "rbx", "rcx", "rdi", "rsi", "r8", "r9", "r10", "r11"))}
"""The integer arguments at a Go function's entry, Go's internal register ABI (Go 1.17+)."""
ARGUMENT_TYPE = Scalar("uint64_t", 8, "unsigned")
_ARGUMENT = re.compile(r"^arg\d+$")
REGISTER_NAMES = (*REGISTERS, "eflags", "orig_rax", "fs_base", "gs_base", "cs", "ss", "ds", "es", "fs", "gs")
"""What ``$name`` may name: the fields of struct user_regs_struct."""


class Scope:
    """The names of one session's expressions, at one place (None: globals only)."""

    def __init__(self, config: SessionConfig, modules: Modules, place: Place | None, is_go: bool,
                 python: PyProbe | None = None) -> None:
        self.config = config
        """The session's settings, as given."""
        self.expressions = usdtargs.substitute(config.expressions, place) if place is not None \
            else config.expressions
        """What is evaluated: the expressions, each name of the short form by its path (check), a USDT
        probe's arguments by where its note says they are."""
        self.modules = modules
        self.place = place
        self.python = python
        """At a Python function's place (--at py:...): its probe (its code object, its frame at a hit)."""
        self.address = place.address if place is not None else None
        """Run-time address of the breakpoint (None: zero-stop reads)."""
        self.function: Function | None = place.function if place is not None else None
        self.is_go = is_go
        self.name_hint = "check the spelling; Go globals are package-qualified (main.ring)" if is_go \
            else "check the spelling"
        """What to do about an unknown name: the Go advice only for Go programs."""
        self.goid_offset: int | None = None
        """Offset of goid in runtime.g, for the thread column of Go programs."""
        self._go_types: GoTypes | None = None
        """Go: dynamic types of interfaces."""
        self._variables: dict[int, dict[str, Variable]] = {}
        """Variables in scope, per breakpoint address (file address)."""
        self._globals: dict[str, Object | None] = {}
        self._python: PyValues | None = None

    # -- before the first hit ----------------------------------------------------

    def check(self) -> None:
        """Every plain name must be a local at the location, a global, a field of a global,
        an argument register or a register; refused in one line otherwise."""
        self._check_names()

    def prepare_go(self, read: Read) -> None:
        """Go: where the goroutine id is, and the dynamic types of interfaces (read now,
        not while a thread waits at the first hit)."""
        if self.address is not None:
            self._find_goid()
        self._prepare_interfaces(read)

    def prepare_python(self, read: Read) -> None:
        """py: expressions: the process's CPython found now (its symbols read, its version known),
        not at the first row; one line when it runs none."""
        if any(expression.python is not None for expression in self.expressions):
            self.python_values(read)

    def fixed_ranges(self) -> list[tuple[int, int]]:
        """The bytes of the globals the expressions use (their addresses do not move)."""
        return [(o.location.address, o.location.address + max(o.type.size, 1))
                for o in self._globals.values() if o is not None and isinstance(o.location, InMemory)]

    # -- at a hit ----------------------------------------------------------------

    def evaluate(self, hit: Stop | None, index: int, read: Read,
                 on_branch: Callable[[], None] | None = None) -> tuple[Value, str]:
        """One expression: (value, '') or (None, why not). ``on_branch`` is told when the
        evaluation took a way the data chose (an interface's dynamic type, a C string's end)."""
        expression = self.expressions[index]
        if expression.python is not None:
            return self._python_value(expression, hit, read)
        evaluator = self.evaluator(hit, read, on_branch)
        try:
            return evaluator.value(expression.tree), ""
        except SampleError as e:
            return None, str(e)

    def _python_value(self, expression: Expression, hit: Stop | None, read: Read) -> tuple[Value, str]:
        """A py: expression; at a Python probe's hit its first name may be the frame's argument or local."""
        assert expression.python is not None
        probe = self.python
        values = self.python_values(read)
        if probe is None or hit is None:
            return values.evaluate(expression.python, read)
        objects = probe.interpreter.objects
        objects.reading = read
        try:
            frame_locals = probe.locals(probe.frame(hit.registers, getattr(hit, "tid", 0)))
        except Unreadable as e:
            return None, f"the frame's locals: {e}"
        finally:
            objects.reading = None
        return values.evaluate(expression.python, read, frame_locals)

    def python_values(self, read: Read) -> PyValues:
        """The process's CPython (py: expressions), found once: ExpressionError when it runs none."""
        if self._python is None:
            probe = self.python
            self._python = PyValues(self.modules, read, probe.interpreter if probe is not None else None)
        return self._python

    def evaluator(self, hit: Stop | None, read: Read, on_branch: Callable[[], None] | None = None) -> Evaluator:
        """What evaluates the expressions at the hit (None: globals only), reading through ``read``."""
        scope, _ = self._locals(hit, read, on_branch)

        def resolve(name: str) -> Object | None:
            local = scope.get(name)
            if local is not None:
                return local.get()
            if name.partition(".")[0] in scope:  # b.w with a local b: a field, not a global
                return None
            found = self.global_object(name)
            if found is None and hit is not None and name in self._arguments:  # no DWARF name: the ABI's
                return Object(ARGUMENT_TYPE, InRegister(self._arguments[name]))
            return found

        def register(name: str) -> int:
            if hit is None:
                raise SampleError("registers are only known at a breakpoint")
            return int(getattr(hit.registers, name))

        return Evaluator(resolve, read, register, self._where(), self.name_hint,
                         self._go_types.dynamic if self._go_types is not None else None, on_branch)

    def global_object(self, name: str) -> Object | None:
        """A global by name (the lookup is done once; its address does not move)."""
        if name in self._globals:
            return self._globals[name]
        found = find_global(self.modules, name, self.place.module if self.place else None)
        result = None
        if found is not None:
            module, variable = found
            debug = module.debug()
            assert debug is not None
            copied = None
            if module is not self.modules.main and getattr(module.object_symbol(name), "exported", False):
                copied = self.modules.main.object_symbol(name)
                copied = copied if copied is not None and copied.exported else None
            try:
                if copied is not None:  # a copy relocation: the program's copy is the live one
                    result = Object(variable.type, InMemory(copied.address + self.modules.main.bias))
                else:
                    result = Object(variable.type, debug.location(variable, None, None))
            except Malformed as e:
                module.drop_debug(e)
        if result is None and not self.is_go:
            result = self._data_symbol(name)
        self._globals[name] = result
        return result

    def _data_symbol(self, name: str) -> Object | None:
        """A global the DWARF does not have (a stripped program): its symbol, untyped."""
        if "." in name:
            return None
        for module in [self.modules.main, *self.modules.libraries]:
            symbol = module.object_symbol(name)
            if symbol is not None and symbol.address:
                lacking = "" if module.debug(remote=False) is not None else \
                    module.lacking_debug() or f"{module.name} has no debug info"
                return Object(Untyped(name, symbol.size, lacking), InMemory(symbol.address + module.bias))
        return None

    # -- locals ------------------------------------------------------------------

    def _debug(self) -> tuple[Debug, Module] | None:
        """The DWARF of the breakpoint's module, when the breakpoint is in a DWARF function."""
        module = self.place.module if self.place is not None else None
        if module is None or self.function is None:
            return None
        debug = module.debug()
        return None if debug is None else (debug, module)

    def _locals(self, hit: Stop | None, read: Read, on_branch: Callable[[], None] | None = None
                ) -> tuple[dict[str, _Lazy], Frame | None]:
        """Locals and parameters at the hit (empty without one), and the frame."""
        found = self._debug()
        if hit is None or found is None or self.function is None:
            return {}, None
        (debug, module), function = found, self.function
        registers = {name: getattr(hit.registers, name) for name in REGISTERS}
        pc = hit.address - module.bias
        frame = Frame(registers, pc, cfa=lambda: debug.cfa(pc, registers),
                      read_word=lambda address: int.from_bytes(read(address, 8), "little"), on_branch=on_branch)
        variables = self._variables.get(pc)
        if variables is None:
            variables = self._variables[pc] = self._in_scope(debug, function, pc)
        return {name: _Lazy(debug, variable, frame, function) for name, variable in variables.items()}, frame

    @staticmethod
    def _in_scope(debug: Debug, function: Function, pc: int) -> dict[str, Variable]:
        try:
            return debug.variables(function, pc)
        except Malformed as e:
            raise SampleError(f"the debug info is corrupted ({e})") from None

    # -- Go ----------------------------------------------------------------------

    def _find_goid(self) -> None:
        """Where runtime.g keeps goid, from the type of runtime.g0 (Go programs only)."""
        g0 = self.global_object("runtime.g0")
        if g0 is not None and isinstance(g0.type, Struct):
            found = g0.type.member("goid")
            if found is not None:
                self.goid_offset = found[0] + found[1].offset

    def _prepare_interfaces(self, read: Read) -> None:
        """Go: the dynamic types of interfaces, read from the DWARF now when an expression
        reaches an interface."""
        debug = self.modules.main.debug()
        if debug is None:
            return
        found = self._debug()

        def moduledata() -> tuple[Type, int] | None:
            obj = self.global_object("runtime.firstmoduledata")
            if obj is None or not isinstance(obj.location, InMemory):
                return None
            return obj.type, obj.location.address

        self._go_types = GoTypes(debug, read, moduledata)
        variables = self._variables.get(self.address - found[1].bias, {}) \
            if self.address is not None and found is not None else {}
        if any(is_interface(self._static_type(node, variables))
               for expression in self.expressions for node in ast.walk(expression.tree)):
            with contextlib.suppress(Malformed, UnreadableMemory):
                debug.go_type(0)
                moduledata()

    def _static_type(self, node: ast.AST, variables: dict[str, Variable]) -> Type | None:
        """The type of a name or a field chain, as far as it can be known before a hit."""
        if isinstance(node, ast.Name):
            name = source_name(node.id)
            if name in variables:
                return variables[name].type
            known = self._globals.get(name)
            return known.type if known is not None else None
        if isinstance(node, ast.Attribute):
            dotted = dotted_name(node)
            known = self._globals.get(dotted) if dotted is not None else None
            if known is not None:
                return known.type
            t = self._static_type(node.value, variables)
            for _ in range(4):
                if not isinstance(t, Pointer):
                    break
                t = t.target
            if isinstance(t, Struct):
                member = t.member(source_name(node.attr))
                return member[1].type if member is not None else None
        return None

    # -- checking names ----------------------------------------------------------

    def _where(self) -> str:
        if self.function is not None:
            return f"among the parameters and locals of {self.function.name} nor among the globals"
        if self.address is not None:
            return "among the globals (no DWARF function at the breakpoint)"
        return "among the globals (without --at only globals can be read)"

    def _check_names(self) -> None:
        names: set[str] = set()
        found = self._debug()
        if found is not None and self.function is not None:
            assert self.address is not None
            debug, module = found
            pc = self.address - module.bias
            try:
                names = set(self._variables.setdefault(pc, debug.variables(self.function, pc)))
                for variable in self._variables[pc].values():
                    debug.type_of(variable.die)
                with contextlib.suppress(OptimizedOut, Malformed):  # then each row says why
                    debug.cfa(pc, dict.fromkeys(REGISTERS, 0))
            except Malformed as e:
                module.drop_debug(e)
                self._variables.pop(pc, None)
                self.function, names = None, set()
        unknown: dict[int, list[str]] = {}
        for index, expression in enumerate(self.expressions):
            if expression.python is not None:
                continue  # (a py: path: evaluation/pyvalues.py, its interpreter found at the first read)
            if expr.ustack_depth(expression.tree) is not None:
                if self.address is None:
                    raise ExpressionError(f"{expression.text}: the stack of a thread stopped at a breakpoint",
                                          "give --at")
                continue  # the backend unwinds it: no name to look up
            called = expr.called(expression.tree)
            for node in ast.walk(expression.tree):
                dotted = dotted_name(node) if isinstance(node, ast.Attribute) else None
                if dotted is not None and dotted.partition(".")[0] not in names:
                    self.global_object(dotted)  # looked up now, not at a hit (main.ring, a Go global)
                if isinstance(node, ast.Name) and node.id.startswith(REGISTER_PREFIX):
                    self._check_register(register_name(node.id))
                elif isinstance(node, ast.Name) and id(node) not in called \
                        and not node.id.startswith(casts.PREFIX):
                    name = source_name(node.id)
                    if name in names or (self.is_go and defines_package(self.modules, name)) \
                            or self.global_object(name) is not None:
                        continue  # a Go package (main of main.ring) is no global: not searched for as one
                    if _ARGUMENT.match(name):
                        self._check_argument(name)
                    elif not defines_package(self.modules, name) and name not in unknown.get(index, []):
                        unknown.setdefault(index, []).append(name)
        if unknown:
            self._short_form(unknown)

    def _short_form(self, unknown: dict[int, list[str]]) -> None:
        """Names that are no local, parameter or global: fields of the globals (fields.py)."""
        def none_found(name: str) -> ExpressionError:
            return ExpressionError(f"no variable {name!r} {self._where()}, nor a field of a global of that "
                                   f"name{self._no_dwarf()}", self._no_dwarf_hint() or self.name_hint)

        self.expressions = short_form(self.expressions, unknown, self.modules.main.debug(), self.is_go, notice.say,
                                      none_found)
        self._check_names()  # the paths, as any other names

    def _check_register(self, name: str) -> None:
        if name not in REGISTER_NAMES:
            raise ExpressionError(f"no register ${name}", f"registers are {', '.join(REGISTER_NAMES)}")
        if self.address is None:
            raise ExpressionError(f"${name}: registers are only known at a breakpoint", "give --at")

    @property
    def _arguments(self) -> dict[str, str]:
        """argN -> register: Go's internal ABI in a Go program's own code, else System V's."""
        go = self.is_go and (self.place is None or self.place.module is self.modules.main)
        return GO_ARGUMENTS if go else ARGUMENTS

    def _check_argument(self, name: str) -> None:
        if name not in self._arguments:
            last = len(self._arguments) - 1
            abi = "Go's internal ABI (RAX, RBX, RCX, RDI, RSI, R8-R11)" if self._arguments is GO_ARGUMENTS \
                else "the System V AMD64 ABI"
            raise ExpressionError(f"{name}: only arg0-arg{last} are known (the integer arguments passed in "
                                  f"registers by {abi})",
                                  "read the stack instead, e.g. *(uint64_t *)($rsp + 8) at a function's entry")
        if self.address is None:
            raise ExpressionError(f"{name}: arguments are only known at a breakpoint", "give --at")

    def _no_dwarf(self) -> str:
        """Why a name may be missing: the modules that matter have no debug info."""
        modules = [m for m in (self.modules.main, self.place.module if self.place else None) if m is not None]
        said = [m.lacking_debug() for m in dict.fromkeys(modules) if m.debug() is None]
        return "".join(f"; {why}" for why in said if why)

    def _no_dwarf_hint(self) -> str:
        said = self._no_dwarf()
        if not said:
            return ""
        if "no debug info was found" not in said:
            return "its debug info is damaged: give a good copy with --symbols or --debug-dir"
        return NO_DEBUG_HINT


class _Lazy:
    """A local whose location is only worked out when an expression uses it (once per hit)."""

    def __init__(self, debug: Debug, variable: Variable, frame: Frame, function: Function) -> None:
        self.debug, self.variable, self.frame, self.function = debug, variable, frame, function
        self._object: Object | None = None

    def get(self) -> Object:
        if self._object is None:
            try:
                location = self.debug.location(self.variable, self.frame, self.function)
            except OptimizedOut as e:
                raise SampleError(str(e)) from None
            except Malformed as e:
                raise SampleError(f"the debug info is corrupted ({e})") from None
            self._object = Object(self.variable.type, location)
        return self._object
