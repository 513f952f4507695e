"""The time of an in-process probe's record: the TSC the trampoline read, as CLOCK_MONOTONIC.

Sampler reads the TSC itself (four instructions in an executable page of its own, called through
ctypes) beside CLOCK_MONOTONIC, at the start and then at most every UPDATE_NS at a drain. Each new
pair starts a segment of the mapping at the TSC read then, its rate that of the line through the
first and the new pair, its start where the segment before it ends: one continuous, increasing
function of the TSC, so that a record's time never depends on the drain that read it, and one
thread's records keep their order (a line refitted at each drain moved them by a microsecond).
On a host whose TSC is not invariant (no constant_tsc and nonstop_tsc in /proc/cpuinfo) the times
are only as good as the TSC.
"""

from __future__ import annotations

import ctypes
import mmap
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where records are timed (a run with no in-process probe never loads it)
    import numpy as np
    import numpy.typing as npt

READ_TSC = bytes.fromhex("0f31" "48c1e220" "4809d0" "c3")  # rdtsc; shl rdx, 32; or rax, rdx; ret
MIN_SPAN_NS = 20_000_000
"""The pairs are this far apart at least before the rate is taken from them (the first estimate
comes from a 20 ms wait at the start)."""
UPDATE_NS = 500_000_000
MAX_SEGMENTS = 4096


class TscClock:
    """TSC readings to monotonic seconds."""

    def __init__(self) -> None:
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(READ_TSC)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self.read = ctypes.CFUNCTYPE(ctypes.c_uint64)(address)
        self.first = self._pair()
        time.sleep(MIN_SPAN_NS / 1e9)
        self.last = self._pair()
        (tsc0, ns0), (tsc1, ns1) = self.first, self.last
        self._segments: list[tuple[int, float, float]] = [(tsc0, float(ns0), (ns1 - ns0) / max(1, tsc1 - tsc0))]
        """(first TSC, its nanoseconds, nanoseconds a tick) of each segment of the mapping."""

    def _pair(self) -> tuple[int, int]:
        before = time.monotonic_ns()
        tsc = int(self.read())
        after = time.monotonic_ns()
        return tsc, (before + after) // 2

    def update(self) -> None:
        """A new pair (at a drain, at most every UPDATE_NS): a segment from now on, at the rate of the
        longer span."""
        pair = self._pair()
        if pair[1] - self.last[1] < UPDATE_NS:
            return
        self.last = pair
        tsc, _ = pair
        start, ns, rate = self._segments[-1]
        if tsc <= start:
            return
        (tsc0, ns0) = self.first
        self._segments.append((tsc, ns + (tsc - start) * rate, (pair[1] - ns0) / max(1, tsc - tsc0)))
        del self._segments[:-MAX_SEGMENTS]

    @property
    def ns_per_tick(self) -> float:
        """The TSC's rate now, nanoseconds a tick."""
        return self._segments[-1][2]

    def seconds(self, tsc: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
        """Monotonic seconds of each TSC reading."""
        import numpy as np

        starts = np.array([segment[0] for segment in self._segments], dtype=np.uint64)
        which = np.maximum(np.searchsorted(starts, tsc, side="right") - 1, 0)
        first = starts[which].astype(np.float64)
        ns = np.array([segment[1] for segment in self._segments])[which]
        rate = np.array([segment[2] for segment in self._segments])[which]
        seconds: npt.NDArray[np.float64] = (ns + (tsc.astype(np.float64) - first) * rate) / 1e9
        return seconds
