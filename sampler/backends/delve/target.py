"""What both Delve drives need of a target, checked before dlv is started."""

from __future__ import annotations

from sampler.errors import BackendUnavailable, UnsupportedTarget
from sampler.target.process import TargetProcess


def check(target: TargetProcess, dlv: str | None) -> str:
    """Return the dlv to run; raise a SamplerError when Delve cannot debug ``target``."""
    if dlv is None:
        raise BackendUnavailable("the delve backends need dlv, which is not on PATH")
    if not target.is_go:
        raise UnsupportedTarget(f"process {target.pid} ({target.exe}) is not a Go program",
                                "the delve backends sample Go programs only")
    if not target.has_debug_info:
        raise UnsupportedTarget(f"{target.exe} has no DWARF debug info (built with -ldflags=-s -w?)",
                                "use --backend ptrace (it reads Go's function table, .gopclntab), "
                                "or sample an unstripped build")
    return dlv
