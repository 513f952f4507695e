"""Folded stacks: one ``STACK COUNT`` line per stack, as flamegraph.pl and inferno read them.

``main;aeMain;aeProcessEvents;epoll_wait 42``: the frames outermost first, ``;`` between them,
then whitespace and the number of samples. The count is the last word of the line, so a name
with spaces in it (``operator new(unsigned long)``) reads back whole. A file to read is
hostile input: it is bounded (MAX_BYTES, MAX_LINES) and a line that is not a stack and a count
is one clear error naming the file and the line, never a traceback.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping

from sampler.errors import UsageError
from sampler.printable import printable

MAX_BYTES = 64 * 1024 * 1024
"""The largest folded file read (sampler's own for an hour at 999 Hz is far smaller)."""
MAX_LINES = 1_000_000
"""The most lines read: one per distinct stack."""
_LINE = re.compile(r"(.*\S)[ \t]+([0-9]{1,18})")
_HINT = "a .folded file has one 'frame;frame;... COUNT' line per stack (sampler profile --out FILE.folded)"


class FoldedError(UsageError):
    """A file that is not folded stacks, or too large to read."""

    hint = _HINT


def write(stacks: Mapping[str, int]) -> str:
    """One ``STACK COUNT`` line per stack, sorted (as flamegraph.pl's collapse scripts write them).

    A stack with no samples is left out; a line break or other control character in a name
    (it would end the line early) is written as an escape (``\\n``)."""
    lines = [f"{printable(stack)} {count}\n" for stack, count in stacks.items() if count > 0 and stack]
    return "".join(sorted(lines))


def read(text: str, source: str) -> dict[str, int]:
    """Every stack of ``text`` (the folded file ``source``) and its count; a stack on two lines
    is counted once with the sum. Blank lines and ``#`` comments are skipped; a line with a
    count of 0 adds nothing."""
    where = printable(source)
    if len(text) > MAX_BYTES:
        raise _too_large(where, f"more than {MAX_BYTES // (1024 * 1024)} MB")
    lines = text.split("\n")
    if len(lines) > MAX_LINES:
        raise _too_large(where, f"more than {MAX_LINES:,} lines")
    stacks: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        found = _LINE.fullmatch(line)
        if found is None:
            shown = printable(line[:60]) + ("..." if len(line) > 60 else "")
            raise FoldedError(f"{where} line {number}: not 'STACK COUNT' (a whole number of samples at the end): "
                              f"{shown}")
        count = int(found.group(2))
        if count:
            stacks[found.group(1)] = stacks.get(found.group(1), 0) + count
    return stacks


def load(path: str) -> dict[str, int]:
    """read() of the file at ``path``: its size checked before it is read, its bytes that are
    not UTF-8 read as U+FFFD."""
    where = printable(path)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise FoldedError(f"{where}: no such file", "give the .folded file that sampler profile wrote") from None
    except OSError as e:
        raise FoldedError(f"{where}: cannot be read ({e.strerror})", "check its permissions") from None
    if not stat.S_ISREG(info.st_mode):
        raise FoldedError(f"{where}: not a regular file", "give the .folded file that sampler profile wrote")
    if info.st_size > MAX_BYTES:
        raise _too_large(where, f"{info.st_size / (1024 * 1024):.0f} MB, more than {MAX_BYTES // (1024 * 1024)} MB")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_BYTES + 1)  # the file may have grown since stat
    except OSError as e:
        raise FoldedError(f"{where}: cannot be read ({e.strerror})", "check its permissions") from None
    if len(data) > MAX_BYTES:
        raise _too_large(where, f"more than {MAX_BYTES // (1024 * 1024)} MB")
    return read(data.decode("utf-8", errors="replace"), path)


def _too_large(where: str, size: str) -> FoldedError:
    return FoldedError(f"{where}: {size} of folded stacks: not read",
                       "fold fewer stacks into it (a shorter run, or a filter), or split it")
