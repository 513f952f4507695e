"""Where samples go: one Writer per format, all fed the same Sample."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sampler.sample import Bulk, Sample


class Writer(Protocol):
    counts_only: bool
    """It only counts (--count-by, --hist): rows may come to it in bulk (write_bulk)."""

    def begin(self) -> None:
        """Sampling starts (the target is attached): write what comes before the first row."""

    def write(self, sample: Sample) -> None:
        """Record one sample; it must be durable (flushed) when this returns."""

    def write_bulk(self, bulk: Bulk, pid: int) -> None:
        """Many rows at once; called only when every writer ``counts_only``."""

    def close(self) -> None:
        """Release the output; called once, on every way out."""


class RowByRow:
    """A writer that takes each row as it comes (no write_bulk)."""

    counts_only = False

    def write_bulk(self, bulk: Bulk, pid: int) -> None:
        raise TypeError(f"{type(self).__name__} takes rows one at a time")


@dataclass(frozen=True)
class Output:
    """Where and how rows go: the output options of attach and trace."""

    out: str = "-"
    format: str | None = None
    """csv or jsonl; None: from the suffix of ``out``."""
    quiet: bool = False
    live: bool = False
    """A view redrawn in place on stderr instead of a line per sample."""
    metrics: str | None = None
    """HOST:PORT of an OpenMetrics endpoint."""
    count_by: tuple[str, ...] = ()
    """Columns whose values are counted in sampler (aggregate.py), instead of a row per sample."""
    hists: tuple[str, ...] = ()
    """Columns kept as power-of-two histograms in sampler."""

    @property
    def aggregating(self) -> bool:
        return bool(self.count_by or self.hists)
