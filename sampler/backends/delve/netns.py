"""A network of dlv's own: headless dlv listens where no other process can reach it.

dlv's JSON-RPC server has no authentication, and dlv often runs as root: whoever
connects to its port can read and write the target's memory and call its functions.
On 127.0.0.1 every local user and container sharing the host's network could. So dlv
is started in a network namespace made for it (only its loopback, brought up), and
sampler (and the guardian) make their socket inside it: entering a network namespace
takes CAP_SYS_ADMIN over it, which only root has. A private loopback also keeps dlv
apart from the host's ports (a flood of loopback connections left thousands in
TIME_WAIT beside it).

Run as a script (``python -I -S netns.py DLV ARGS...``) it is the launcher: it makes
the namespace, then becomes dlv. It imports nothing of sampler's (it starts in ~10 ms).
Where the namespace cannot be made (no CAP_SYS_ADMIN: sampler not root) it says why on
its first line and runs dlv on the host's loopback.
"""

from __future__ import annotations

import ctypes
import fcntl
import os
import socket
import struct
import sys
import threading

CLONE_NEWNET = 0x40000000
_SIOCSIFFLAGS = 0x8914
_IFF_UP, _IFF_LOOPBACK, _IFF_RUNNING = 0x1, 0x8, 0x40
NO_NETWORK = "sampler-netns: no network of its own:"
"""The launcher's first line when dlv runs on the host's loopback; the reason follows."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _check(result: int) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def make_own() -> None:
    """Move the calling process into a new network namespace with its loopback up."""
    _check(_libc().unshare(CLONE_NEWNET))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH22x", b"lo", _IFF_UP | _IFF_LOOPBACK | _IFF_RUNNING)
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, request)


def connect_in(pid: int, host: str, port: int, timeout: float) -> socket.socket:
    """A TCP connection to host:port in the network namespace of process ``pid``.

    The socket is made by a thread of its own that enters that namespace (a network
    namespace is per thread) and ends; the socket stays in the namespace it was made in."""
    made: list[socket.socket] = []
    failed: list[OSError] = []

    def make() -> None:
        try:
            if not same_network(pid):
                fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
                try:
                    _check(_libc().setns(fd, CLONE_NEWNET))
                finally:
                    os.close(fd)
            made.append(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
        except OSError as e:
            failed.append(e)

    thread = threading.Thread(target=make, name="dlv-netns")
    thread.start()
    thread.join()
    if failed:
        raise failed[0]
    sock = made[0]
    try:
        sock.settimeout(timeout)
        sock.connect((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def same_network(pid: int) -> bool:
    """Whether process ``pid`` shares this process's network namespace."""
    return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino


def _launch(argv: list[str]) -> None:
    home = os.open("/proc/self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        make_own()
    except OSError as e:
        # made but its loopback not up: back to the host's network, where dlv can listen
        _libc().setns(home, CLONE_NEWNET)
        print(f"{NO_NETWORK} {e.strerror or e}", flush=True)
    os.close(home)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    _launch(sys.argv[1:])
