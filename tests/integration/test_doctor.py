"""`sampler doctor` and `sampler --version`, on this host."""

from __future__ import annotations

import os
import shutil

from tests.integration.targets import sampler


def test_doctor_says_what_this_host_allows() -> None:
    result = sampler("doctor")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("sampler ") and "Python 3." in lines[0] and "Linux" in lines[0]
    said = dict(line.split(":", 1) for line in lines[1:] if ":" in line and not line.startswith(" "))
    assert set(said) == {"ptrace", "container", "debuginfod", "dlv", "backends"}, said
    if os.getuid() == 0:  # root here and in CI: ptrace is tried, and works
        assert said["ptrace"].strip().startswith("works here (a child of sampler's own was seized")
        assert "with CAP_SYS_PTRACE" in result.stdout
        assert "ptrace yes" in said["backends"]
    dlv = shutil.which("dlv")
    assert (dlv is not None and said["dlv"].strip().startswith(dlv)) or (dlv is None and "not on PATH" in said["dlv"])
    assert "seccomp:" in result.stdout and "yama:" in result.stdout


def test_version_names_the_commit_of_a_checkout() -> None:
    result = sampler("--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("sampler 0.")
    assert "(commit " in result.stdout  # the tests run from a git checkout
