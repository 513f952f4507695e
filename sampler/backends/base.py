"""The one interface every backend implements, and the one place that picks a backend."""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from typing import ClassVar, Protocol

from sampler.config import SessionConfig
from sampler.errors import UsageError
from sampler.process import TargetProcess
from sampler.sample import Reading

CHOICES = ("auto", "delve", "delve-rpc", "ptrace")


@dataclass(frozen=True)
class Capabilities:
    stops_all_threads: bool
    """True when every thread of the target stops for each sample."""
    languages: tuple[str, ...]
    """Which programs it can debug."""


class Backend(Protocol):
    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def attach(self) -> None:
        """Attach and leave the target running; raise a SamplerError if it cannot."""

    def sample(self, stop: threading.Event) -> Reading:
        """Take one sample and leave the target running.

        Problems with this one sample go into ``Reading.error``; problems that end the
        session (target gone, debugger gone, a bad expression) are raised. When ``stop``
        is set while waiting for a breakpoint, give up waiting and return a miss.
        """

    def trace(self, stop: threading.Event, until: float) -> Reading | None:
        """Every-hit mode: wait for the next hit of the breakpoint, which stays armed
        between calls; return its reading, or None at ``until`` (monotonic) or on stop."""

    def idle(self, seconds: float, stop: threading.Event) -> None:
        """Wait between samples (returning early when ``stop`` is set), serving the target
        meanwhile if the backend must (a ptrace tracer passes signals on)."""

    def detach(self) -> None:
        """Leave the target running, untouched, with no breakpoint; safe to call twice."""


@dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str
    """Why this backend, for the user: printed unless --quiet."""


def select(config: SessionConfig, target: TargetProcess) -> Choice:
    """Pick and build the backend for this target: the one place that decides."""
    if config.backend not in CHOICES:
        raise UsageError(f"unknown backend {config.backend!r}", f"choose one of {', '.join(CHOICES)}")
    dlv = shutil.which("dlv")
    choice = config.backend
    if choice == "auto":
        if target.is_go and dlv is not None:
            choice, reason = "delve", "Go program and dlv found"
        elif target.is_go:
            choice, reason = "ptrace", "Go program, but no dlv on PATH"
        else:
            choice, reason = "ptrace", "not a Go program"
    else:
        reason = "chosen with --backend"
    if choice == "delve":
        from sampler.backends.delve.backend import DelveBackend

        return Choice(DelveBackend.create(config, target, dlv), reason)
    if choice == "delve-rpc":
        from sampler.backends.delve.rpc_backend import DelveRpcBackend

        return Choice(DelveRpcBackend.create(config, target, dlv), reason)
    from sampler.backends.ptrace.backend import PtraceBackend

    return Choice(PtraceBackend.create(config, target), reason)
