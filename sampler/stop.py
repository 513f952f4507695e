"""The request to stop a run, raised by a signal handler and seen by every wait.

``threading.Event`` does not do here: its ``set`` takes a lock that its ``wait`` holds
for a few microseconds on the way in and out, and a handler runs in the thread it
interrupts. A SIGINT landing in that window made ``set`` wait for a lock its own thread
held, and sampler hung for good (seen once in CI). Here ``set`` takes no lock: it sets a
flag and writes a byte to a pipe that ``wait`` selects on.
"""

from __future__ import annotations

import os

from sampler import waits


class StopFlag:
    """``set`` is safe in a signal handler; ``wait`` returns as soon as it is called."""

    _fds: tuple[int, ...] = ()
    """Nothing to close when the pipe could not be made (EMFILE): no traceback from __del__."""

    def __init__(self) -> None:
        self._set = False
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._fds: tuple[int, ...] = (self._read, self._write)

    def set(self) -> None:
        self._set = True
        try:
            os.write(self._write, b"!")
        except OSError:
            pass  # the pipe is full (set many times) or closed: the flag is what counts

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds or until set; True when set."""
        if not self._set and timeout > 0:
            try:
                waits.readable([self._read], timeout)
            except (OSError, ValueError):
                pass  # closed
        return self._set

    def close(self) -> None:
        fds, self._fds = self._fds, ()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:
        self.close()
