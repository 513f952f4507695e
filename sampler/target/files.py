"""Opening a file the target controls, without letting it choose what sampler reads.

sampler often runs as root, and a target's files (its program, libraries, debug files and
the symlinks among them) are the target's to arrange. A path under /proc/PID/root is
resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): an absolute symlink in a
container resolves inside the container, never against the host's root, and no
/proc magic link is followed on the way. Every file is first opened with O_PATH (no
side effect, even for a device or a FIFO), accepted only when it is a regular file, and
only then opened for reading, non-blocking; its size is checked against a limit.
"""

from __future__ import annotations

import ctypes
import os
import re
import stat

SYS_OPENAT2 = 437  # x86-64
RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_IN_ROOT = 0x10
MAX_FILE = 16 << 30
"""The largest file sampler reads as a program, library or debug file (16 GiB): far above
any real debug file (a large Go service's is under 1 GiB), far below what a sparse file can
claim."""

SPARSE_FLOOR = 256 << 20
"""A file larger than this that holds under an eighth of its size on disk is refused as
sparse: a hostile file can claim GBs of zeros that cost nothing to make and much to read
(a compressing file system keeps a binary above an eighth)."""
MIN_FILE = 64
"""An ELF header alone is 64 bytes."""

_IN_ROOT = re.compile(r"/proc/(\d+)/root(/.*)", re.S)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class Refused(OSError):
    """Not a file sampler reads: not a regular file, too large, or outside the target's root."""


def open_file(path: str) -> int:
    """A read-only, close-on-exec descriptor of the regular file at ``path``: inside the
    target's root when ``path`` is /proc/PID/root/..., as given otherwise. OSError (Refused
    for what is not a readable regular file) when it cannot be."""
    found = _IN_ROOT.fullmatch(path)  # re.S: a newline in a name the target chose must not slip past
    if found is not None:
        handle = _in_root(int(found.group(1)), found.group(2))
    elif path.startswith("/proc/") and "/root/" in path:
        raise Refused(0, f"{path!r} is not a path sampler opens")
    else:
        handle = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        return _reopen(handle, path)
    finally:
        os.close(handle)


def is_file(path: str) -> bool:
    """``path`` opens as a regular file sampler would read (open_file succeeds)."""
    try:
        os.close(open_file(path))
    except OSError:
        return False
    return True


def _in_root(pid: int, path: str) -> int:
    """An O_PATH descriptor of ``path`` resolved inside the root of process ``pid``."""
    root = os.open(f"/proc/{pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        how = _OpenHow(os.O_PATH | os.O_CLOEXEC, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
        for _ in range(8):  # EAGAIN: a rename or mount raced the lookup (RESOLVE_IN_ROOT's rule)
            fd = _libc.syscall(SYS_OPENAT2, root, os.fsencode(path.lstrip("/") or "."), ctypes.byref(how),
                               ctypes.sizeof(how))
            if fd >= 0 or ctypes.get_errno() != 11:
                break
        if fd < 0:
            errno = ctypes.get_errno()
            if errno == 1:  # EPERM: a seccomp profile that does not know openat2
                raise Refused(errno, "openat2 is not allowed here (a seccomp profile?): files in the target's "
                                     "root are not read")
            if errno == 38:  # ENOSYS: a kernel before 5.6 (no openat2): nothing is read from a root
                raise Refused(errno, "the kernel has no openat2: files in the target's root are not read")
            raise OSError(errno, os.strerror(errno))
        return int(fd)
    finally:
        os.close(root)


def _reopen(handle: int, path: str) -> int:
    """The O_PATH ``handle`` opened for reading, when it is a regular file of sane size."""
    info = os.fstat(handle)
    if not stat.S_ISREG(info.st_mode):
        raise Refused(0, f"{path} is not a regular file")
    if info.st_size < MIN_FILE:  # /proc and /sys files say 0 (reading /proc/kmsg eats the kernel's log)
        raise Refused(0, f"{path} is {info.st_size} bytes: too small for an ELF file")
    if info.st_size > MAX_FILE:
        raise Refused(0, f"{path} is {info.st_size / (1 << 30):.1f} GiB, over sampler's limit of "
                         f"{MAX_FILE >> 30} GiB")
    if info.st_size > SPARSE_FLOOR and info.st_blocks * 512 < info.st_size // 8:
        raise Refused(0, f"{path} claims {info.st_size >> 20} MiB but holds {info.st_blocks >> 11} MiB on disk "
                         "(a sparse file): not a program or debug file")
    return os.open(f"/proc/self/fd/{handle}", os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
