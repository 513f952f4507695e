"""How sampler's own processes ask the kernel's scheduler for prompt wake-ups.

The worker sleeps between ticks while the target may keep every core busy. With the
EEVDF scheduler (Linux 6.6+) a task that wakes up preempts a running one only when its
deadline is earlier; with the default slice (about 3 ms here) a tick then started up to
4 ms late, one time in four or more at 5 Hz against the busy Go ring buffer. So the
worker sleeps between ticks with a short slice (0.1 ms, sched_setattr's sched_runtime
for SCHED_OTHER, Linux 6.12+). Measured A/B (README, "Ticks on time"): ticks over 1 ms
late fell from 71/628 to 7/628. The slice stays short through the sample (arm, wait for
the hit, hold the thread, let it go): the thread let go then no longer preempts the
worker before PTRACE_CONT has even returned (p95 pause 69 us instead of 947 us at 10 Hz
on the C target, A/B in one run). It goes back to the default for the work after (rows,
output): kept all the time, when a hit took 300 us to serve, the short slice cut it into
0.1 ms turns (p95 pause 3.2 ms instead of 0.45 ms). Kernels without it refuse the
request, and sampler goes on as before.

The guardian asks for more: it must put a byte back before a thread of the target
traps on it, and it sleeps until then, so a real-time class costs nothing.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager

SYS_SCHED_SETATTR = 314  # x86-64
SHORT_SLICE_NS = 100_000
"""The shortest slice the kernel accepts for SCHED_OTHER."""
_LIBC = ctypes.CDLL(None, use_errno=True)
SHORT_SLICE_ENV = "SAMPLER_SHORT_SLICE"
"""'0' leaves the worker's slice alone (for measuring what it is worth: bench/lateness.py)."""


@contextmanager
def prompt_wakeup() -> Iterator[None]:
    """Sleep and sample inside this block with a short slice, so that the wake-up preempts a
    busy core at once and the thread let go does not preempt the worker; leave it with the
    default slice, so that the work after is not cut into 0.1 ms turns."""
    short = os.environ.get(SHORT_SLICE_ENV) != "0" and _set_slice(SHORT_SLICE_NS)
    try:
        yield
    finally:
        if short:
            _set_slice(0)  # 0: the kernel's default slice again


def _set_slice(nanoseconds: int) -> bool:
    """Set this thread's scheduler slice (0: the default); True when the kernel took it."""
    # struct sched_attr, SCHED_ATTR_SIZE_VER1 (56 bytes): size, policy, flags, nice, priority,
    # runtime (the slice), deadline, period, util_min, util_max
    attr = ctypes.create_string_buffer(struct.pack("=IIQiIQQQII", 56, os.SCHED_OTHER, 0,
                                                   os.getpriority(os.PRIO_PROCESS, 0), 0,
                                                   nanoseconds, 0, 0, 0, 0))
    try:
        return int(_LIBC.syscall(SYS_SCHED_SETATTR, 0, attr, 0)) == 0
    except (OSError, AttributeError):
        return False


def real_time() -> str:
    """Ask for the real-time class (SCHED_FIFO 1), else nice -20; say which was granted."""
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
        return "SCHED_FIFO"
    except OSError:
        pass
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -20)
        return "nice -20"
    except OSError:
        return "normal"
