"""sampler's tables of CPython's layouts against the interpreters' own DWARF, and its decoding of
their line tables against the interpreters' own co_lines, on every instruction of three modules."""

from __future__ import annotations

import glob
import os
import re
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from sampler.python.dwarflayout import layout_of
from sampler.python.layouts import TABLES
from tests.integration.pythons import ALL, CI, ROOT, need

DEBIAN_DEBUG = "/usr/lib/debug/.build-id/c5/61f3aa7232f2bd6ac6d56bd475f1c154a00486.debug"
"""python3.11-dbg's debug file of Debian 12's /usr/bin/python3.11 (3.11.2-6+deb12u*)."""


def _with_dwarf() -> list[object]:
    found: list[object] = [pytest.param(path, id=Path(path).name) for path in
                           sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/lib/libpython3.*.so.1.0")))
                           if re.search(r"libpython3\.(8|9|1[0-3])\.", path)]
    found.append(pytest.param(DEBIAN_DEBUG, id="debian-3.11-dbg"))
    return found


@pytest.mark.parametrize("path", _with_dwarf())
def test_each_table_is_the_interpreters_own_dwarf(path: str) -> None:
    if not os.path.exists(path):
        if CI and path == DEBIAN_DEBUG:
            pytest.fail("python3.11-dbg's debug file is missing: make setup installs it (or Debian's python3.11 "
                        "is another build: see scripts/install-system-deps.sh)")
        pytest.skip(f"{path} is not here")
    minor = int(re.search(r"python3\.(\d+)", path).group(1)) if "python3." in path else 11  # type: ignore[union-attr]
    with open(path, "rb") as f:
        assert layout_of(ELFFile(f), (3, minor)) == TABLES[(3, minor)]


CHECK = """
import sys, types
from sampler.python.lines import last_line, line_at
v = sys.version_info[:2]
bad = total = 0
def check(code):
    global bad, total
    table = code.co_lnotab if v < (3, 10) else code.co_linetable
    if v >= (3, 10):  # (the largest line of any instruction: --at py:FILE.py:LINE's end of a function)
        lines = [line for _, _, line in code.co_lines() if line is not None]
        total += 1
        bad += last_line(v, table, code.co_firstlineno) != max(lines, default=code.co_firstlineno)
    if v >= (3, 10):
        for start, end, line in code.co_lines():
            for offset in range(start, end, 2):
                total += 1
                bad += line_at(v, table, code.co_firstlineno, offset) != (-1 if line is None else line)
    else:
        import dis
        starts = list(dis.findlinestarts(code))
        for offset in range(0, len(code.co_code), 2):
            want = code.co_firstlineno
            for at, line in starts:
                if at <= offset:
                    want = line
            total += 1
            bad += line_at(v, table, code.co_firstlineno, offset) != want
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            check(const)
import threading, json.decoder, os
for module in (threading, json.decoder, os):
    check(compile(open(module.__file__).read(), module.__file__, "exec"))
print(bad, total)
"""


@pytest.mark.parametrize("python", ALL)
def test_lines_are_the_interpreters_own(python: str) -> None:
    need(python)
    result = subprocess.run([python, "-c", CHECK], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    bad, total = map(int, result.stdout.split())
    assert total > 5000 and bad == 0, (bad, total)
