"""The ptrace backend: breakpoints where only the hitting thread stops, or no stop at all.

With ``--at``: per sample, write int3 at the location, wait for the first thread
to hit it, read what the expressions need, put the byte back, rewind that thread
and let it go. Without ``--at`` every name must be a global, and nothing stops:
values are read from /proc/PID/mem while the target runs (zero-stop reads).
"""

from __future__ import annotations

import ast
import re
import threading
import time
from collections.abc import Callable
from typing import ClassVar

from sampler.backends.base import Capabilities
from sampler.backends.cycle import miss
from sampler.backends.ptrace.dwarf import REGISTERS, Debug, Frame, Function, OptimizedOut, Variable
from sampler.backends.ptrace.evaluate import Evaluator, Object, SampleError
from sampler.backends.ptrace.memory import Memory
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.backends.ptrace.symbols import Program
from sampler.backends.ptrace.tracer import Hit, Tracer
from sampler.config import SessionConfig
from sampler.errors import ExpressionError, LocationNotFound, UnsupportedTarget, UsageError
from sampler.expr import DEREF, source_name
from sampler.guardian import Guardian
from sampler.journal import Journal
from sampler.process import TargetProcess
from sampler.sample import Reading, Value

_ADDRESS = re.compile(r"^\*\s*(0x[0-9a-fA-F]+|\d+)$")
_FILE_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+)$")


