"""Where a module's code branches to: which direct jumps, conditional jumps and calls land inside a few bytes.

An in-process probe's jump takes 5 bytes of a function. A branch from another function that lands inside
them runs half a jump: glibc's __mempcpy_avx512_unaligned_erms ends with a jump to the fourth byte of
memmove's (its ``mov rax, rdi`` done), and a trace of every libc function killed its target there with
SIGSEGV. The function's own branches are relocate.py's to check; this finds the others.

Decoding a whole module to find them took 1.5 s for a 6 MiB Go program. Instead, every byte of its code is
read once as the opcode of a branch with a relative operand (numpy: E8, E9, 0F 80-8F with 32 bits, EB, 70-7F,
E0-E3 with 8), most of them not instructions at all; only the functions that hold a candidate landing inside
the bytes asked about are decoded (capstone), from their start, and the candidate counts when one of their
instructions truly branches there. A candidate in code no symbol of known size or unwind entry places
(crt's register_tm_clones, whose `jmp *%rax` holds E0, a loopne's opcode) is decoded from the start of its
section up to it. What a register-indirect branch reaches is not known here (relocate.py's computed gotos
are the function's own)."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from sampler.debuginfo import x86

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

MAX_CODE = 256 << 20
"""Bytes of a module's code looked at, at most (a hostile file claims what it likes)."""
MAX_FUNCTION = 1 << 20
"""Bytes of one function decoded, at most."""

Span = Callable[[int], "tuple[int, int] | None"]
"""The function holding a file address: (start, size), None when no symbol or unwind entry places it."""


class Branches:
    """The candidate branches of one module's code (file addresses), and what decoding found of them."""

    def __init__(self, sections: Iterable[tuple[int, bytes]], span: Span) -> None:
        import numpy as np

        self.sections: list[tuple[int, bytes]] = []
        targets, sources = [], []
        kept = 0
        for address, code in sorted(sections):
            code = code[:max(0, MAX_CODE - kept)]
            kept += len(code)
            self.sections.append((address, code))
            found = _candidates(code, address)
            targets.append(found[0])
            sources.append(found[1])
        target = np.concatenate(targets) if targets else np.zeros(0, np.int64)
        order = np.argsort(target, kind="stable")
        self.targets: npt.NDArray[np.int64] = target[order]
        self.sources: npt.NDArray[np.int64] = (np.concatenate(sources) if sources else np.zeros(0, np.int64))[order]
        self.starts = [address for address, _ in self.sections]
        self.span = span
        self._decoded: dict[tuple[int, int], set[int]] = {}

    def inside(self, start: int, end: int) -> int | None:
        """The first place strictly between ``start`` and ``end`` (file addresses) a branch of the module's code
        lands; None when none does."""
        import numpy as np

        low, high = np.searchsorted(self.targets, [start + 1, end])
        for target, source in sorted(zip(self.targets[low:high].tolist(), self.sources[low:high].tolist())):
            function = self.span(source)
            if function is None or function[1] <= 0:  # (no symbol of known size places it: decoded from the
                section = self._section_start(source)  # start of its section up to it, the way it runs)
                function = (section, source + 16 - section) if section is not None else None
            if function is None or target in self._targets_of(function[0], function[1]):
                return int(target)
        return None

    def _section_start(self, address: int) -> int | None:
        section = self._section(address)
        return section[0] if section is not None and address < section[0] + len(section[1]) else None

    def _section(self, address: int) -> tuple[int, bytes] | None:
        """The section at or before ``address``."""
        at = bisect.bisect_right(self.starts, address) - 1
        return self.sections[at] if at >= 0 else None

    def _targets_of(self, start: int, size: int) -> set[int]:
        """Where the instructions of the ``size`` bytes at ``start`` branch to (decoded once)."""
        found = self._decoded.get((start, size))
        if found is None:
            section = self._section(start)
            code = section[1][start - section[0]:start - section[0] + min(size, MAX_FUNCTION)] if section else b""
            found = self._decoded[(start, size)] = {target for instruction in x86.SWEEPING.disasm(code, start)
                                                    for target in x86.branch_targets(instruction)}
        return found

def _candidates(code: bytes, address: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(targets, sources): every place in ``code`` whose byte is a relative branch's opcode, and where its
    operand would send it (file addresses). Only the candidates' operands are read (a gather each)."""
    import numpy as np

    if len(code) < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    data = np.frombuffer(code + bytes(6), np.uint8)
    op, following = data[:len(code)], data[1:len(code) + 1]
    short = np.flatnonzero((op == 0xEB) | ((op >= 0x70) & (op <= 0x7F)) | ((op >= 0xE0) & (op <= 0xE3)))
    near = np.flatnonzero((op == 0xE8) | (op == 0xE9))
    conditional = np.flatnonzero((op == 0x0F) & (following >= 0x80) & (following <= 0x8F))

    def rel32(at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        word = (data[at].astype(np.int64) | data[at + 1].astype(np.int64) << 8 | data[at + 2].astype(np.int64) << 16
                | data[at + 3].astype(np.int64) << 24)
        return np.where(word >= 1 << 31, word - (1 << 32), word)

    rel8 = data[short + 1].astype(np.int64)
    targets = np.concatenate([short + 2 + np.where(rel8 >= 128, rel8 - 256, rel8), near + 5 + rel32(near + 1),
                              conditional + 6 + rel32(conditional + 2)]) + address
    sources = np.concatenate([short, near, conditional]).astype(np.int64) + address
    return targets, sources
