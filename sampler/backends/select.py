"""The one place that picks and builds a backend for a target."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass

from sampler import notice
from sampler.backends.base import Backend
from sampler.config import SessionConfig
from sampler.errors import SamplerError, UsageError
from sampler.language import expr
from sampler.places import ptrace_only
from sampler.probes.needs import Need, can
from sampler.safety.repair import Repair
from sampler.safety.repair import repair as repair_journal
from sampler.target.process import TargetProcess

CHOICES = ("auto", "delve", "delve-rpc", "ptrace")


@dataclass(frozen=True)
class Choice:
    name: str
    """delve, delve-rpc or ptrace."""
    reason: str
    """Why this backend, for the user: printed unless --quiet."""


def pick(config: SessionConfig, target: TargetProcess) -> Choice:
    """Which backend samples this target, and why (nothing is built or loaded)."""
    if config.backend not in CHOICES:
        raise UsageError(f"unknown backend {config.backend!r}", f"choose one of {', '.join(CHOICES)}")
    dlv = shutil.which("dlv")
    choice = config.backend
    own = sorted(set().union(*(expr.uses(e.tree, expr.SAMPLER_ONLY) for e in config.expressions)))
    if own and not can(choice, Need.OWN_FUNCTIONS):
        raise UsageError(f"{', '.join(f'{name}()' for name in own)}: sampler's own, read by the ptrace backend; "
                         "Delve has no such function",
                         "use --backend ptrace (Delve compares strings itself: --expr 'cmd == \"GET\"')")
    if choice == "auto":
        if own:
            choice, reason = "ptrace", f"{' and '.join(f'{name}()' for name in own)}: read by the ptrace backend"
        elif any(ptrace_only(probe.location) for probe in config.probe_list()):
            only = next(p.location for p in config.probe_list() if ptrace_only(p.location))
            choice, reason = "ptrace", f"--at {only}: read by the ptrace backend"
        elif config.probes:
            choice, reason = "ptrace", f"{len(config.probes)} --at: the ptrace backend breaks at several places"
        elif config.timing is not None:
            choice, reason = "ptrace", f"{config.timing}: the ptrace backend's"
        elif config.probe_kind == "inprocess" or (config.probe_kind == "auto" and _counts(config)):
            choice, reason = "ptrace", f"--probe {config.probe_kind}: the ptrace backend's"
        elif target.is_go and not target.has_debug_info:
            choice, reason = "ptrace", "Go program without DWARF: Delve cannot read it"
        elif target.is_go and dlv is not None:
            choice, reason = "delve-rpc", "Go program and dlv found"
        elif target.is_go:
            choice, reason = "ptrace", "Go program, but no dlv on PATH"
        else:
            choice, reason = "ptrace", "not a Go program"
    else:
        reason = "chosen with --backend"
    return Choice(choice, reason)


def _counts(config: SessionConfig) -> bool:
    """A probe of the run reads nothing: its calls are counted in the target (in-process, ptrace's)."""
    return any(not p.expressions for p in config.probes) if config.probes else not config.expressions


def build(choice: Choice, config: SessionConfig, target: TargetProcess) -> Backend:
    """Build the chosen backend (only its code is loaded). The caller hands it to a Session
    at once: the session detaches it on every way out."""
    if choice.name in ("delve", "delve-rpc"):
        from sampler.evaluation.fields import expand_config

        config = expand_config(config, target.is_go, notice.say)
    if choice.name == "delve":
        from sampler.backends.delve.backend import DelveBackend

        return DelveBackend.create(config, target, shutil.which("dlv"))
    if choice.name == "delve-rpc":
        from sampler.backends.delve.rpc_backend import DelveRpcBackend

        return DelveRpcBackend.create(config, target, shutil.which("dlv"))
    from sampler.backends.ptrace.backend import PtraceBackend

    return PtraceBackend.create(config, target)


def build_many(config: SessionConfig, prepare: Callable[[int], TargetProcess]
               ) -> tuple[Backend, list[tuple[int, SamplerError]], list[int]]:
    """A run of many processes (ptrace: one tracer for all): each checked and repaired by
    ``prepare`` and built; (the backend, the processes left out with why, those in)."""
    from sampler.backends.ptrace.fleet import Fleet

    fleet, failed = Fleet.create(config, prepare)
    return fleet, failed, fleet.pids


def repair(pid: int | None = None, skip_traced: bool = False) -> list[Repair]:
    """What earlier runs left patched, put back (safety/repair.py); an in-process probe's jump with
    the process's threads stopped by ptrace for it (process/freeze.py)."""
    from sampler.process.freeze import every_thread_held

    return repair_journal(pid, skip_traced, every_thread_held)
