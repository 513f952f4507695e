"""The ptrace backend: breakpoints where only the hitting thread stops, or no stop at all.

With ``--at``: per sample, write int3 at the location, wait for the first thread
to hit it, read what the expressions need, put the byte back, rewind that thread
and let it go. Without ``--at`` every name must be a global, and nothing stops:
values are read from /proc/PID/mem while the target runs (zero-stop reads).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import gc
import re
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

from sampler import notice
from sampler.backends.base import Capabilities
from sampler.backends.cycle import miss
from sampler.backends.fields import expand, field_paths
from sampler.backends.ptrace.evaluate import Evaluator, Object, SampleError, dotted_name
from sampler.backends.ptrace.golang import GoTypes
from sampler.backends.ptrace.instructions import MAX_FUNCTION, starts_instruction
from sampler.backends.ptrace.memory import Memory, UnreadableMemory
from sampler.backends.ptrace.plan import PlanMiss, ReadPlan, Recorder, Snapshot, Step
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.backends.ptrace.tracer import Hit, Tracer
from sampler.config import SessionConfig
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.dwarf import Debug, Function, Variable
from sampler.debuginfo.locate import NO_DEBUG_HINT, Place, defines_package, find_global, resolve
from sampler.debuginfo.locations import REGISTERS, Frame, InMemory, InRegister, OptimizedOut
from sampler.debuginfo.modules import Module, Modules
from sampler.debuginfo.types import Pointer, Scalar, Struct, Type, is_interface
from sampler.errors import ExpressionError, LocationNotFound, UsageError
from sampler.language import casts
from sampler.language.expr import BUILTINS, DEREF, REGISTER_PREFIX, Expression, register_name, source_name
from sampler.safety.guardian import Guardian
from sampler.safety.journal import Journal
from sampler.sample import Reading, Value
from sampler.stop import StopFlag
from sampler.target.process import TargetProcess


class PtraceBackend:
    name: ClassVar[str] = "ptrace"
    capabilities: ClassVar[Capabilities] = Capabilities(
        stops_all_threads=False, languages=("c", "c++", "rust", "go"))

    def __init__(self, config: SessionConfig, modules: Modules, is_go: bool = False) -> None:
        self.config = config
        self.name_hint = "check the spelling; Go globals are package-qualified (main.ring)" if is_go \
            else "check the spelling"
        """What to do about an unknown name: the Go advice only for Go programs."""
        self.modules = modules
        self.is_go = is_go
        self._goid_offset: int | None = None
        """Offset of goid in runtime.g, for the thread column of Go programs."""
        self._go_types: GoTypes | None = None
        """Go: dynamic types of interfaces."""
        self.place: Place | None = None
        self.address: int | None = None
        """Run-time address of the breakpoint (None: zero-stop reads)."""
        self.function: Function | None = None
        self.memory: Memory | None = None
        self.tracer: Tracer | None = None
        self.guardian: Guardian | None = None
        self._variables: dict[int, dict[str, Variable]] = {}
        """Variables in scope, per breakpoint address (file address)."""
        self._globals: dict[str, Object | None] = {}
        self._learnt: list[list[list[Step]]] | None = None
        """How the first hit's reads could have come about, for the second to confirm."""
        self._plans: list[ReadPlan | None] | None = None
        """The reads a hit needs, per expression, learnt at the first two hits (plan.py);
        None for an expression evaluated in full at every hit."""
        self._merged: ReadPlan | None = None
        """Every plan's reads and the thread column's as one plan (one system call per level)."""
        self._warm: Hit | None = None
        self._released = 0
        """Forked children let go clean (for the summary)."""
        self._unsure = 0
        """Steps over the breakpoint while a thread could not be held (for the summary)."""
        self._vfork_windows = 0
        """Times the breakpoint was out for an untraced vfork child (for the summary)."""
        self._runner: Callable[[object], Snapshot] | None = None
        """The merged plan made for the hot path (Tracer.catch), when every expression has a plan."""
        if config.location is not None:
            self.place = resolve(modules, config.location)
            self.address, self.function = self.place.address, self.place.function

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess) -> PtraceBackend:
        say = notice.quiet if config.quiet else notice.say
        modules = Modules(target.pid, DebugFinder(target.pid, config.debug_dirs, say, notice.say),
                          config.symbols_file)
        try:
            return cls(config, modules, target.is_go)
        except BaseException:
            modules.close()
            raise

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        zero_stop = self.address is None
        self.memory = Memory(self.config.pid, writable=not zero_stop)
        if zero_stop:
            self._check_names()  # every name must be a global: refuse others now
            if self.is_go:
                self._prepare_interfaces()
            self._evaluate(None)
            return
        self._check_names()
        self._check_instruction()
        if self.is_go:
            self._find_goid()
            self._prepare_interfaces()
        # what the DWARF parse left behind: collected now, and frozen so that no collection
        # of those objects falls inside a pause
        gc.collect()
        gc.freeze()
        journal = Journal(self.config.pid)
        if self.config.guardian:
            self.guardian = Guardian(PatchRescue(self.config.pid))
        self.tracer = Tracer(self.config.pid, self.memory, journal, self.guardian)
        self.tracer.seize()

    def _check_instruction(self) -> None:
        """Refuse a breakpoint address that does not start an instruction of its function
        (a corrupted line table, a wrong *ADDR): an int3 there would change the program."""
        assert self.address is not None and self.memory is not None
        where, address = self.config.location, self.address
        module = self.place.module if self.place is not None else None
        start = module.function_start(address - module.bias) if module is not None else None
        if module is None or start is None:
            raise LocationNotFound(f"--at {where}: cannot tell whether {address:#x} starts an instruction "
                                   "(no symbol or unwind entry of a loaded file covers it); no breakpoint "
                                   "was written", "give a function name, or an address inside a known function")
        begin = start + module.bias
        if address - begin + 16 > MAX_FUNCTION:
            raise LocationNotFound(f"--at {where}: {address:#x} is over 1 MiB past the start of its function "
                                   f"at {begin:#x}; no breakpoint was written", "give a function name")
        try:
            code = self.memory.read(begin, address - begin + 16)
        except UnreadableMemory as e:
            raise LocationNotFound(f"--at {where}: the code at {begin:#x} cannot be read ({e})") from None
        if not starts_instruction(code, begin, address):
            raise LocationNotFound(f"--at {where}: {address:#x} is not the start of an instruction (decoded "
                                   f"from its function at {begin:#x}); no breakpoint was written",
                                   "give the address of an instruction (objdump -d)" if where and
                                   where.lstrip().startswith("*") else "the debug info's line table may be "
                                   "corrupted: give a function name, another line, or *ADDR of an instruction")

    def sample(self, stop: StopFlag) -> Reading:
        if self.tracer is None or self.address is None:
            values, errors = self._evaluate(None)
            if errors:  # reads fail once it is gone
                assert self.memory is not None
                self.memory.check_alive()
            return Reading(values, error="; ".join(errors))
        tracer, address = self.tracer, self.address
        runner = self._runner
        if runner is not None and self._warm is not None:
            tracer.warm(runner, self._warm)
        tracer.arm(address)  # journaled at the first sample (fsynced): not counted in wait_us
        armed = time.monotonic()
        deadline = armed + self.config.hit_timeout_s
        if runner is not None:  # the hot path: only the plan's reads while the thread waits
            caught = None
            try:
                caught = tracer.catch(address, deadline, stop, runner)
            finally:
                if caught is None:
                    tracer.disarm(address)
            if caught is None:
                return self._missed(stop, armed)
            self._warm = caught[0]
            return self._reading(caught[0], armed, [None] * len(self.config.expressions), caught[1])
        hit = None
        try:
            hit = tracer.wait_for_hit(deadline, stop)
        finally:
            tracer.disarm(address)  # the byte goes back before the thread does
            if hit is not None:
                tracer.rewind(hit)  # and the thread onto it, before anything else is read
        if hit is None:
            return self._missed(stop, armed)
        return self._read_hit(hit, armed, tracer.resume)

    def _missed(self, stop: StopFlag, armed: float) -> Reading:
        return Reading((None,) * len(self.config.expressions), wait_us=(time.monotonic() - armed) * 1e6,
                       error=miss(stop, self.config.hit_timeout_s))

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if self.tracer is None or self.address is None:
            raise UsageError("every-hit tracing needs --at")
        tracer = self.tracer
        tracer.arm(self.address)  # stays armed between hits; detach takes it out
        waiting = time.monotonic()
        runner = self._runner
        if runner is not None:
            caught = tracer.catch(self.address, until, stop, runner, keep=True)
            if caught is None:
                return None
            return self._reading(caught[0], waiting, [None] * len(self.config.expressions), caught[1])
        hit = tracer.wait_for_hit(until, stop)
        if hit is None:
            return None
        return self._read_hit(hit, waiting, tracer.step_over)

    def _read_hit(self, hit: Hit, since: float, let_go: Callable[[Hit], None]) -> Reading:
        """The careful way: read at the hit, let the thread go on every way out, then
        evaluate; say how long it was held. The first hit, and the one after a plan missed,
        is evaluated in full while the thread waits, to make the read plans (plan.py); an
        expression whose reads the data chooses (an interface, a C string) is evaluated there
        in full at every hit, and the others from the plans' reads after the thread went on."""
        memory = self.memory
        assert memory is not None
        count = len(self.config.expressions)
        results: list[tuple[Value, str] | None] = [None] * count
        recorders: list[Recorder] = []
        plans, merged = self._plans, self._merged
        try:
            if plans is None or merged is None:
                fixed = [(o.location.address, o.location.address + max(o.type.size, 1))
                         for o in self._globals.values() if o is not None and isinstance(o.location, InMemory)]
                recorders = [Recorder(memory.read, hit.registers, fixed) for _ in range(count)]
                for index, recorder in enumerate(recorders):
                    results[index] = self._evaluate_one(hit, index, recorder.read, recorder.branched)
                thread = self._thread_of(hit, memory.read)
            else:
                for index, plan in enumerate(plans[:count]):
                    if plan is None:  # the data chooses its reads: in full, now
                        results[index] = self._evaluate_one(hit, index)
                snapshot = merged.run(hit.registers, memory.read_many)
        finally:
            let_go(hit)
            hit.resumed = hit.resumed or time.monotonic()  # the thread vanished: no CONT
        if plans is None or merged is None:
            self._learn(recorders)
            return self._row(hit, since, results, thread)
        self._warm = hit
        return self._reading(hit, since, results, snapshot)

    def _reading(self, hit: Hit, since: float, results: list[tuple[Value, str] | None],
                 snapshot: Snapshot) -> Reading:
        """After the thread went on: the row, each expression with a plan evaluated against
        the bytes its plan read at the hit."""
        assert self._plans is not None
        for index, plan in enumerate(self._plans[:len(results)]):
            if plan is not None:
                results[index] = self._evaluate_one(hit, index, snapshot.read)
        if snapshot.missed:
            self._plans = self._merged = self._learnt = self._runner = None  # the next two hits in full
        return self._row(hit, since, results, self._thread_of(hit, snapshot.read))

    def _row(self, hit: Hit, since: float, results: list[tuple[Value, str] | None], thread: str) -> Reading:
        values, errors = _joined(self.config.expressions, results)
        return Reading(values, thread=thread, pause_us=(hit.resumed - hit.seen) * 1e6,
                       wait_us=(hit.seen - since) * 1e6, error="; ".join(errors))

    def _learn(self, recorders: list[Recorder]) -> None:
        """Make the read plans from this hit's full evaluation and the one before it (the
        first hit only notes how its reads came about)."""
        found = [recorder.candidates() for recorder in recorders]
        if self._learnt is None:
            self._learnt = found
            return
        made = [recorder.plan(earlier) for recorder, earlier in zip(recorders, self._learnt)]
        if any(plan is None for plan in made):  # the two hits read differently: try again
            self._learnt = found
            return
        self._plans = [None if r.unstable else p for r, p in zip(recorders, made)]
        self._merged = ReadPlan.merged([*(p for p in self._plans if p is not None), self._thread_plan])
        self._learnt = None
        if self.memory is not None and all(plan is not None for plan in self._plans):
            self._runner = self._merged.runner(self.memory)

    @functools.cached_property
    def _thread_plan(self) -> ReadPlan:
        """The thread column's read, whose way is known: goid at R14 + its offset (Go)."""
        if self._goid_offset is None:
            return ReadPlan([])
        return ReadPlan([Step("reg", "r14", 0, self._goid_offset, 8)])

    def _thread_of(self, hit: Hit, read: Callable[[int, int], bytes]) -> str:
        """The thread column: for Go, the goroutine id (as Delve gives it), read from the
        current g (R14 under Go's register ABI); else the OS thread id."""
        if self._goid_offset is not None:
            try:
                g = int(hit.registers.r14)
                return str(int.from_bytes(read(g + self._goid_offset, 8), "little"))
            except (UnreadableMemory, PlanMiss):
                pass  # not on a goroutine's stack (a cgo or runtime thread): the OS thread id
        return str(hit.tid)

    def _find_goid(self) -> None:
        """Where runtime.g keeps goid, from the type of runtime.g0 (Go programs only)."""
        g0 = self._global("runtime.g0")
        if g0 is not None and isinstance(g0.type, Struct):
            found = g0.type.member("goid")
            if found is not None:
                self._goid_offset = found[0] + found[1].offset

    def _prepare_interfaces(self) -> None:
        """Go: the dynamic types of interfaces, read from the DWARF now when an expression
        reaches an interface (not while a thread waits at the first hit)."""
        debug, memory = self.modules.main.debug(), self.memory
        if debug is None or memory is None:
            return
        found = self._debug()

        def moduledata() -> tuple[Type, int] | None:
            obj = self._global("runtime.firstmoduledata")
            if obj is None or not isinstance(obj.location, InMemory):
                return None
            return obj.type, obj.location.address

        self._go_types = GoTypes(debug, memory.read, moduledata)
        variables = self._variables.get(self.address - found[1].bias, {}) \
            if self.address is not None and found is not None else {}
        if any(is_interface(self._static_type(node, variables))
               for expression in self.config.expressions for node in ast.walk(expression.tree)):
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

    def idle(self, seconds: float, stop: StopFlag) -> None:
        if self.tracer is None:
            stop.wait(seconds)
        else:
            self.tracer.serve_until(time.monotonic() + seconds, stop)

    def notes(self) -> list[str]:
        said = []
        if self._released:
            said.append(f"{self._released} child process(es) the target forked were let go with "
                        "sampler's breakpoints taken out of their copy of its memory")
        if self._unsure:
            said.append(f"in {self._unsure} step(s) over the breakpoint a thread of the target could not be "
                        "held: calls it made then may have been missed (at most one each)")
        if self._vfork_windows and self.config.every_hit:
            said.append(f"the breakpoint was out {self._vfork_windows} time(s) while a vfork child ran untraced "
                        "(sampler lacks CAP_SYS_PTRACE, and a traced exec would lose its set-user-ID): calls "
                        "other threads made then may have been missed")
        return said

    def detach(self) -> None:
        try:
            if self.tracer is not None:
                tracer, self.tracer = self.tracer, None
                try:
                    tracer.detach()
                finally:
                    self._released, self._unsure = tracer.children.released, tracer.unsure
                    self._vfork_windows = tracer.vfork_windows
            if self.guardian is not None:  # only once every byte is back
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()
        finally:
            if self.memory is not None:
                self.memory.close()
                self.memory = None
            self.modules.close()

    # -- evaluation ---------------------------------------------------------------

    def _debug(self) -> tuple[Debug, Module] | None:
        """The DWARF of the breakpoint's module, when the breakpoint is in a DWARF function."""
        module = self.place.module if self.place is not None else None
        if module is None or self.function is None:
            return None
        debug = module.debug()
        return None if debug is None else (debug, module)

    def _scope(self, hit: Hit | None, read: Callable[[int, int], bytes]) -> tuple[dict[str, _Lazy], Frame | None]:
        """Locals and parameters at the hit (empty without one), and the frame."""
        found = self._debug()
        if hit is None or found is None or self.function is None:
            return {}, None
        (debug, module), function = found, self.function
        registers = {name: getattr(hit.registers, name) for name in REGISTERS}
        pc = hit.address - module.bias
        frame = Frame(registers, pc, cfa=lambda: debug.cfa(pc, registers),
                      read_word=lambda address: int.from_bytes(read(address, 8), "little"))
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

    def _evaluate(self, hit: Hit | None, read: Callable[[int, int], bytes] | None = None
                  ) -> tuple[tuple[Value, ...], list[str]]:
        """Every expression at the hit (None: globals only), reading with ``read`` (the
        target's memory unless given)."""
        results = [self._evaluate_one(hit, index, read) for index in range(len(self.config.expressions))]
        return _joined(self.config.expressions, results)

    def _evaluate_one(self, hit: Hit | None, index: int, read: Callable[[int, int], bytes] | None = None,
                      on_branch: Callable[[], None] | None = None) -> tuple[Value, str]:
        """One expression: (value, '') or (None, why not). ``on_branch`` is told when the
        evaluation took a way the data chose (an interface's dynamic type, a C string's end)."""
        memory = self.memory
        assert memory is not None
        read = read or memory.read
        scope, _ = self._scope(hit, read)

        def resolve(name: str) -> Object | None:
            local = scope.get(name)
            if local is not None:
                return local.get()
            if name.partition(".")[0] in scope:  # b.w with a local b: a field, not a global
                return None
            found = self._global(name)
            if found is None and hit is not None and name in self._arguments:  # no DWARF name: the ABI's
                return Object(ARGUMENT_TYPE, InRegister(self._arguments[name]))
            return found

        def register(name: str) -> int:
            if hit is None:
                raise SampleError("registers are only known at a breakpoint")
            return int(getattr(hit.registers, name))

        evaluator = Evaluator(resolve, read, register, self._where(), self.name_hint,
                              self._go_types.dynamic if self._go_types is not None else None, on_branch)
        try:
            return evaluator.value(self.config.expressions[index].tree), ""
        except SampleError as e:
            return None, str(e)

    def _global(self, name: str) -> Object | None:
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
        self._globals[name] = result
        return result

    def _where(self) -> str:
        if self.function is not None:
            return f"among the parameters and locals of {self.function.name} nor among the globals"
        if self.address is not None:
            return "among the globals (no DWARF function at the breakpoint)"
        return "among the globals (without --at only globals can be read)"

    def _check_names(self) -> None:
        """Before attaching: every plain name must be a local at the location or a global.
        Everything the hit needs from the DWARF is read now, not while the thread waits."""
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
        for index, expression in enumerate(self.config.expressions):
            for node in ast.walk(expression.tree):
                dotted = dotted_name(node) if isinstance(node, ast.Attribute) else None
                if dotted is not None and dotted.partition(".")[0] not in names:
                    self._global(dotted)  # looked up now, not at a hit (main.ring, a Go global)
                if isinstance(node, ast.Name) and node.id.startswith(REGISTER_PREFIX):
                    self._check_register(register_name(node.id))
                elif isinstance(node, ast.Name) and node.id not in (DEREF, *BUILTINS) \
                        and not node.id.startswith(casts.PREFIX):
                    name = source_name(node.id)
                    if name in names or (self.is_go and defines_package(self.modules, name)) \
                            or self._global(name) is not None:
                        continue  # a Go package (main of main.ring) is no global: not searched for as one
                    if _ARGUMENT.match(name):
                        self._check_argument(name)
                    elif not defines_package(self.modules, name) and name not in unknown.get(index, []):
                        unknown.setdefault(index, []).append(name)
        if unknown:
            self._short_form(unknown)

    def _short_form(self, unknown: dict[int, list[str]]) -> None:
        """Names that are no local, parameter or global: fields of the globals (fields.py)."""
        debug = self.modules.main.debug()
        expressions = list(self.config.expressions)
        for index, names in unknown.items():
            paths = {name: field_paths(debug, name, self.is_go) if debug is not None else [] for name in names}
            for name, found in paths.items():
                if not found:
                    raise ExpressionError(f"no variable {name!r} {self._where()}, nor a field of a global "
                                          f"of that name{self._no_dwarf()}", self._no_dwarf_hint() or self.name_hint)
            expressions[index], said = expand(expressions[index], paths)
            notice.say(said)
        self.config = dataclasses.replace(self.config, expressions=tuple(expressions))
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


