"""The one interface every backend implements, and the one place that picks a backend."""

from __future__ import annotations

import shutil
import threading
from dataclasses import dataclass
from typing import ClassVar, Protocol

from sampler.config import SessionConfig
from sampler.errors import BackendUnavailable, UnsupportedTarget, UsageError
from sampler.process import TargetProcess
from sampler.sample import Reading

CHOICES = ("auto", "delve")


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

    def detach(self) -> None:
        """Leave the target running, untouched, with no breakpoint; safe to call twice."""


@dataclass(frozen=True)
class Choice:
    backend: Backend
    reason: str
    """Why this backend, for the user: printed unless --quiet."""


def select(config: SessionConfig, target: TargetProcess) -> Choice:
    """Pick and build the backend for this target."""
    if config.backend not in CHOICES:
        raise UsageError(f"unknown backend {config.backend!r}", f"choose one of {', '.join(CHOICES)}")
    dlv = shutil.which("dlv")
    if config.backend == "auto":
        if not target.is_go:
            raise UnsupportedTarget(
                f"process {target.pid} ({target.exe}) is not a Go program, and only the "
                "delve backend exists so far", "sample a Go program")
        if dlv is None:
            raise BackendUnavailable("the delve backend needs dlv, which is not on PATH")
        reason = "Go program and dlv found"
    else:
        reason = "chosen with --backend"
    from sampler.backends.delve.backend import DelveBackend

    return Choice(DelveBackend.create(config, target, dlv), reason)
