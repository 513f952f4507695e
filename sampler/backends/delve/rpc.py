"""The wire to a headless Delve: ``dlv attach --headless`` on the loopback of a network
namespace of its own (netns.py: no other process can reach it), JSON-RPC 1.0 over TCP.

Requests may overlap (a ``continue`` is pending while a ``halt`` is sent): each
answer is matched to its request by id.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import IO, Any

from sampler import waits
from sampler.backends.delve import netns, parse
from sampler.backends.delve.drive import CALL_TIMEOUT_S
from sampler.backends.delve.leave import after_dlv_killed
from sampler.errors import DebuggerError

_LISTENING = re.compile(r"API server listening at: (?P<host>[\d.]+):(?P<port>\d+)")
ATTACH_TIMEOUT_S = 60.0


class RpcError(Exception):
    """Delve answered a request with an error message."""


class DelveRpc:
    def __init__(self, dlv: str, pid: int) -> None:
        self.dlv = dlv
        self.pid = pid
        self.process: subprocess.Popen[bytes] | None = None
        self.address = ""
        self._log: IO[bytes] | None = None
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._answers: dict[int, dict[str, Any]] = {}
        self._next_id = 0
        self.detached = False
        """dlv said it let the target go."""
        self.shared_network = ""
        """Why dlv listens on the host's loopback (no network of its own could be made), or ''."""

    def start(self) -> None:
        """Start headless dlv in a network of its own, on a port of its choosing on its
        127.0.0.1, and connect (target halted)."""
        # dlv writes to a file, not a pipe: if sampler dies, dlv must not die of
        # SIGPIPE with the target in its hands (the guardian still talks to it)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (lives with dlv)
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-S", netns.__file__, self.dlv, "attach", str(self.pid), "--headless",
             "--api-version=2", "--accept-multiclient",
             "--listen=127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)  # its own session: a Ctrl-C meant for sampler never reaches it
        text = ""
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            text = self.output()
            match = _LISTENING.search(text)
            if match:
                self.address = f"{match.group('host')}:{match.group('port')}"
                shared = next((line for line in text.splitlines() if line.startswith(netns.NO_NETWORK)), "")
                self.shared_network = shared[len(netns.NO_NETWORK):].strip()
                try:
                    self.connect(match.group("host"), int(match.group("port")))
                except DebuggerError:
                    self.close()  # dlv holds the target: take it out
                    raise
                return
            if self.process.poll() is not None:
                text = self.output()
                self.detached = True  # dlv gave up and exited: it left nothing in the target
                break
            time.sleep(0.01)
        self.close()
        raise parse.attach_error(text, self.pid)

    @property
    def dlv_pid(self) -> int:
        return self.process.pid if self.process is not None else 0

    def connect(self, host: str, port: int, dlv_pid: int = 0) -> None:
        """Connect to dlv's server in dlv's network (``dlv_pid``: a dlv sampler did not start)."""
        try:
            self._sock = netns.connect_in(dlv_pid or self.dlv_pid, host, port, CALL_TIMEOUT_S)
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as e:
            raise self._lost(f"cannot connect to {host}:{port}: {e.strerror or e}") from None

    def send(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; return its id (the answer is collected with ``answer``)."""
        self._next_id += 1
        message = json.dumps({"method": f"RPCServer.{method}", "params": [params], "id": self._next_id})
        try:
            self._require().sendall(message.encode() + b"\n")
        except OSError as e:
            raise self._lost(e.strerror or str(e)) from None
        return self._next_id

    def answer(self, request: int, timeout: float) -> dict[str, Any] | None:
        """The result of request ``request``, or None if it did not come within ``timeout``."""
        deadline = time.monotonic() + timeout
        while request not in self._answers:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self._read(remaining)
        reply = self._answers.pop(request)
        if reply.get("error"):
            message = str(reply["error"])
            parse.check_exited(message, self.pid)
            raise RpcError(message)
        result = reply.get("result") or {}
        return result if isinstance(result, dict) else {}

    def call(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        result = self.answer(self.send(method, params), timeout)
        if result is None:
            raise DebuggerError(f"dlv did not answer {method} within {timeout:g}s")
        return result

    def _read(self, timeout: float) -> None:
        sock = self._require()
        try:
            ready = waits.readable([sock.fileno()], timeout)
            if not ready:
                return
            data = sock.recv(65536)
        except OSError as e:  # reset by dlv, which ended or dropped the connection
            raise self._lost(e.strerror or str(e)) from None
        if not data:
            raise self._lost("it closed the connection")
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if line.strip():
                try:
                    reply = json.loads(line)
                    self._answers[int(reply.get("id") or 0)] = reply
                except (ValueError, TypeError, AttributeError):
                    raise DebuggerError(f"dlv answered something that is not JSON-RPC: {line[:200]!r}") from None

    def _lost(self, why: str) -> DebuggerError:
        """The connection to dlv failed: say why, and how dlv ended if it did."""
        process = self.process
        ended = process.poll() if process is not None else None
        if ended is None:
            return DebuggerError(f"lost the connection to dlv ({why})")
        last = self.output().strip().splitlines()
        said = f"; it said: {last[-1][:200]}" if last else ""
        return DebuggerError(f"dlv ended with status {ended} ({why}){said}")

    def output(self) -> str:
        """What dlv has printed so far (its log file)."""
        if self._log is None:
            return ""
        try:
            return os.pread(self._log.fileno(), 1 << 20, 0).decode(errors="replace")
        except OSError:
            return ""

    def detach(self) -> None:
        """Ask dlv to let the target go (not kill it); dlv then exits."""
        self.call("Detach", {"Kill": False})
        self.detached = True

    def close(self) -> None:
        """Close the connection and make sure dlv is gone; if dlv ended without detaching
        (it died, or had to be killed), undo what it left in the target."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.wait(CALL_TIMEOUT_S)
        except subprocess.TimeoutExpired:  # a detach it answered but never finished counts for nothing
            self.detached = False
            os.killpg(process.pid, signal.SIGKILL)
            try:
                process.wait(CALL_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                pass  # unkillable (in the kernel): what can be put back is, below
        if not self.detached:
            after_dlv_killed(self.pid)
        if self._log is not None:
            self._log.close()
            self._log = None

    def _require(self) -> socket.socket:
        if self._sock is None:
            raise DebuggerError("not connected to dlv")
        return self._sock
