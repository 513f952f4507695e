"""A profile to a file by the file's suffix, and `sampler report FILE.folded`.

to_file is what `sampler profile --out FILE` writes: ``.svg`` (the flame graph), ``.folded``
(flamegraph.pl's and inferno's input) or ``.speedscope.json``. report_folded is what
`sampler report cpu.folded [--plot cpu.svg]` prints: the functions where the samples are.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping

from sampler import notice, writes
from sampler.errors import UsageError
from sampler.printable import printable
from sampler.profile import flamegraph, folded, speedscope
from sampler.profile.names import TOOLTIP_CHARS

SUFFIXES = (".svg", ".folded", ".speedscope.json")
"""The files a profile is written as."""


def format_of(path: str) -> str:
    """The suffix of SUFFIXES that ``path`` ends with (any case); a UsageError for another."""
    lower = path.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if lower.endswith(suffix):
            return suffix
    raise UsageError(f"{printable(path)}: a profile is written as .svg (a flame graph), .folded (flamegraph.pl's "
                     "and inferno's input) or .speedscope.json (speedscope's)",
                     "give the file one of these three suffixes, e.g. --out cpu.svg")


def to_file(stacks: Mapping[str, int], path: str, title: str, subtitle: str, option: str = "--out",
            checked: bool = False) -> str:
    """Write ``stacks`` (folded stack -> samples) to ``path`` in the format its suffix names;
    ``title`` and ``subtitle`` head the flame graph (the subtitle: the run's figures), the title
    names speedscope's profile. Returns one line (no newline) that says what was written."""
    suffix = format_of(path)
    samples = sum(count for stack, count in stacks.items() if count > 0 and stack)
    count = sum(1 for stack, n in stacks.items() if n > 0 and stack)
    figures = f"{samples:,} samples in {count:,} {'stack' if count == 1 else 'stacks'}"
    if suffix == ".svg":
        drawing = flamegraph.draw(stacks, title, subtitle)
        text = drawing.text
        left_out = (f"; {drawing.left_out:,} left out: narrower than {flamegraph.MIN_WIDTH_PX:g} px, deeper than "
                    f"{flamegraph.MAX_DEPTH:,} or past {flamegraph.MAX_FRAMES:,}" if drawing.left_out else "")
        what = f"a flame graph of {figures} ({drawing.frames:,} frames{left_out})"
    elif suffix == ".folded":
        text = folded.write(stacks)
        what = f"{figures}, folded (flamegraph.pl's and inferno's input)"
    else:
        text = speedscope.document(stacks, title)
        what = f"{figures} for speedscope (https://www.speedscope.app)"
    planted = writes.write_file(path, text.encode("utf-8", errors="replace"), option, checked)
    if planted:
        notice.say(planted)
    return f"{printable(path)}: {what}"


def report_folded(path: str, plot: str | None, top: int) -> str:
    """What `sampler report FILE.folded` prints: the stacks and samples, the ``top`` functions
    by self samples (the innermost frame) and by total samples (anywhere in a stack, once per
    stack however often it recurs); with ``plot``, that file written by its suffix as well."""
    if plot is not None:
        format_of(plot)  # a wrong suffix before the file is read
    stacks = folded.load(path)
    if not stacks:
        raise folded.FoldedError(f"{printable(path)}: no stacks in it")
    samples = sum(stacks.values())
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    for stack, count in stacks.items():
        frames = stack.split(";")
        own[frames[-1]] += count
        for name in set(frames):
            anywhere[name] += count
    lines = [f"{printable(path)}: {samples:,} samples in {len(stacks):,} stacks, {len(anywhere):,} functions", ""]
    lines += _table(f"Top {top} by self samples (the function itself running):", own, samples, top)
    lines.append("")
    lines += _table(f"Top {top} by total samples (the function anywhere in the stack):", anywhere, samples, top)
    if plot is not None:
        title = f"Flame Graph: {os.path.basename(path)}"
        drawn = to_file(stacks, plot, title, f"{samples:,} samples in {len(stacks):,} stacks", "--plot")
        lines += ["", "plot: " + drawn]
    return "\n".join(lines) + "\n"


def _table(title: str, counts: Counter[str], samples: int, top: int) -> list[str]:
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:top]
    width = max(len("samples"), *(len(f"{n:,}") for _, n in ranked))
    lines = [title, f"  {'samples'.rjust(width)}        %  function"]
    for name, count in ranked:
        shown = printable(name) or '""'
        if len(shown) > TOOLTIP_CHARS:
            shown = shown[:TOOLTIP_CHARS - 2] + ".."
        lines.append(f"  {count:>{width},}  {100 * count / samples:6.1f}%  {shown}")
    return lines


def check_writable(path: str) -> None:
    """Refuse, before a profile starts, a path whose file could not be written at its end (its
    folder missing or not writable, a folder by that name, a link, another user's file): the
    samples would be lost."""
    writes.check_file(path)
