"""Unwinding: from a thread's registers to its frames, innermost first.

Each step finds the caller's registers from the frame's code: Go's function table (pcsp: how far
the stack pointer is below the frame's top) for Go code, the call frame information (.eh_frame,
.debug_frame: the CFA and where each register was saved, signal frames included) for the rest,
and the frame pointer where neither covers the pc. The registers not known (a thread read without
stopping it has only its stack and instruction pointers) stay unknown: a rule that needs one ends
the stack there with the reason, as does a pc in no code, a stack pointer that does not move up, a
frame seen before or --max-depth frames: never a loop, never a guess taken for a frame.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sampler.debuginfo.gopclntab import BadTable
from sampler.debuginfo.x86 import MASK as MASK
from sampler.debuginfo.x86 import NAMES as NAMES
from sampler.debuginfo.x86 import RBP as RBP
from sampler.debuginfo.x86 import RIP as RIP
from sampler.debuginfo.x86 import RSP as RSP
from sampler.debuginfo.x86 import registers_of as registers_of
from sampler.process.reads import Read, UnreadableMemory
from sampler.unwind.code import Code, CodeMap, Place
from sampler.unwind.expression import BadExpression, evaluate
from sampler.unwind.frames import Frame, Stack

MAX_DEPTH = 256
"""Frames of one stack, unless --max-depth says otherwise."""
TOPFRAME, SPWRITE = 1, 2
"""Go's function flags (runtime/symtab.go): the outermost frame; a function that writes SP."""


class Unknown(Exception):
    """A register the unwinder needs was not read (the thread was not stopped)."""


@dataclass
class _Step:
    registers: dict[int, int]
    how: str
    exact: bool = False
    """The caller's pc is where it was interrupted (below a signal frame), not a return address."""
    last: bool = False
    """The frame is an outermost one (Go's TOPFRAME): a caller in no code is the end, not a fault."""


def unwind(registers: dict[int, int], code: CodeMap, read: Read, max_depth: int = MAX_DEPTH,
           exact: bool = True) -> Stack:
    """The frames of a thread whose registers (by DWARF number) are known: at least RIP and RSP.
    ``exact``: RIP is where the thread is (not a return address)."""
    stack = Stack()
    seen: set[tuple[int, int]] = set()
    how, depth, after_last = "registers", 0, False
    while True:
        pc, sp = registers.get(RIP), registers.get(RSP)
        if pc is None or sp is None:
            stack.ended = "the stack and instruction pointers are not known"
            return stack
        if depth and pc == 0:
            return stack  # a zeroed return address: the outermost frame's caller
        if depth >= max_depth:
            stack.ended = f"deeper than {max_depth} frames (--max-depth)"
            return stack
        if (pc, sp) in seen:
            stack.ended = "the same frame twice: the stack goes in a loop"
            return stack
        seen.add((pc, sp))
        lookup = pc if exact else pc - 1
        module = code.at(lookup)
        named = _named(pc, lookup, module, code, how)
        try:
            step = _step(registers, lookup, module, read, innermost=depth == 0 or exact)
        except Unknown as e:
            step = f"{e} (the thread was read without stopping it)"
            stack.short_of_registers = True
        except UnreadableMemory as e:
            step = f"its caller's frame cannot be read ({e})"
        except (BadExpression, BadTable, ValueError) as e:
            step = f"the unwind information at {pc:#x} cannot be used ({e})"
        except Exception as e:  # the module's bytes (CFI, Go's table): whatever they make a parser do
            step = f"the unwind information at {pc:#x} cannot be used ({type(e).__name__})"
        if isinstance(step, _Step) and step.how == "signal":
            named = [Frame(pc, named[-1].function, named[-1].offset, named[-1].module, how=how, signal=True)]
        stack.frames += named
        depth += 1
        if step is None:
            return stack  # the outermost frame
        if isinstance(step, str):
            stack.ended = None if after_last else step  # past an outermost frame: the end, not a fault
            return stack
        if step.last and code.at(step.registers.get(RIP, 0) - 1) is None:
            return stack
        caller_sp = step.registers.get(RSP)
        if caller_sp is not None and caller_sp <= sp and step.how != "signal":
            stack.ended = f"the stack pointer does not move up at {pc:#x} (a damaged stack?)"
            return stack
        if module is not None and not step.exact:
            for after, place in _tail_calls(module, lookup, step.registers.get(RIP), code):
                stack.frames.append(Frame(after + module.bias, place.function, place.offset, module.name,
                                          place.file, place.line, how="tail call"))
        registers, how, exact, after_last = step.registers, step.how, step.exact, step.last


