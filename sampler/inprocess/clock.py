"""The time of an in-process probe's record: the TSC the trampoline read, as CLOCK_MONOTONIC.

Sampler reads the TSC itself (four instructions in an executable page of its own, called through
ctypes) beside CLOCK_MONOTONIC, at the start and at each drain, and maps a record's TSC onto the
monotonic clock along the line through the first and the latest pair. On a host whose TSC is not
invariant (no constant_tsc and nonstop_tsc in /proc/cpuinfo) the times are only as good as the TSC.
"""

from __future__ import annotations

import ctypes
import mmap
import time

import numpy as np
import numpy.typing as npt

READ_TSC = bytes.fromhex("0f31" "48c1e220" "4809d0" "c3")  # rdtsc; shl rdx, 32; or rax, rdx; ret
MIN_SPAN_NS = 20_000_000
"""The pairs are this far apart at least before the rate is taken from them (the first estimate
comes from a 20 ms wait at the start)."""


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

    def _pair(self) -> tuple[int, int]:
        before = time.monotonic_ns()
        tsc = int(self.read())
        after = time.monotonic_ns()
        return tsc, (before + after) // 2

    def update(self) -> None:
        """A new pair (at each drain): the rate from a longer span."""
        self.last = self._pair()

    def seconds(self, tsc: npt.NDArray[np.uint64]) -> npt.NDArray[np.float64]:
        """Monotonic seconds of each TSC reading."""
        (tsc0, ns0), (tsc1, ns1) = self.first, self.last
        rate = (ns1 - ns0) / max(1, tsc1 - tsc0)
        return (ns0 + (tsc.astype(np.float64) - float(tsc0)) * rate) / 1e9
