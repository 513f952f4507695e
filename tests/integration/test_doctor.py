"""`sampler doctor`, `sampler --version` and `sampler completion`, on this host."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.integration.targets import one_line_error, sampler


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


def _bash_completes(words: str) -> list[str]:
    """What bash offers at the Tab key after ``words``, with sampler's script loaded as a user does."""
    venv_bin = Path(sys.executable).parent
    assert (venv_bin / "sampler").exists()
    script = (f'eval "$(sampler completion bash)"; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); '
              '_sampler_completion sampler; printf "%s\\n" "${COMPREPLY[@]}"')
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}"})
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result.stdout.split()


def test_bash_completes_commands_options_and_choices() -> None:
    assert _bash_completes("sampler att") == ["attach"]
    assert set(_bash_completes("sampler ''")) >= {"attach", "trace", "report", "repair", "doctor", "completion"}
    assert "--follow-forks" in _bash_completes("sampler attach --fol")
    assert _bash_completes("sampler attach --backend ''") == ["auto", "delve", "delve-rpc", "ptrace"]


def test_every_shell_gets_its_script_and_a_wrong_one_a_clear_line() -> None:
    for shell, mark in (("bash", "complete -o nosort -F _sampler_completion sampler"),
                        ("zsh", "compdef _sampler_completion sampler"),
                        ("fish", "complete --no-files --command sampler")):
        result = sampler("completion", shell)
        assert result.returncode == 0 and mark in result.stdout, (shell, result.stdout[-300:])
    line = one_line_error(sampler("completion", "tcsh"))
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in line
