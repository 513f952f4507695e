"""Quantiles of a stream in bounded memory: a histogram with logarithmic buckets.

A run at 1 kHz for days must not keep every pause. Each value falls in a bucket
1 % wide (relative); a quantile is read back as its bucket's midpoint, so it is
within 1 % of the exact one. Memory grows with the span of values (a few thousand
buckets from 1 ns to hours), never with their number.
"""

from __future__ import annotations

import math

GROWTH = 1.02
"""Each bucket is 2 % wider than the one before: a value is off by at most about 1 %."""
_LOG = math.log(GROWTH)


class LogHistogram:
    def __init__(self) -> None:
        self.count = 0
        self._zeros = 0
        self._buckets: dict[int, int] = {}

    def add_zeros(self, count: int) -> None:
        self.count += count
        self._zeros += count

    def add(self, value: float) -> None:
        self.count += 1
        if value <= 0 or not math.isfinite(value):
            self._zeros += 1
            return
        bucket = math.floor(math.log(value) / _LOG)
        self._buckets[bucket] = self._buckets.get(bucket, 0) + 1

    def quantile(self, q: float) -> float:
        """The q-quantile (0..1), 0.0 when empty."""
        if self.count == 0:
            return 0.0
        rank = q * (self.count - 1)
        seen = self._zeros
        if rank < seen:
            return 0.0
        for bucket in sorted(self._buckets):
            seen += self._buckets[bucket]
            if rank < seen:
                return float(GROWTH ** (bucket + 0.5))
        return float(GROWTH ** (max(self._buckets) + 0.5))

    def median(self) -> float:
        return self.quantile(0.5)
