"""Debug files from debuginfod servers, through elfutils' own client (libdebuginfod).

We call libdebuginfod with ctypes rather than speak HTTP ourselves: it is the client
gdb, systemtap and elfutils use, so it honours DEBUGINFOD_URLS (several servers, in
parallel), DEBUGINFOD_CACHE_PATH, DEBUGINFOD_TIMEOUT and the cache layout every other
tool shares, and it is a small Debian package (libdebuginfod1).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import time
from collections.abc import Callable

from sampler.debuginfo.untrusted import free

_PROGRESS = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_long, ctypes.c_long)

DEFAULT_TIMEOUT_S = "10"
"""DEBUGINFOD_TIMEOUT when the user has not set one: libdebuginfod's own default is 90 s."""


class DebuginfodError(Exception):
    """The servers could not be asked, or answered with an error (not 'not found')."""


def enabled() -> bool:
    return bool(os.environ.get("DEBUGINFOD_URLS", "").strip())


def fetch_debuginfo(build_id: bytes, say: Callable[[str], None], what: str) -> str | None:
    """Path of the debug file for BUILD_ID in the client cache, downloading it if need be;
    None when no server has it. ``say`` gets one line when a download starts and one when
    it ends (not for a file already cached)."""
    library = _library()
    os.environ.setdefault("DEBUGINFOD_TIMEOUT", DEFAULT_TIMEOUT_S)
    client = library.debuginfod_begin()
    if not client:
        raise DebuginfodError("libdebuginfod could not start a client")
    started: list[float] = []
    received = [0]

    def progress(_client: int, done: int, total: int) -> int:
        if not started:
            started.append(time.monotonic())
            say(f"{what}: downloading debug info from debuginfod ({os.environ['DEBUGINFOD_URLS'].strip()})")
        received[0] = max(done, total, received[0])
        return 0

    callback = _PROGRESS(progress)  # kept alive until debuginfod_end
    library.debuginfod_set_progressfn(client, callback)
    path = ctypes.c_char_p()
    try:
        fd = library.debuginfod_find_debuginfo(client, build_id, len(build_id), ctypes.byref(path))
    finally:
        library.debuginfod_end(client)
    if fd >= 0:
        os.close(fd)
        found = (path.value or b"").decode("utf-8", "surrogateescape")
        free(path)
        if started:
            size = os.path.getsize(found) if os.path.exists(found) else received[0]
            say(f"{what}: downloaded {size / 1e6:.1f} MB in {time.monotonic() - started[0]:.1f} s")
        return found
    if -fd == errno.ENOENT:
        return None
    raise DebuginfodError(_reason(-fd))


def _reason(code: int) -> str:
    known = {
        errno.ECONNREFUSED: "connection refused",
        errno.EHOSTUNREACH: "host not found or unreachable",
        errno.ETIME: f"no answer within DEBUGINFOD_TIMEOUT={os.environ.get('DEBUGINFOD_TIMEOUT')} s",
        errno.ENOSYS: "DEBUGINFOD_URLS names no server",
        errno.EACCES: "access denied",
        errno.ENETUNREACH: "network unreachable",
    }
    return known.get(code, os.strerror(code))


_LOADED: ctypes.CDLL | None = None


def _library() -> ctypes.CDLL:
    global _LOADED
    if _LOADED is None:
        name = ctypes.util.find_library("debuginfod") or "libdebuginfod.so.1"
        try:
            library = ctypes.CDLL(name)
        except OSError:
            raise DebuginfodError("DEBUGINFOD_URLS is set but libdebuginfod is not installed "
                                  "(apt-get install libdebuginfod1)") from None
        library.debuginfod_begin.restype = ctypes.c_void_p
        library.debuginfod_end.argtypes = [ctypes.c_void_p]
        library.debuginfod_set_progressfn.argtypes = [ctypes.c_void_p, _PROGRESS]
        library.debuginfod_find_debuginfo.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int,
                                                      ctypes.POINTER(ctypes.c_char_p)]
        library.debuginfod_find_debuginfo.restype = ctypes.c_int
        _LOADED = library
    return _LOADED
