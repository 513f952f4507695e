"""A guardian for sampler's own death.

When sampler is killed (SIGKILL, the OOM killer) with a breakpoint in the target,
nothing in it can run. So each ptrace run starts this small process, in its own
session, holding the read end of a pipe whose write end only sampler holds. When
sampler ends, the pipe reads EOF: if sampler had not said "done" first, the
guardian puts the journaled bytes back through /proc/PID/mem at once.
"""

from __future__ import annotations

import os
import subprocess
import sys


class Guardian:
    def __init__(self, pid: int) -> None:
        read_end, self._write_end = os.pipe()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "sampler.guardian", str(pid), str(read_end)],
            pass_fds=(read_end,), start_new_session=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONSAFEPATH": "1"})
        os.close(read_end)

    def dismiss(self) -> None:
        """Sampler restored everything itself: the guardian can go."""
        try:
            os.write(self._write_end, b"done\n")
            os.close(self._write_end)
        except OSError:
            pass
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _watch(pid: int, fd: int) -> int:
    from sampler.journal import repair

    said = b""
    while True:
        chunk = os.read(fd, 64)
        if not chunk:
            break
        said += chunk
    if b"done" not in said:
        repair(pid)
    return 0


if __name__ == "__main__":
    sys.exit(_watch(int(sys.argv[1]), int(sys.argv[2])))
