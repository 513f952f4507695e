"""What the guardian does for a target under dlv when sampler died mid-run.

dlv outlives sampler (the guardian keeps the terminal's pty open; the headless
server has its own session and writes to a file), so the target is still traced,
possibly halted, possibly with our breakpoint in it. The guardian takes sampler's
place and leaves the way sampler would (leave.py): halt only if running, clear
our breakpoint, resume, let the target settle, halt, detach.

Halting a target that is already halted makes Delve send it a SIGTRAP that stays
pending, and a detach then kills the target. So neither drive here halts blindly:
the terminal rescue first asks dlv something harmless and only interrupts it when
no prompt comes back (it is inside a ``continue``); the JSON-RPC rescue asks for
the state without blocking.
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable

from sampler import waits
from sampler.backends.delve import parse
from sampler.backends.delve.leave import SETTLE_S, after_dlv_killed
from sampler.backends.delve.rpc import DelveRpc, RpcError
from sampler.errors import SamplerError
from sampler.safety.patches import Patch
from sampler.target import procfs

MARK = 7340218865
"""A number no target state prints: ``print MARK`` shows dlv is at its prompt with nothing queued."""
_AT_PROMPT = re.compile(rf"{MARK}\s*\n(?:.*\n)*?{parse.PROMPT}")


class _Pty:
    def __init__(self, fd: int, dlv_pid: int) -> None:
        self.fd = fd
        self.dlv_pid = dlv_pid
        self.text = ""

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def expect(self, pattern: re.Pattern[str] | str, timeout: float) -> bool:
        """Read until ``pattern`` shows in what dlv printed since the last match."""
        deadline = time.monotonic() + timeout
        while True:
            match = re.search(pattern, self.text)
            if match:
                self.text = self.text[match.end():]
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            ready = waits.readable([self.fd], remaining)
            if ready:
                try:
                    chunk = os.read(self.fd, 65536)
                except OSError:
                    return False  # dlv is gone: nothing holds the pty's other end
                if not chunk:
                    return False
                self.text += chunk.decode(errors="replace").replace("\r\n", "\n")

    def to_prompt(self, attempts: int = 6) -> bool:
        """Bring dlv to its prompt, target halted, with no command of sampler's still queued."""
        self.write(f"print {MARK}\n")
        for _ in range(attempts):
            if self.expect(_AT_PROMPT, 0.5):
                return True
            os.kill(self.dlv_pid, signal.SIGINT)  # no prompt: dlv is inside a continue
        return False


def rescue_terminal(dlv_pid: int, fd: int) -> bool:
    """Leave through the terminal sampler drove; True when dlv quit leaving the target running."""
    pty = _Pty(fd, dlv_pid)
    try:
        if not pty.to_prompt():
            return False
        pty.write(f"clear {parse.BREAKPOINT}\n")
        pty.expect(parse.PROMPT, 5)
        for _ in range(3):  # a continue that stops at once (a stale halt) is repeated
            pty.write("continue\n")
            if not pty.expect(parse.PROMPT, SETTLE_S):
                break
        if not pty.to_prompt():
            return False
        pty.write("quit\n")
        if pty.expect(parse.KILL_QUESTION, 5):
            pty.write("n\n")
        return procfs.ends_within(dlv_pid, 10)
    except ProcessLookupError:
        return procfs.ends_within(dlv_pid, 0)


def rescue_rpc(pid: int, dlv_pid: int, address: str) -> bool:
    """Leave through dlv's JSON-RPC server (in dlv's network); True when dlv detached."""
    host, port = address.rsplit(":", 1)
    rpc = DelveRpc("", pid)
    try:
        rpc.connect(host, int(port), dlv_pid)
        state = rpc.call("State", {"NonBlocking": True}).get("State") or {}
        if state.get("Running"):
            rpc.call("Command", {"name": "halt"})
        try:
            rpc.call("ClearBreakpoint", {"Name": parse.BREAKPOINT})
        except RpcError:
            pass  # not set
        pending = rpc.send("Command", {"name": "continue"})
        time.sleep(SETTLE_S)
        if rpc.answer(pending, 0) is None:
            rpc.call("Command", {"name": "halt"})
            rpc.answer(pending, 5)
        rpc.detach()
        return True
    except (OSError, SamplerError, RpcError):
        return False
    finally:
        rpc.close()


class DlvRescue:
    """For the guardian: leave through the dlv sampler drove (``leave`` returns True when dlv
    let the target go); when dlv does not answer, kill it and undo what it left."""

    def __init__(self, pid: int, dlv_pid: int, leave: Callable[[], bool]) -> None:
        self.pid, self.dlv_pid, self.leave = pid, dlv_pid, leave

    def ready(self) -> None:
        pass

    def watch(self, pid: int) -> None:
        pass

    def run(self, patches: dict[int, dict[int, Patch]], children: dict[int, int],
            semaphores: dict[int, set[int]]) -> None:
        if not self.leave():
            kill_dlv(self.dlv_pid, self.pid)

    def cleanup(self) -> None:
        pass


def kill_dlv(dlv_pid: int, pid: int) -> None:
    """The last resort: SIGKILL dlv, then put back its int3s and let stopped threads go."""
    try:
        os.kill(dlv_pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    procfs.ends_within(dlv_pid, 5)
    after_dlv_killed(pid)

