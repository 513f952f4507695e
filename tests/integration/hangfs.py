"""A FUSE file system of one file, ``file`` (8 KiB), that answers reads of its first page and
never one of the second: memory a target maps from it makes every reader of that page wait
for good (issue 32). Spoken over /dev/fuse directly (no libfuse): run as root,
``python -m tests.integration.hangfs MOUNTPOINT``; it prints "mounted", and "holding read
OFFSET SIZE" for each read it keeps; killed, the kernel aborts the waits. SIGUSR1 answers
every read it kept, and every read from then on (bytes 0x43): the waiters go on as if the file
system had only been slow."""

from __future__ import annotations

import ctypes
import os
import signal
import struct
import sys

LOOKUP, FORGET, GETATTR, OPEN, READ, RELEASE, FLUSH, INIT, OPENDIR, RELEASEDIR, INTERRUPT, DESTROY = \
    1, 2, 3, 14, 15, 18, 25, 26, 27, 29, 36, 38
BATCH_FORGET = 42
SIZE = 8192
ANSWERED = 4096
"""Reads below this offset are answered (the bytes 0x42); at or past it, never."""


def _attr(ino: int, mode: int, size: int) -> bytes:
    return struct.pack("<QQQQQQIIIIIIIIII", ino, size, (size + 511) // 512, 0, 0, 0, 0, 0, 0, mode, 1, 0, 0, 0,
                       4096, 0)


def serve(mountpoint: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/dev/fuse", os.O_RDWR)
    options = f"fd={fd},rootmode=40000,user_id=0,group_id=0,allow_other".encode()
    if libc.mount(b"hangfs", mountpoint.encode(), b"fuse", 0, options) != 0:
        raise OSError(ctypes.get_errno(), f"mount of {mountpoint}")
    held: list[tuple[int, int]] = []
    answering = False

    def answer_all(_signum: int, _frame: object) -> None:
        nonlocal answering
        answering = True
        while held:
            unique, size = held.pop()
            os.write(fd, struct.pack("<IiQ", 16 + size, 0, unique) + bytes([0x43]) * size)

    signal.signal(signal.SIGUSR1, answer_all)
    print("mounted", flush=True)
    while True:
        try:
            data = os.read(fd, 1 << 17)
        except OSError:
            return
        _, opcode, unique, node = struct.unpack_from("<IIQQ", data)
        body = data[40:]

        def reply(payload: bytes = b"", error: int = 0, unique: int = unique) -> None:
            os.write(fd, struct.pack("<IiQ", 16 + len(payload), error, unique) + payload)

        if opcode == INIT:  # 7.31, no readahead: a fault reads the one page it needs
            reply(struct.pack("<IIIIHHIIHHI28x", 7, 31, 0, 0, 16, 12, 65536, 1, 32, 0, 0))
        elif opcode == LOOKUP:
            if body.split(b"\0", 1)[0] == b"file":
                reply(struct.pack("<QQQQII", 2, 0, 3600, 3600, 0, 0) + _attr(2, 0o100644, SIZE))
            else:
                reply(error=-2)
        elif opcode == GETATTR:
            reply(struct.pack("<QII", 3600, 0, 0) + (_attr(1, 0o40755, 0) if node == 1 else
                                                     _attr(2, 0o100644, SIZE)))
        elif opcode in (OPEN, OPENDIR):
            reply(struct.pack("<QII", 0, 0, 0))
        elif opcode == READ:
            _, offset, size = struct.unpack_from("<QQI", body)
            if offset < ANSWERED:
                reply(bytes([0x42]) * min(size, ANSWERED - offset))
            elif answering:
                reply(bytes([0x43]) * min(size, SIZE - offset))
            else:
                held.append((unique, min(size, SIZE - offset)))
                print("holding read", offset, size, flush=True)  # answered only at SIGUSR1
        elif opcode in (FORGET, BATCH_FORGET, INTERRUPT):
            pass
        elif opcode in (RELEASE, RELEASEDIR, FLUSH):
            reply()
        elif opcode == DESTROY:
            reply()
            return
        else:
            reply(error=-38)  # ENOSYS


if __name__ == "__main__":
    serve(sys.argv[1])
