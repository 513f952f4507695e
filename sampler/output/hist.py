"""Histograms in the terminal, as bpftrace's hist() and lhist() print them."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

from sampler.printable import printable

BAR = 52
"""bpftrace's bar width."""


def _label(n: int) -> str:
    """2048 -> 2K, as bpftrace labels powers of two."""
    for suffix, size in (("P", 1 << 50), ("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def power_of_two_key(value: float) -> int:
    """The power-of-two bucket of a value: -1 below 0, 0 for [0], 1 for [1], k for [2^(k-1), 2^k)."""
    if value < 0:
        return -1
    if value < 1:
        return 0
    return int(value).bit_length()  # 1 -> 1, 2-3 -> 2, 4-7 -> 3


def power_of_two_keys(values: np.ndarray) -> np.ndarray:
    """power_of_two_key of each of an array of integers (exact: no float near 2^64 is asked)."""
    import numpy as np

    negative = values < 0 if values.dtype.kind == "i" else np.zeros(len(values), bool)
    rest = np.where(negative, 0, values).astype(np.uint64)
    keys = np.zeros(len(values), np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        high = rest >= np.uint64(1 << shift)
        keys[high] += shift
        rest[high] >>= np.uint64(shift)
    keys += (rest > 0).astype(np.int64)  # 1 -> 1, 2-3 -> 2, 4-7 -> 3
    keys[negative] = -1
    return keys


def power_of_two(values: Iterable[float]) -> list[tuple[str, int]]:
    """(bucket, count): (..., 0), [0], [1], [2, 4), [4, 8)..., from the first bucket with
    a value to the last."""
    counts: dict[int, int] = {}
    for value in values:
        if math.isfinite(value):  # NaN and infinities have no bucket
            key = power_of_two_key(value)
            counts[key] = counts.get(key, 0) + 1
    return power_of_two_buckets(counts)


def power_of_two_buckets(counts: dict[int, int]) -> list[tuple[str, int]]:
    """The labelled buckets of counts by power_of_two_key, from the first with a value to the last."""
    if not counts:
        return []

    def name(key: int) -> str:
        if key == -1:
            return "(..., 0)"
        if key <= 1:
            return f"[{key}]"
        return f"[{_label(1 << (key - 1))}, {_label(1 << key)})"
    return [(name(k), counts.get(k, 0)) for k in range(min(counts), max(counts) + 1)]


def linear(values: Iterable[float], low: float, high: float, step: float) -> list[tuple[str, int]]:
    """(bucket, count): (..., low), [low, low+step)..., [high, ...)."""
    buckets = max(1, int(-(-(high - low) // step)))
    counts: dict[int, int] = {}
    for value in values:
        if not math.isfinite(value):
            continue
        key = -1 if value < low else buckets if value >= high else int((value - low) // step)
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return []

    def name(key: int) -> str:
        if key == -1:
            return f"(..., {_number(low)})"
        if key == buckets:
            return f"[{_number(high)}, ...)"
        return f"[{_number(low + key * step)}, {_number(min(low + (key + 1) * step, high))})"
    return [(name(k), counts.get(k, 0)) for k in range(min(counts), max(counts) + 1)]


def _number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def render(title: str, buckets: list[tuple[str, int]]) -> str:
    """@title: then one line per bucket: range, count, |@@@@  |."""
    if not buckets:
        return f"@{title}: no numeric values\n"
    most = max(count for _, count in buckets) or 1
    width = max(len(label) for label, _ in buckets)
    lines = [f"@{title}:"]
    for label, count in buckets:
        bar = "@" * (count * BAR // most)
        lines.append(f"{label.ljust(width)} {count:>9} |{bar.ljust(BAR)}|")
    return "\n".join(lines) + "\n"


def render_counts(title: str, top: list[dict[str, Any]]) -> str:
    """@title: then the most frequent values, most first, as bpftrace prints @[key] = count()
    (value, count, share of the rows that had one)."""
    if not top:
        return f"@{title}: no values\n"
    labels = [printable(str(entry["value"])) or '""' for entry in top]
    width = max(len(label) for label in labels)
    lines = [f"@{title}:"]
    for label, entry in zip(labels, top):
        lines.append(f"{label.ljust(width)} {entry['count']:>9} {100 * float(entry['share']):6.1f} %")
    return "\n".join(lines) + "\n"
