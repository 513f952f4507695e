"""The kernel's process events (the proc connector, netlink): each exec as it happens.

``--exe`` looks at /proc every 0.2 s for new processes of the program; one that starts
and ends in between is never seen, and one that is seen has run up to 0.2 s untraced.
The connector tells of an exec the moment the kernel makes it (root: it takes
CAP_NET_ADMIN), so the process is looked at at once (and joins once it is built). Where it cannot
be had (not root, a kernel without CONFIG_PROC_EVENTS, a network namespace of a container:
the kernel sends its events to the host's), the look at /proc stays the only way.
"""

from __future__ import annotations

import os
import socket
import struct

NETLINK_CONNECTOR = 11
CN_IDX_PROC = CN_VAL_PROC = 1
PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 1, 2
PROC_EVENT_EXEC = 0x00000002
_NLMSG_DONE = 3
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port
_CN_MSG = struct.Struct("=IIIIHH")  # cn_msg: idx, val, sequence, ack, length, flags
_EVENT = struct.Struct("=IIQ")  # proc_event: what, cpu, timestamp (ns)
_EXEC = struct.Struct("=II")  # exec_proc_event: pid, tgid
MAX_PENDING = 65536
"""Exec'd processes kept between two reads at most (a storm of execs is read from /proc)."""


class ExecEvents:
    """A subscription to the process events; ``take`` gives the processes that exec'd since."""

    def __init__(self) -> None:
        sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC, NETLINK_CONNECTOR)
        try:
            sock.bind((0, CN_IDX_PROC))
            sock.setblocking(False)
            sock.send(_message(PROC_CN_MCAST_LISTEN))
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self.lost = False
        """The kernel dropped events (its buffer was full): a look at /proc must make up for them."""

    def fileno(self) -> int:
        return self._sock.fileno()

    def take(self) -> dict[int, float]:
        """The thread groups (processes) that exec'd since the last call, in order, each once,
        with when (time.monotonic(): the kernel's CLOCK_MONOTONIC) of its last exec."""
        found: dict[int, float] = {}
        while len(found) < MAX_PENDING:
            try:
                data = self._sock.recv(65536)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: events were dropped
                self.lost = True
                continue
            for tgid, when in parse(data):
                found.pop(tgid, None)
                found[tgid] = when
        return found

    def close(self) -> None:
        try:
            self._sock.send(_message(PROC_CN_MCAST_IGNORE))
        except OSError:
            pass
        self._sock.close()


def open_events() -> ExecEvents | None:
    """The subscription, or None where the kernel does not give it to this process."""
    try:
        return ExecEvents()
    except OSError:
        return None


def parse(data: bytes) -> list[tuple[int, float]]:
    """The exec'd thread groups in one datagram of netlink messages (the kernel's: checked),
    each with the time of its exec (s, CLOCK_MONOTONIC)."""
    found = []
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, _, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            break
        body = offset + _HEADER.size
        if kind == _NLMSG_DONE and length >= _HEADER.size + _CN_MSG.size + _EVENT.size:
            idx, val, _, _, size, _ = _CN_MSG.unpack_from(data, body)
            event = body + _CN_MSG.size
            if (idx, val) == (CN_IDX_PROC, CN_VAL_PROC) and size >= _EVENT.size + _EXEC.size \
                    and event + _EVENT.size + _EXEC.size <= offset + length:
                what, _, nanoseconds = _EVENT.unpack_from(data, event)
                if what == PROC_EVENT_EXEC:
                    _, tgid = _EXEC.unpack_from(data, event + _EVENT.size)
                    found.append((tgid, nanoseconds / 1e9))
        offset += (length + 3) & ~3
    return found


def _message(op: int) -> bytes:
    payload = struct.pack("=I", op)
    cn = _CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
    return _HEADER.pack(_HEADER.size + len(cn), _NLMSG_DONE, 0, 0, os.getpid()) + cn