ARGUMENTS = {f"arg{i}": register for i, register in enumerate(("rdi", "rsi", "rdx", "rcx", "r8", "r9"))}
"""The integer arguments at a function's entry, System V AMD64 ABI."""
GO_ARGUMENTS = {f"arg{i}": register for i, register in
                enumerate(("rax", "rbx", "rcx", "rdi", "rsi", "r8", "r9", "r10", "r11"))}
"""The integer arguments at a Go function's entry, Go's internal register ABI (Go 1.17+)."""
ARGUMENT_TYPE = Scalar("uint64_t", 8, "unsigned")
_ARGUMENT = re.compile(r"^arg\d+$")
REGISTER_NAMES = (*REGISTERS, "eflags", "orig_rax", "fs_base", "gs_base", "cs", "ss", "ds", "es", "fs", "gs")
"""What ``$name`` may name: the fields of struct user_regs_struct."""


def _joined(expressions: Sequence[Expression], results: Sequence[tuple[Value, str] | None]
            ) -> tuple[tuple[Value, ...], list[str]]:
    """The row's values, and its errors as 'name: why'."""
    values: list[Value] = []
    errors: list[str] = []
    for expression, result in zip(expressions, results):
        value, error = result if result is not None else (None, "not evaluated")
        values.append(value)
        if error:
            errors.append(f"{expression.name}: {error}")
    return tuple(values), errors


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
