"""How sampler's own processes ask the kernel's scheduler for prompt wake-ups.

The worker sleeps between ticks while the target may keep every core busy. With the
EEVDF scheduler (Linux 6.6+) a task that wakes up preempts a running one only when its
deadline is earlier; with the default slice (about 3 ms here) a tick then started up to
4 ms late, one time in four at 5 Hz against the busy Go ring buffer. Asking for a short
slice (0.1 ms, sched_setattr's sched_runtime for SCHED_OTHER, Linux 6.12+) brought the
p90 of the oversleep from 3.7 ms to 0.13 ms in the same run. It takes no more CPU: the
worker only runs sooner, for shorter turns. Kernels without it ignore or refuse the
request, and sampler goes on as before.

The guardian asks for more: it must put a byte back before a thread of the target
traps on it, and it sleeps until then, so a real-time class costs nothing.
"""

from __future__ import annotations

import ctypes
import os
import struct

SYS_SCHED_SETATTR = 314  # x86-64
SHORT_SLICE_NS = 100_000
"""The shortest slice the kernel accepts for SCHED_OTHER."""
SHORT_SLICE_ENV = "SAMPLER_SHORT_SLICE"
"""'0' leaves the worker's slice alone (for measuring what it is worth: bench/lateness.py)."""


def short_slice() -> bool:
    """Ask for a short scheduler slice for this process; True when the kernel took it."""
    if os.environ.get(SHORT_SLICE_ENV) == "0":
        return False
    # struct sched_attr, SCHED_ATTR_SIZE_VER1 (56 bytes): size, policy, flags, nice, priority,
    # runtime (the slice), deadline, period, util_min, util_max
    attr = ctypes.create_string_buffer(struct.pack("=IIQiIQQQII", 56, os.SCHED_OTHER, 0,
                                                   os.getpriority(os.PRIO_PROCESS, 0), 0,
                                                   SHORT_SLICE_NS, 0, 0, 0, 0))
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.syscall(SYS_SCHED_SETATTR, 0, attr, 0)) == 0
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
