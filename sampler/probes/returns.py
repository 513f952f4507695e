"""Where the calls of a function end (trace --latency): a breakpoint at each of its returns.

The function's code is decoded from its start (exits.py). Each ``ret`` is a return point. A jump
out of the function (a tail call: ``jmp other`` as its last act; or a jump into its own cold part,
``f.cold``) is followed: the code it jumps to runs in the same frame and ends the call with its own
``ret``, at the same stack pointer, so its returns are return points too (up to MAX_FOLLOWED
functions; every call of a function followed stops at its returns, a cost the start line says). A
jump through a register or memory (a switch's table, or a tail call through a pointer) cannot be
followed: the calls that leave that way are counted as "no return seen" when their frame is seen
gone, and the start line says the function has such jumps.

Nothing here writes the target: the code is read from the module's file (as it was loaded: the memory
may hold int3s by then, sampler's own copies in a forked child or another tool's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sampler.debuginfo.demangle import demangle
from sampler.debuginfo.exits import exits
from sampler.debuginfo.modules import Modules
from sampler.debuginfo.x86 import Refused

MAX_FOLLOWED = 16
"""Functions decoded for one --latency site: its own and those its tail calls go to."""
MAX_FUNCTION_BYTES = 1 << 18


@dataclass
class ReturnPoints:
    start: int = 0
    """Run-time address where the function starts."""
    addresses: set[int] = field(default_factory=set)
    """Run-time address of every return instruction where a call of the site's function ends."""
    own: set[int] = field(default_factory=set)
    """Of those, the function's own (not those of the functions its tail calls go to)."""
    followed: list[str] = field(default_factory=list)
    """The functions (other than its own) whose returns end its calls: its tail calls' targets."""
    targets: set[int] = field(default_factory=set)
    """Where its direct tail calls go (run-time addresses)."""
    unfollowed: int = 0
    """Tail calls whose target could not be decoded (a PLT stub, no symbol): calls leaving by them
    are counted as "no return seen"."""
    indirect: int = 0
    """Jumps through a register or memory in the code decoded (a switch, or a tail call)."""
    why_not: str = ""
    """Why the function's returns could not be found at all ('' when they were)."""


def return_points(modules: Modules, address: int) -> ReturnPoints:
    """The returns of the function holding ``address`` (a run-time address), tail calls followed."""
    found = ReturnPoints()
    todo = [address]
    seen: set[int] = set()
    while todo:
        at = todo.pop(0)
        module = modules.containing(at)
        span = module.function_span(at - module.bias) if module is not None else None
        if module is None or span is None or span[1] <= 0:
            if at == address:
                found.why_not = "no symbol or unwind entry says where its function starts and ends"
                return found
            found.unfollowed += 1
            continue
        start = span[0] + module.bias
        if start in seen:
            continue
        if len(seen) >= MAX_FOLLOWED:
            found.unfollowed += 1
            continue
        seen.add(start)
        if span[1] > MAX_FUNCTION_BYTES:
            if at == address:
                found.why_not = f"it is {span[1]:,} bytes long: over the {MAX_FUNCTION_BYTES:,} decoded for returns"
                return found
            found.unfollowed += 1
            continue
        # the file's bytes: the memory may hold int3s already (sampler's own copies in a forked child,
        # another tool's), which would hide a return or throw the decoding out of step
        code = module.file.bytes_at(span[0], span[1])
        if code is None:
            if at == address:
                found.why_not = "its code cannot be read"
                return found
            found.unfollowed += 1
            continue
        try:
            out = exits(code, start)
        except Refused as e:
            if at == address:
                found.why_not = f"its code cannot be decoded ({e})"
                return found
            found.unfollowed += 1
            continue
        if at == address:
            found.start = start
        else:
            found.followed.append(_name(modules, start))
        found.addresses.update(out.returns)
        if at == address:
            found.own.update(out.returns)
        found.indirect += len(out.indirect)
        todo.extend(target for _, target in out.tail_calls)
        found.targets.update(target for _, target in out.tail_calls)
    if not found.addresses and not found.why_not:
        found.why_not = "no return instruction was found in its code (a function that never returns?)"
    return found


def _name(modules: Modules, start: int) -> str:
    module = modules.containing(start)
    if module is None:
        return f"{start:#x}"
    for name, symbol in module.function_symbols():
        if symbol.address + module.bias == start:
            return demangle(name) or name
    return f"{start:#x}"
