"""Why the kernel will not let sampler trace (or read) a process, in one line.

When ptrace, /proc/PID/mem or /proc/PID/exe is refused, the reason is one of a few:
sampler lacks CAP_SYS_PTRACE and the target belongs to another user; sampler runs
as root without CAP_SYS_PTRACE (a container started without SYS_PTRACE); Yama's
ptrace_scope forbids it; the target has capabilities sampler lacks or is not
dumpable. ``denied`` gathers the facts from /proc and names the one that applies.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from pathlib import Path

from sampler.errors import AlreadyTraced, PermissionDenied, ProcessNotFound, UsageError
from sampler.target import procfs

CAP_SYS_PTRACE = 19


@dataclass(frozen=True)
class Facts:
    pid: int
    our_uid: int
    our_caps: int
    """Effective capability set (CapEff)."""
    target_uid: int | None
    target_caps: int | None
    yama_scope: int | None
    """None when the kernel has no Yama."""
    in_container: bool
    tracer: int = 0
    """TracerPid of the target: a debugger holds it already."""


def gather(pid: int) -> Facts:
    ours = _status(os.getpid())
    theirs = _status(pid)
    return Facts(
        pid=pid,
        our_uid=os.geteuid(),
        our_caps=int(ours.get("CapEff", "0"), 16),
        target_uid=int(theirs["Uid"].split()[1]) if "Uid" in theirs else None,
        target_caps=int(theirs["CapPrm"], 16) if "CapPrm" in theirs else None,
        yama_scope=procfs.yama_scope(),
        in_container=any(Path(p).exists() for p in ("/.dockerenv", "/run/.containerenv"))
        or os.environ.get("container") is not None,
        tracer=procfs.tracer_in(theirs),
    )


def can_ptrace() -> bool:
    """True when sampler holds CAP_SYS_PTRACE (effective): then what it traces may exec a
    set-user-ID program and keep its privileges."""
    return bool(int(_status(os.getpid()).get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)


def denied(pid: int, action: str, facts: Facts | None = None) -> UsageError:
    """The error for ``action`` (e.g. 'trace') refused on ``pid``: what is wrong, what to do."""
    f = facts or gather(pid)
    can_ptrace = bool(f.our_caps >> CAP_SYS_PTRACE & 1)
    if facts is None and (not procfs.is_running(pid) or (can_ptrace and not f.tracer and procfs.ends_within(pid, 0.2))):
        # the kernel refuses a process that is exiting (EPERM), whoever asks
        return ProcessNotFound(f"process {pid} exited while sampler began to {action} it",
                               "nothing was changed in it; check that the program still runs")
    if f.tracer:
        return AlreadyTraced(f"process {f.pid} is already traced by PID {f.tracer} ({procfs.comm(f.tracer)})")
    what = f"not allowed to {action} process {f.pid}"
    if f.yama_scope == 3:
        return PermissionDenied(f"{what}: kernel.yama.ptrace_scope is 3, which forbids all tracing",
                                "only a reboot lowers it; sample on a host where it is 0, 1 or 2")
    if not can_ptrace and f.our_uid == 0:
        where = "in a container started without SYS_PTRACE" if f.in_container else \
            "without CAP_SYS_PTRACE (a container, or capabilities dropped)"
        return PermissionDenied(f"{what}: sampler runs as root but {where}",
                                "give it the capability: docker/podman run --cap-add=SYS_PTRACE, in Kubernetes "
                                "securityContext.capabilities.add: [SYS_PTRACE] (kubectl debug "
                                "--profile=general), or run sampler on the host")
    if f.yama_scope == 2 and not can_ptrace:
        return PermissionDenied(f"{what}: kernel.yama.ptrace_scope is 2, so only CAP_SYS_PTRACE may trace",
                                "run sampler as root (sudo)")
    if not can_ptrace and f.target_uid is not None and f.target_uid != f.our_uid:
        return PermissionDenied(f"{what}: it belongs to {_user(f.target_uid)} and sampler runs as "
                                f"{_user(f.our_uid)} without CAP_SYS_PTRACE",
                                "run sampler as root (sudo)" if f.target_uid == 0 else
                                f"run sampler as root (sudo) or as {_user(f.target_uid)}")
    if f.yama_scope == 1 and not can_ptrace:
        return PermissionDenied(f"{what}: kernel.yama.ptrace_scope is 1, so only a parent may trace its child",
                                "run sampler as root (sudo), or set kernel.yama.ptrace_scope=0 with sysctl")
    if not can_ptrace and f.target_caps:
        return PermissionDenied(f"{what}: it holds capabilities sampler does not (or is not dumpable)",
                                "run sampler as root (sudo)")
    if can_ptrace:
        return PermissionDenied(f"{what}, though sampler holds CAP_SYS_PTRACE",
                                "a security module (AppArmor, SELinux, seccomp) may forbid it: check the host's audit "
                                "log (dmesg, journalctl -k)")
    return PermissionDenied(what)


def _status(pid: int) -> dict[str, str]:
    try:
        return procfs.status(pid)
    except ProcessNotFound:
        return {}


def _user(uid: int) -> str:
    try:
        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"
