"""The wire to a headless Delve: ``dlv attach --headless`` on loopback, JSON-RPC 1.0 over TCP.

Requests may overlap (a ``continue`` is pending while a ``halt`` is sent): each
answer is matched to its request by id.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import subprocess
import time
from typing import Any

from sampler.backends.delve import parse
from sampler.errors import DebuggerError

_LISTENING = re.compile(r"API server listening at: (?P<host>[\d.]+):(?P<port>\d+)")
ATTACH_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 10.0


class RpcError(Exception):
    """Delve answered a request with an error message."""


class DelveRpc:
    def __init__(self, dlv: str, pid: int) -> None:
        self.dlv = dlv
        self.pid = pid
        self.process: subprocess.Popen[str] | None = None
        self._sock: socket.socket | None = None
        self._buffer = b""
        self._answers: dict[int, dict[str, Any]] = {}
        self._next_id = 0

    def start(self) -> None:
        """Start headless dlv on a port of its choosing on 127.0.0.1 and connect (target halted)."""
        self.process = subprocess.Popen(
            [self.dlv, "attach", str(self.pid), "--headless", "--api-version=2", "--accept-multiclient",
             "--listen=127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            start_new_session=True)  # its own session: a Ctrl-C meant for sampler never reaches it
        assert self.process.stdout is not None
        seen: list[str] = []
        deadline = time.monotonic() + ATTACH_TIMEOUT_S
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.5)
            if not ready:
                continue
            line = self.process.stdout.readline()
            if not line:
                break
            seen.append(line)
            match = _LISTENING.search(line)
            if match:
                self._sock = socket.create_connection((match.group("host"), int(match.group("port"))), 10)
                self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return
        self.close()
        raise parse.attach_error("".join(seen), self.pid)

    def send(self, method: str, params: dict[str, Any]) -> int:
        """Send a request; return its id (the answer is collected with ``answer``)."""
        self._next_id += 1
        message = json.dumps({"method": f"RPCServer.{method}", "params": [params], "id": self._next_id})
        try:
            self._require().sendall(message.encode() + b"\n")
        except OSError as e:
            raise DebuggerError(f"lost the connection to dlv: {e}") from None
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
            raise RpcError(str(reply["error"]))
        result = reply.get("result") or {}
        return result if isinstance(result, dict) else {}

    def call(self, method: str, params: dict[str, Any], timeout: float = CALL_TIMEOUT_S) -> dict[str, Any]:
        result = self.answer(self.send(method, params), timeout)
        if result is None:
            raise DebuggerError(f"dlv did not answer {method} within {timeout:g}s")
        return result

    def _read(self, timeout: float) -> None:
        sock = self._require()
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            return
        data = sock.recv(65536)
        if not data:
            raise DebuggerError("dlv closed the connection")
        self._buffer += data
        while b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            if line.strip():
                reply = json.loads(line)
                self._answers[int(reply.get("id") or 0)] = reply

    def close(self) -> None:
        """Close the connection and make sure dlv is gone."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        process, self.process = self.process, None
        if process is None:
            return
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        if process.stdout is not None:
            process.stdout.close()

    def _require(self) -> socket.socket:
        if self._sock is None:
            raise DebuggerError("not connected to dlv")
        return self._sock
