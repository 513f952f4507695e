"""A guardian for sampler's own death.

When sampler is killed (SIGKILL, the OOM killer) with a breakpoint in the target,
nothing in it can run. So each run that patches the target forks this process
into its own session (a fork, not a new program: nothing to find or execute, ready
at once), holding the read end of a pipe whose write end only sampler holds.
When sampler ends, the pipe reads EOF: if sampler had not said
"done" first, the guardian acts at once:
- ptrace: it puts the journaled bytes back through /proc/PID/mem;
- delve: it takes over the dlv that sampler drove (the terminal's pty, which it
  keeps open, or the headless server's address) and leaves as sampler would have
  (backends/delve/rescue.py).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence

from sampler.journal import repair


class Guardian:
    def __init__(self, pid: int, rescue: Sequence[str] = ()) -> None:
        """``rescue``: how to reach dlv, if dlv holds the target (see ``_watch``)."""
        read_end, self._write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # the guardian
            code = 1
            try:
                os.close(self._write_end)
                os.setsid()  # no terminal's signals; outlives sampler
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_DFL)
                code = _watch(pid, read_end, list(rescue))
            finally:
                os._exit(code)
        os.close(read_end)

    def dismiss(self) -> None:
        """Sampler restored everything itself: the guardian can go."""
        try:
            os.write(self._write_end, b"done\n")
            os.close(self._write_end)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass  # reaped already


def _watch(pid: int, fd: int, rescue: list[str]) -> int:
    said = b""
    while True:
        chunk = os.read(fd, 64)
        if not chunk:
            break
        said += chunk
    if b"done" in said:
        return 0
    if rescue[:1] in (["delve"], ["delve-rpc"]):
        from sampler.backends.delve import rescue as delve

        # delve DLV_PID PTY_FD: the terminal sampler drove; delve-rpc DLV_PID HOST:PORT
        dlv = int(rescue[1])
        left = delve.rescue_terminal(dlv, int(rescue[2])) if rescue[0] == "delve" \
            else delve.rescue_rpc(pid, rescue[2])
        if not left:  # dlv does not answer: take it out, then undo what it left
            delve.kill_dlv(dlv, pid)
    repair(pid)
    return 0
