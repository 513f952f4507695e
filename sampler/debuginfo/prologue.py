"""Where in a function a breakpoint is reached exactly once per call, on every path.

A breakpoint after the prologue (the DWARF's prologue_end or second line) reads the
parameters where the body keeps them; but a branch between the entry and that place
means some calls never reach it (glibc's syscall wrappers test at their start whether
the process has threads, and the place after the prologue lies on one side only) and
a branch back means some calls reach it twice. So that place is used only when the
code from the entry to it cannot branch; else the breakpoint goes to the entry.

Go's stack check is the exception that proves the rule: ``cmp rsp, [r14+0x10]; jbe
morestack`` (or through r12 for a larger frame) leaves the function to grow the stack
and runs its start again, so a breakpoint at the entry counts that call twice and one
past the check counts it once. That branch is allowed, and a Go function without DWARF
gets its breakpoint right after the check (as Delve does).
"""

from __future__ import annotations

from sampler.debuginfo import x86

_DECODER = x86.PLAIN
_STACK_GUARD = ("qword ptr [r14 + 0x10]", "qword ptr [rcx + 0x10]")
"""Where a Go function compares the stack pointer with g.stackguard0 (R14 holds g; before
Go 1.17, RCX after it is loaded from the thread's TLS)."""
MAX_PROLOGUE = 16
"""Instructions looked at for a Go stack check."""


def _branches(mnemonic: str) -> bool:
    """Can this instruction go anywhere but the next one (a call returns: it cannot)?"""
    word = mnemonic.split()[-1]  # 'bnd jmp', 'notrack jmp', 'rep ret'
    return word.startswith(("j", "loop", "ret", "iret", "int", "ud", "hlt", "syscall", "sysenter", "xbegin",
                            "xabort"))


def _is_stack_check(previous: tuple[str, str] | None) -> bool:
    """Is the instruction before a conditional jump Go's stack check (or its overflow test)?"""
    if previous is None:
        return False
    mnemonic, operands = previous
    return (mnemonic == "cmp" and operands.endswith(_STACK_GUARD)) or \
        (mnemonic == "sub" and operands.startswith("r12,"))


def reached_once(code: bytes, start: int, place: int, go: bool = False) -> bool:
    """True when every call of the function that starts at ``start`` reaches ``place``
    exactly once. ``code`` is the function's code, as much of it as is known (its end, for
    the branches that could come back): nothing from the entry to ``place`` may branch
    (but Go's stack check, when ``go``), and no direct branch anywhere may jump to a place
    after the entry up to ``place`` (a loop's back edge). Indirect jumps are not followed
    (a switch's table leads to its cases, not into the prologue). False when the code
    cannot be decoded up to ``place``."""
    if place == start:
        return True
    previous: tuple[str, str] | None = None
    reached = False
    for at, _size, mnemonic, operands in _DECODER.disasm_lite(code, start):
        if at == place:
            reached = True
        elif at > place and not reached:
            return False
        if _branches(mnemonic):
            if not reached and not (go and mnemonic.startswith("j") and _is_stack_check(previous)):
                return False
            target = _direct_target(operands)
            if target is not None and start < target <= place:
                return False
        previous = (mnemonic, operands)
    return reached


def _direct_target(operands: str) -> int | None:
    """The address a direct jump goes to ('0x401234'), None for an indirect one."""
    try:
        return int(operands, 16) if operands.startswith("0x") else None
    except ValueError:
        return None


def past_stack_check(code: bytes, start: int) -> int | None:
    """The address right after a Go function's stack check (its ``jbe morestack``), when the
    function starts with one and nothing before it branches; else None."""
    previous: tuple[str, str] | None = None
    for count, (at, size, mnemonic, operands) in enumerate(_DECODER.disasm_lite(code, start)):
        if count >= MAX_PROLOGUE:
            return None
        if _branches(mnemonic):
            if not (mnemonic.startswith("j") and _is_stack_check(previous)):
                return None
            if previous is not None and previous[0] == "cmp":
                return int(at + size)
        previous = (mnemonic, operands)
    return None
