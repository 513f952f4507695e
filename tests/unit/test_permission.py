"""The one line for each reason the kernel refuses ptrace (facts given, no /proc read; one real zombie)."""

from __future__ import annotations

import subprocess
import time

import pytest

from sampler.errors import AlreadyTraced, PermissionDenied, ProcessNotFound
from sampler.target import procfs
from sampler.target.permission import CAP_SYS_PTRACE, Facts, denied

ALL = (1 << 41) - 1
WITHOUT_PTRACE = ALL & ~(1 << CAP_SYS_PTRACE)


def facts(**changes: object) -> Facts:
    base = dict(pid=42, our_uid=1000, our_caps=0, target_uid=1000, target_caps=0, yama_scope=None,
                in_container=False, tracer=0)
    return Facts(**{**base, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("given, says, hint", [
    (dict(yama_scope=3), "ptrace_scope is 3, which forbids all tracing", "reboot"),
    (dict(our_uid=0, our_caps=WITHOUT_PTRACE, target_uid=0, in_container=True),
     "runs as root but in a container started without SYS_PTRACE", "--cap-add=SYS_PTRACE"),
    (dict(our_uid=0, our_caps=WITHOUT_PTRACE, target_uid=0), "without CAP_SYS_PTRACE", "--cap-add=SYS_PTRACE"),
    (dict(yama_scope=2), "ptrace_scope is 2, so only CAP_SYS_PTRACE may trace", "run sampler as root"),
    (dict(target_uid=0), "it belongs to user root (uid 0)", "run sampler as root (sudo)"),
    (dict(target_uid=4242), "it belongs to uid 4242", "or as uid 4242"),
    (dict(yama_scope=1), "ptrace_scope is 1, so only a parent may trace its child", "kernel.yama.ptrace_scope=0"),
    (dict(target_caps=1 << 12), "holds capabilities sampler does not", "run sampler as root"),
])
def test_each_reason_has_its_line(given: dict[str, object], says: str, hint: str) -> None:
    error = denied(42, "trace", facts(**given))
    assert isinstance(error, PermissionDenied)
    assert str(error).startswith("not allowed to trace process 42: ")
    assert says in error.message and hint in error.hint, str(error)


def test_root_with_the_capability_is_not_blamed_on_yama() -> None:
    error = denied(42, "trace", facts(our_uid=0, our_caps=ALL, yama_scope=1))
    assert error.message == "not allowed to trace process 42, though sampler holds CAP_SYS_PTRACE"
    assert "run as root" not in error.hint and "security module" in error.hint


def test_a_process_that_exited_meanwhile_is_said_to_have_exited() -> None:
    # GIVEN a real process that has exited (a zombie: the kernel refuses to trace it, EPERM)
    child = subprocess.Popen(["true"])
    while procfs.state(child.pid) not in ("Z", ""):
        time.sleep(0.01)
    try:
        # WHEN the refusal is explained, as root
        error = denied(child.pid, "trace")
        # THEN it says the process exited, not that sampler should run as root
        assert isinstance(error, ProcessNotFound), str(error)
        assert f"process {child.pid} exited while sampler began to trace it" in error.message
    finally:
        child.wait()


def test_a_tracer_already_there_is_named() -> None:
    error = denied(42, "trace", facts(tracer=1))
    assert isinstance(error, AlreadyTraced)
    assert "already traced by PID 1" in error.message
