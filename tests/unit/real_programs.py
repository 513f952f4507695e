"""Debian's programs whose every function the decoding tests run over (relocation, exits): each
function's bytes as the file has them."""

from __future__ import annotations

import os

import pytest

from sampler.debuginfo.elffile import ElfFile
from tests.long import LONG

PROGRAMS = {"libc": "/usr/lib/x86_64-linux-gnu/libc.so.6", "redis-server": "/usr/bin/redis-server",
            "python3": "/usr/bin/python3.11"}
SHORT = {"return_probes": ("libc",), "exits": ("libc",)}
"""make test's programs for each test (make test-long: every one): python3 took 21 s of the return
probes' and 9 s of the exits', redis-server 7 s of each, on CI's VM (2026-12-06)."""


def programs(test: str) -> list[str]:
    return sorted(PROGRAMS) if LONG else list(SHORT[test])


def text_functions(name: str) -> tuple[str, bytes, int, list[tuple[int, int]]]:
    """(the file's path, its .text, .text's address, (address, size) of each function in it); a test
    without the file fails under CI (make setup installs it), else skips."""
    path = PROGRAMS[name]
    if not os.path.exists(path):
        if os.environ.get("CI"):
            pytest.fail(f"{path} is missing: make setup installs it")
        pytest.skip(f"{path} is missing")
    with ElfFile(path) as elf:
        text = elf.elf.get_section_by_name(".text")
        data, base = text.data(), text["sh_addr"]
        functions = sorted({(s.address, s.size) for s in elf.symbols().values()
                            if s.is_function and s.size and base <= s.address < base + len(data)})
    return path, data, base, functions
