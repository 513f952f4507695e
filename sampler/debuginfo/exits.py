"""Where a function's code leaves it (issue 37's return probes): every return, every jump out of it.

Decoding the whole function (capstone, as relocate.py does), each instruction that leaves it is one of:

- a return (`ret`, `ret imm16`, `repz ret`): a probe there sees the call end, with its result in rax
  (or xmm0) and the stack pointer where it was at the entry (the return address on top);
- a tail call: a `jmp` or a conditional jump whose target lies outside the function (GCC and clang
  end a function with `jmp other` when its last act is a call): the call ends in another function's
  return, so a probe at the entry and the returns of this one alone would never see it end;
- an indirect jump (through a register or memory): a switch's table inside the function, or a tail
  call through a pointer; which one cannot be told from the code alone.

Nothing here is written to the target; the function's bytes come from the caller (the process's
memory or the file).
"""

from __future__ import annotations

from dataclasses import dataclass

from capstone import x86_const as X  # type: ignore[import-untyped]

from sampler.debuginfo.x86 import decode


@dataclass(frozen=True)
class Exits:
    returns: tuple[int, ...]
    """The address of each return instruction."""
    tail_calls: tuple[tuple[int, int], ...]
    """(the jump's address, its target outside the function) of each jump out."""
    indirect: tuple[int, ...]
    """The address of each jump through a register or memory."""

    @property
    def only_returns(self) -> bool:
        """Every way out is a return: a probe at each sees every call end (but a longjmp, an exception
        or a call that never returns)."""
        return not self.tail_calls and not self.indirect


def exits(code: bytes, start: int) -> Exits:
    """The ways out of the function whose ``code`` starts at ``start``; x86.Refused (with the
    reason) when it cannot be decoded."""
    end = start + len(code)
    returns: list[int] = []
    tails: list[tuple[int, int]] = []
    indirect: list[int] = []
    for instruction in decode(code, start):
        groups = set(instruction.groups)
        if X.X86_GRP_RET in groups or X.X86_GRP_IRET in groups:
            returns.append(instruction.address)
        elif X.X86_GRP_JUMP in groups:
            targets = [op.imm for op in instruction.operands if op.type == X.X86_OP_IMM]
            if not targets:
                indirect.append(instruction.address)
            elif not start <= targets[0] < end:
                tails.append((instruction.address, targets[0]))
    return Exits(tuple(returns), tuple(tails), tuple(indirect))
