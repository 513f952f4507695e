"""Where a module's code branches to: every direct jump's, conditional jump's and call's target, from a
linear sweep of its executable sections (capstone), sorted once per module.

An in-process probe's jump takes 5 bytes of a function. A branch from another function that lands inside
them runs half a jump: glibc's __mempcpy_avx512_unaligned_erms ends with a jump to the fourth byte of
memmove's (its ``mov rax, rdi`` done), and a trace of every libc function killed its target there with
SIGSEGV. The function's own branches are relocate.py's to check; this finds the others. A sweep that
loses its way in data between functions (rare in ELF code: padding is nops) finds it again within a few
instructions; what a register-indirect branch reaches is not known here (relocate.py's computed gotos are
the function's own)."""

from __future__ import annotations

import bisect
from collections.abc import Iterable

MAX_CODE = 256 << 20
"""Bytes of a module's code swept at most (a hostile file claims what it likes)."""
BRANCHES = ("j", "call", "loop")
"""Mnemonics (their starts) of the instructions whose immediate operand is where they go."""


class Branches:
    """The direct branch targets of one module's code (file addresses)."""

    def __init__(self, sections: Iterable[tuple[int, bytes]]) -> None:
        from capstone import CS_ARCH_X86, CS_MODE_64, Cs  # type: ignore[import-untyped]

        decoder = Cs(CS_ARCH_X86, CS_MODE_64)
        decoder.skipdata = True  # (bytes that decode to nothing are stepped over, the sweep goes on)
        targets: set[int] = set()
        swept = 0
        for address, code in sections:
            code = code[:max(0, MAX_CODE - swept)]
            swept += len(code)
            for _, _, mnemonic, operand in decoder.disasm_lite(code, address):
                if mnemonic.startswith(BRANCHES) and operand.startswith("0x"):
                    try:
                        targets.add(int(operand, 16))
                    except ValueError:
                        continue
        self.targets = sorted(targets)
        self.swept = swept

    def inside(self, start: int, end: int) -> int | None:
        """The first target strictly between ``start`` and ``end`` (file addresses); None when none is."""
        at = bisect.bisect_right(self.targets, start)
        return self.targets[at] if at < len(self.targets) and self.targets[at] < end else None