class PtraceBackend:
    name: ClassVar[str] = "ptrace"
    capabilities: ClassVar[Capabilities] = Capabilities(
        stops_all_threads=False, languages=("c", "c++", "rust", "go"))

    def __init__(self, config: SessionConfig, program: Program, debug: Debug | None,
                 is_go: bool = False) -> None:
        self.config = config
        self.name_hint = "check the spelling; Go globals are package-qualified (main.ring)" if is_go \
            else "check the spelling"
        """What to do about an unknown name: the Go advice only for Go programs."""
        self.program = program
        self.debug = debug
        self.address: int | None = None
        """Run-time address of the breakpoint (None: zero-stop reads)."""
        self.function: Function | None = None
        self.memory: Memory | None = None
        self.tracer: Tracer | None = None
        self.guardian: Guardian | None = None
        self._variables: dict[int, dict[str, Variable]] = {}
        """Variables in scope, per breakpoint address (file address)."""
        if config.location is not None:
            self.address, self.function = self._resolve_location(config.location)

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess) -> PtraceBackend:
        program = Program(target.pid)
        try:
            if not program.has_symbols and not program.has_dwarf:
                raise UnsupportedTarget(f"{program.path} has no symbols (it is stripped)",
                                        "sample an unstripped build, or one with debug info (-g)")
            debug = Debug(program.elf, program.bias) if program.has_dwarf else None
            return cls(config, program, debug, target.is_go)
        except BaseException:
            program.close()
            raise

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        zero_stop = self.address is None
        self.memory = Memory(self.config.pid, writable=not zero_stop)
        if zero_stop:
            self._evaluate(None)  # every name must be a global: refuse others now
            return
        self._check_names()
        journal = Journal(self.config.pid)
        if self.config.guardian:
            self.guardian = Guardian(PatchRescue(self.config.pid))
        self.tracer = Tracer(self.config.pid, self.memory, journal, self.guardian)
        self.tracer.seize()

    def sample(self, stop: threading.Event) -> Reading:
        if self.tracer is None or self.address is None:
            values, errors = self._evaluate(None)
            if errors:  # reads fail once it is gone
                assert self.memory is not None
                self.memory.check_alive()
            return Reading(values, error="; ".join(errors))
        tracer = self.tracer
        tracer.arm(self.address)  # journaled first (fsynced): not counted in wait_us
        armed = time.monotonic()
        try:
            hit = tracer.wait_for_hit(armed + self.config.hit_timeout_s, stop)
        finally:
            tracer.disarm(self.address)  # before the hitting thread goes on
        if hit is None:
            waited = time.monotonic() - armed
            return Reading((None,) * len(self.config.expressions), wait_us=waited * 1e6,
                           error=miss(stop, self.config.hit_timeout_s))
        return self._read_hit(hit, armed, tracer.resume)

    def trace(self, stop: threading.Event, until: float) -> Reading | None:
        if self.tracer is None or self.address is None:
            raise UsageError("every-hit tracing needs --at")
        tracer = self.tracer
        tracer.arm(self.address)  # stays armed between hits; detach takes it out
        waiting = time.monotonic()
        hit = tracer.wait_for_hit(until, stop)
        if hit is None:
            return None
        return self._read_hit(hit, waiting, tracer.step_over)

    def _read_hit(self, hit: Hit, since: float, let_go: Callable[[Hit], None]) -> Reading:
        """Evaluate at the hit, let the thread go on every way out, say how long it was held."""
        try:
            values, errors = self._evaluate(hit)
        finally:
            let_go(hit)
            resumed = time.monotonic()
        return Reading(values, thread=str(hit.tid), pause_us=(resumed - hit.seen) * 1e6,
                       wait_us=(hit.seen - since) * 1e6, error="; ".join(errors))

    def idle(self, seconds: float, stop: threading.Event) -> None:
        if self.tracer is None:
            stop.wait(seconds)
        else:
            self.tracer.serve_until(time.monotonic() + seconds, stop)

    def detach(self) -> None:
        try:
            if self.tracer is not None:
                tracer, self.tracer = self.tracer, None
                tracer.detach()
            if self.guardian is not None:  # only once every byte is back
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()
        finally:
            if self.memory is not None:
                self.memory.close()
                self.memory = None
            self.program.close()

    # -- where to break ---------------------------------------------------------

    def _resolve_location(self, location: str) -> tuple[int, Function | None]:
        bias = self.program.bias
        looked = "the symbol table"
        address: int | None = None
        function: Function | None = None
        match = _ADDRESS.match(location.strip())
        if match:
            address = int(match.group(1), 0)
            function = self.debug.function_at(address - bias) if self.debug else None
            return address, function
        if self.debug is not None:
            looked = "the DWARF functions, the line table and the symbol table"
            function = self.debug.functions.get(location)
            if function is not None:
                return self.debug.after_prologue(function) + bias, function
            line = _FILE_LINE.match(location)
            if line:
                found = self.debug.line_address(line.group("file"), int(line.group("line")))
                if found is not None:
                    return found + bias, self.debug.function_at(found)
        address = self.program.symbol(location)
        if address is not None:
            return address, self.debug.function_at(address - bias) if self.debug else None
        in_library = self.program.library_symbol(location)
        if in_library is not None:
            return in_library[0], None  # no DWARF there: globals of the program only
        raise LocationNotFound(f"no function or line {location!r} in {self.program.path} "
                               f"(looked in {looked} and the shared libraries' dynamic symbols)")

    # -- evaluation ---------------------------------------------------------------

    def _scope(self, hit: Hit | None) -> tuple[dict[str, _Lazy], Frame | None]:
        """Locals and parameters at the hit (empty without one), and the frame."""
        if hit is None or self.debug is None or self.function is None:
            return {}, None
        debug, function = self.debug, self.function
        registers = {name: getattr(hit.registers, name) for name in REGISTERS}
        pc = hit.address - self.program.bias
        memory = self.memory
        assert memory is not None
        frame = Frame(registers, pc, cfa=lambda: debug.cfa(pc, registers),
                      read_word=lambda address: int.from_bytes(memory.read(address, 8), "little"))
        variables = self._variables.get(pc)
        if variables is None:
            variables = self._variables[pc] = debug.variables(function, pc)
        scope = {}
        for name, variable in variables.items():
            scope[name] = _Lazy(debug, variable, frame, function)
        return scope, frame

    def _evaluate(self, hit: Hit | None) -> tuple[tuple[Value, ...], list[str]]:
        scope, frame = self._scope(hit)
        memory = self.memory
        assert memory is not None

        def resolve(name: str) -> Object | None:
            local = scope.get(name)
            return local.get() if local is not None else self._global(name)

        def register(name: str) -> int:
            if frame is None:
                raise SampleError("registers are only known at a breakpoint")
            return frame.registers[name]

        evaluator = Evaluator(resolve, memory.read, register, self._where(), self.name_hint)
        values: list[Value] = []
        errors: list[str] = []
        for expression in self.config.expressions:
            try:
                values.append(evaluator.value(expression.tree))
            except SampleError as e:
                values.append(None)
                errors.append(f"{expression.name}: {e}")
        return tuple(values), errors

    def _global(self, name: str) -> Object | None:
        if self.debug is not None:
            variable = self.debug.global_variable(name)
            if variable is not None:
                location = self.debug.location(variable, None, None)
                return Object(variable.type, location)
        return None

    def _where(self) -> str:
        if self.function is not None:
            return f"among the parameters and locals of {self.function.name} nor among the globals"
        if self.address is not None:
            return "among the globals (no DWARF function at the breakpoint)"
        return "among the globals (without --at only globals can be read)"

    def _check_names(self) -> None:
        """Before attaching: every plain name must be a local at the location or a global."""
        if self.debug is None:
            raise UnsupportedTarget(f"{self.program.path} has no DWARF debug info",
                                    "rebuild with -g to read variables")
        names = set()
        if self.function is not None:
            assert self.address is not None
            names = set(self.debug.variables(self.function, self.address - self.program.bias))
        for expression in self.config.expressions:
            for node in ast.walk(expression.tree):
                if isinstance(node, ast.Name) and node.id != DEREF:
                    name = source_name(node.id)
                    if name not in names and name not in self.debug.globals \
                            and not any(g.startswith(name + ".") for g in self.debug.globals):
                        raise ExpressionError(f"no variable {name!r} {self._where()}", self.name_hint)


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
            self._object = Object(self.variable.type, location)
        return self._object