def _named(pc: int, lookup: int, module: Code | None, code: CodeMap, how: str) -> list[Frame]:
    """The frames at one pc: the functions inlined there (innermost first), then the function."""
    if module is None:
        return [Frame(pc, module=code.name_at(lookup), how=how)]
    place = module.place(lookup - module.bias)
    frames = []
    file, line = place.file, place.line
    for name, call_file, call_line in place.inlined:
        frames.append(Frame(pc, name, None, module.name, file, line, inlined=True, how=how))
        file, line = call_file, call_line
    frames.append(Frame(pc, place.function, _offset(place, pc, lookup), module.name, file, line, how=how))
    return frames


def _tail_calls(module: Code, lookup: int, returns: int | None, code: CodeMap) -> list[tuple[int, Place]]:
    """gdb's tailcall frames between a frame and its caller: the caller's call site names the
    function it called; that function's DWARF (in the caller's module, or the callee's when it
    is another module's) says which tail calls led to the frame."""
    caller = code.at(returns - 1) if returns else None
    if caller is None or returns is None:
        return []
    start, name = caller.call_target(returns - caller.bias)
    if start is not None and caller is not module:
        return []  # a call into its own module that ended up in another: no chain to follow
    if start is None and name is None:
        return []
    return module.tail_calls(start, name, lookup - module.bias)


def _offset(place: Place, pc: int, lookup: int) -> int | None:
    return None if place.offset is None else place.offset + (pc - lookup)


def _step(registers: dict[int, int], lookup: int, module: Code | None, read: Read,
          innermost: bool) -> _Step | str | None:
    """The caller's registers; None at the outermost frame, a reason when it cannot be found."""
    if module is not None:
        go = module.function(lookup - module.bias)
        if go is not None and module.go is not None:
            return _go_step(registers, lookup - module.bias, go, module, read, innermost)
        if module.frames is not None:
            row = _cfi_row(module, lookup - module.bias)
            if row is not None:
                return _cfi_step(registers, row, module, read)
    return _frame_pointer_step(registers, lookup, module, read)


def _cfi_row(module: Code, pc: int) -> tuple[dict[Any, Any], int, bool] | None:
    assert module.frames is not None
    try:
        return module.frames.row(pc)
    except Exception:  # the module's own bytes, damaged: the frame pointer is tried instead
        return None


def _word(read: Read, address: int) -> int:
    return int.from_bytes(read(address, 8), "little")


