"""The x86-64 decoders (capstone), built once, when this module is imported.

The worker imports it before it lets a Ctrl-C in (cli.py): a KeyboardInterrupt raised while
capstone's ``Cs()`` was building a decoder left a half-built object, whose ``__del__`` then
printed "Exception ignored ... AttributeError: 'Cs' object has no attribute 'csh'" under the
run's one line (test_ctrl_c, one Ctrl-C 0.3 s into a trace)."""

from __future__ import annotations

from capstone import CS_ARCH_X86, CS_MODE_64, Cs  # type: ignore[import-untyped]

PLAIN = Cs(CS_ARCH_X86, CS_MODE_64)
"""Mnemonics, operands as text and sizes: the cheaper decode."""

DETAILED = Cs(CS_ARCH_X86, CS_MODE_64)
"""With capstone's detail: the registers an instruction reads and writes, its operands."""
DETAILED.detail = True
