"""A short human line per sample on stderr: ``#3 delta=448 pause=5.1ms``."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TextIO

from sampler.output import RowByRow
from sampler.printable import printable
from sampler.sample import Sample, format_value


def format_line(sample: Sample, names: Sequence[str]) -> str:
    r = sample.reading
    parts = [f"#{sample.seq}"]
    parts += [f"{n}={printable(format_value(v))}" for n, v in zip(names, r.values) if v is not None]
    parts.append(f"pause={r.pause_us / 1000:.1f}ms")
    if sample.late_us >= 1000:
        parts.append(f"late={sample.late_us / 1000:.1f}ms")
    if r.error:
        parts.append(f"error: {printable(r.error)}")
    return " ".join(parts)


class ConsoleWriter(RowByRow):
    def __init__(self, names: Sequence[str], stream: TextIO | None = None, pids: bool = False) -> None:
        self.names = list(names)
        self.stream = stream or sys.stderr
        self.pids = pids
        """A run of many processes: each line says whose."""

    def begin(self) -> None:
        pass

    def write(self, sample: Sample) -> None:
        line = format_line(sample, self.names)
        if self.pids:
            seq, _, rest = line.partition(" ")
            line = f"{seq} pid={sample.pid} {rest}"
        try:
            print(line, file=self.stream, flush=True)
        except OSError:
            pass  # a closed terminal must not stop the sampling

    def close(self) -> None:
        pass
