"""Waiting for a descriptor to be readable, with poll(2): select(2) fails on a descriptor
numbered 1024 or more, and sampler may hold thousands (a target mapping thousands of
files raises its open-file limit, cli.py)."""

from __future__ import annotations

import select
from collections.abc import Sequence

_READABLE = select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR


def readable(fds: Sequence[int], timeout: float | None) -> list[int]:
    """Those of ``fds`` that can be read (or are at EOF or in error) within ``timeout`` seconds
    (None: no limit); [] at the timeout. An interrupted wait returns [] as a timeout would."""
    poller = select.poll()
    for fd in fds:
        poller.register(fd, _READABLE)
    try:
        events = poller.poll(None if timeout is None else max(timeout, 0.0) * 1000)
    except InterruptedError:
        return []
    return [fd for fd, _ in events]