def _cfi_step(registers: dict[int, int], found: tuple[dict[Any, Any], int, bool], module: Code,
              read: Read) -> _Step | str | None:
    row, ra_column, signal_frame = found
    rule = row.get("cfa")
    if rule is None:
        return "no frame address rule"

    def register(number: int) -> int:
        value = registers.get(number)
        if value is None:
            raise Unknown(f"register {NAMES[number] if number < len(NAMES) else number} is not known")
        return value

    if rule.expr is not None:
        cfa = evaluate(bytes(rule.expr), register, read)
    elif rule.reg is None or rule.offset is None:
        return "a frame address rule without a register or an offset"
    else:
        cfa = (register(int(rule.reg)) + int(rule.offset)) & MASK
    caller: dict[int, int] = {n: v for n, v in registers.items() if n not in (RSP, RIP) and _callee_saved(n)}
    if signal_frame:
        caller = {}
    for number, how in row.items():
        if not isinstance(number, int):
            continue
        kind = how.type
        try:
            if kind == "UNDEFINED":
                caller.pop(number, None)
                if number == ra_column:
                    return None  # the outermost frame (_start, clone3's child)
            elif kind == "SAME_VALUE":
                if number in registers:
                    caller[number] = registers[number]
            elif kind == "OFFSET":
                caller[number] = _word(read, (cfa + int(how.arg)) & MASK)
            elif kind == "VAL_OFFSET":
                caller[number] = (cfa + int(how.arg)) & MASK
            elif kind == "REGISTER":
                caller[number] = register(int(how.arg))
            elif kind == "EXPRESSION":
                caller[number] = _word(read, evaluate(bytes(how.arg), register, read, initial=cfa))
            elif kind == "VAL_EXPRESSION":
                caller[number] = evaluate(bytes(how.arg), register, read, initial=cfa)
        except Unknown:
            caller.pop(number, None)
            if number == ra_column:
                raise
    if ra_column not in caller:
        if ra_column in row:
            return "the return address is not known"
        caller[ra_column] = _word(read, (cfa - 8) & MASK)  # no rule: x86-64's call pushed it below the CFA
    if RSP not in caller:
        caller[RSP] = cfa
    caller[RIP] = caller.pop(ra_column) if ra_column != RIP else caller[RIP]
    return _Step(caller, "signal" if signal_frame else "cfi", exact=signal_frame)


def _callee_saved(number: int) -> bool:
    """rbx, rbp, r12-r15: a caller's value lives on in them unless a rule says where it was saved."""
    return number in (3, 6, 12, 13, 14, 15)


def _go_step(registers: dict[int, int], pc: int, function: Any, module: Code, read: Read,
             innermost: bool) -> _Step | str | None:
    """Go's own unwinding (runtime.gentraceback): the return address lies ``pcsp`` bytes above
    the stack pointer, the caller's frame pointer just below it."""
    assert module.go is not None
    flags = module.go.flags(function)
    if flags & TOPFRAME and function.name != "runtime.mstart":
        return None  # the outermost frame, as Go's own traceback says (goexit, rt0_go)
    if flags & SPWRITE and not innermost:
        return f"{function.name} switched stacks (Go's own traceback stops there too)"
    delta = module.go.sp_delta(function, pc)
    if delta is None:
        return f"no stack pointer table for {function.name} at {pc + module.bias:#x}"
    sp = registers[RSP]
    caller = {RIP: _word(read, sp + delta), RSP: sp + delta + 8}
    if delta > 0:
        try:
            caller[RBP] = _word(read, sp + delta - 8)
        except UnreadableMemory:
            pass
    elif RBP in registers:
        caller[RBP] = registers[RBP]
    return _Step(caller, "go", last=bool(flags & TOPFRAME))  # (mstart: a cgo thread's C frames below it)


def _frame_pointer_step(registers: dict[int, int], pc: int, module: Code | None, read: Read) -> _Step | str:
    """No unwind information covers pc: at a function's first instruction the return address is
    on top of the stack; elsewhere the frame pointer chain (rbp -> saved rbp, return address)."""
    sp = registers[RSP]
    if module is not None and module.starts_function(pc - module.bias):
        return _Step({RIP: _word(read, sp), RSP: sp + 8, **_kept(registers, RBP)}, "frame pointer")
    bp = registers.get(RBP)
    if bp is None:
        raise Unknown("no unwind information covers the pc and the frame pointer is not known")
    if not sp <= bp < sp + (1 << 24) or bp % 8:
        return f"no unwind information at {pc:#x}, and rbp ({bp:#x}) is no frame pointer"
    return _Step({RBP: _word(read, bp), RIP: _word(read, bp + 8), RSP: bp + 16}, "frame pointer")


def _kept(registers: dict[int, int], *numbers: int) -> dict[int, int]:
    return {n: registers[n] for n in numbers if n in registers}

