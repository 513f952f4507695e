"""The thin layer that calls the Kubernetes API: kubectl itself, as the user has it set up
(kubeconfig, context, auth plug-ins, `kubectl debug`'s ephemeral-container logic), rather
than the Python client, which would add a dependency and redo what kubectl does."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
from typing import Any, BinaryIO

from sampler.errors import SamplerError, UsageError


class KubectlError(SamplerError):
    """kubectl failed or is missing; its own message, in one line."""

    exit_code = 2


def _kubectl() -> str:
    found = shutil.which("kubectl")
    if found is None:
        raise KubectlError("kubectl is not on PATH", "install kubectl (1.27+) and set up its kubeconfig")
    return found


def get(*args: str) -> dict[str, Any]:
    """``kubectl get ARGS -o json``, parsed."""
    result = subprocess.run([_kubectl(), "get", *args, "-o", "json"], capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        raise KubectlError(f"kubectl get {' '.join(args)}: {_first_line(result.stderr)}")
    try:
        parsed: dict[str, Any] = json.loads(result.stdout)
    except ValueError:
        raise KubectlError(f"kubectl get {' '.join(args)} did not print JSON") from None
    return parsed


def server_version() -> dict[str, Any] | None:
    result = subprocess.run([_kubectl(), "version", "-o", "json"], capture_output=True, text=True, timeout=60)
    try:
        parsed: dict[str, Any] = json.loads(result.stdout)
        return parsed
    except ValueError:
        return None


def apply(manifest_text: str, delete: bool = False) -> None:
    verb = ["delete", "--ignore-not-found"] if delete else ["apply"]
    result = subprocess.run([_kubectl(), *verb, "-f", "-"], input=manifest_text, capture_output=True, text=True,
                            timeout=120)
    sys.stderr.write(result.stdout)
    if result.returncode != 0:
        raise KubectlError(f"kubectl {verb[0]}: {_first_line(result.stderr)}")


def stream(argv: list[str], out: BinaryIO) -> int:
    """Run a kubectl that streams sampler's rows: rows to ``out``, its stderr to ours. kubectl
    runs in its own session, so that Ctrl-C reaches only this process, which then closes
    kubectl's stdin: the remote sampler sees that, detaches and resumes the target, and its
    last rows still come through."""
    if not argv or argv[0] != "kubectl":
        raise UsageError("internal: not a kubectl command")
    proc = subprocess.Popen([_kubectl(), *argv[1:]], stdin=subprocess.PIPE, stdout=out, start_new_session=True)

    def end(_signum: int, _frame: object) -> None:
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()

    previous = signal.signal(signal.SIGINT, end)
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:
                end(0, None)
    finally:
        signal.signal(signal.SIGINT, previous)
        if proc.stdin is not None and not proc.stdin.closed:
            proc.stdin.close()


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "failed"
