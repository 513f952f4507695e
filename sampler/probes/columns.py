"""The columns a run's rows have, named in one place: the probe column first where rows come from
several places, one per expression, and latency_us last where the run is timed."""

from __future__ import annotations

from collections.abc import Sequence

from sampler.language.expr import Expression
from sampler.sample import PROBE

LATENCY = "latency_us"


def value_columns(expressions: Sequence[Expression], probe_column: bool, timed: bool) -> list[str]:
    """A backend's value columns: the probe column first when it has one, then each expression's, then
    latency_us when the run is timed."""
    return [PROBE] * probe_column + [e.name for e in expressions] + [LATENCY] * timed
