"""sampler as pip installs it: the wheel alone, in a fresh venv, with what it declares and nothing
else (no test extras, no matplotlib, no pandas). Every module sampler has must import there, and
the commands must run on a bundled target: a module that imports a package the wheel does not
declare fails here, not in a pod (numpy, imported by the in-process probes and missing from the
image's own list of packages, was exit 70 on every host for weeks).

The venv is made once per test session from this checkout (pip wheel --no-deps .), its
dependencies from PyPI through pip's cache, with the oldest Python the wheel takes (3.9, pyenv's,
where the machine has it: a type alias written ``list[int] | None`` passes ruff and mypy and is a
TypeError at import on 3.9), else with the tests' own."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pythons import pyenv
from tests.integration.targets import ROOT, Target, read_csv

DECLARED_ONLY = {"pandas", "matplotlib", "hypothesis", "pytest", "py-spy", "ruff", "mypy"}
"""The test and plot extras: none of them may be in the venv the wheel made."""


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the wheel of this checkout and its declared dependencies, nothing else."""
    folder = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(folder), str(ROOT)],
                   check=True, capture_output=True, timeout=300)
    [wheel] = folder.glob("debug_sampler-*.whl")
    venv = folder / "venv"
    subprocess.run([pyenv(9) or sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", str(wheel)],
                               capture_output=True, text=True, timeout=600)
    assert installed.returncode == 0, installed.stderr
    return venv


def run(venv: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """sampler of the venv, started from a folder that is not the checkout (no sampler/ beside it)."""
    return subprocess.run([str(venv / "bin" / "sampler"), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=venv)


def test_the_wheel_declares_every_module_sampler_imports(wheel_venv: Path) -> None:
    # GIVEN the venv the wheel made: its packages are what the wheel declares
    listed = subprocess.run([str(wheel_venv / "bin" / "pip"), "list", "--format", "json"], capture_output=True,
                            text=True, check=True).stdout
    names = {p["name"].lower() for p in json.loads(listed)}
    assert {"numpy", "capstone", "python-ptrace", "pyelftools", "click", "pexpect"} <= names, names
    assert not names & DECLARED_ONLY, names & DECLARED_ONLY
    # WHEN every module of the installed sampler is imported there
    script = (
        "import importlib, pkgutil, sampler, sys\n"
        "assert 'site-packages' in sampler.__file__, sampler.__file__\n"
        "failed = []\n"
        "for m in pkgutil.walk_packages(sampler.__path__, 'sampler.'):\n"
        "    if m.name.endswith('__main__'): continue  # python -m sampler: it runs the command\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except Exception as e:\n"
        "        failed.append(f'{m.name}: {type(e).__name__}: {e}')\n"
        "print(len(list(pkgutil.walk_packages(sampler.__path__, 'sampler.'))))\n"
        "print('\\n'.join(failed))\n")
    result = subprocess.run([str(wheel_venv / "bin" / "python"), "-c", script], capture_output=True, text=True,
                            timeout=120, cwd=wheel_venv)
    # THEN each imports (the plot's matplotlib only when --plot is asked for)
    assert result.returncode == 0, result.stderr
    count, *failed = result.stdout.splitlines()
    assert int(count) > 100
    assert [line for line in failed if line] == []


def test_the_commands_run_from_the_wheel_alone(wheel_venv: Path, start_target: Callable[..., Target],
                                               tmp_path: Path) -> None:
    # GIVEN the C ring buffer running, and sampler from the wheel's venv
    target = start_target("ringbuf-c")
    pid = str(target.pid)
    # WHEN its stack is read
    stack = run(wheel_venv, "stack", "--pid", pid)
    assert stack.returncode == 0, stack.stderr
    assert "ring_read" in stack.stdout or "reader" in stack.stdout, stack.stdout
    # a profile is taken
    folded = tmp_path / "cpu.folded"
    profile = run(wheel_venv, "profile", "--pid", pid, "--duration", "1s", "--out", str(folded))
    assert profile.returncode == 0, profile.stderr
    assert any(";reader" in line for line in folded.read_text().splitlines())
    # every call of ring_read is traced, in-process (numpy reads the ring)
    trace = tmp_path / "trace.csv"
    traced = run(wheel_venv, "trace", "--pid", pid, "--at", "ring_read", "--expr", "delta=b->w - b->r",
                 "--max-events", "2000", "--quiet", "--out", str(trace))
    assert traced.returncode == 0, traced.stderr
    in_process = re.search(r"in-process at --at ring_read .*?(\d+) row\(s\)", traced.stderr)
    assert in_process and int(in_process.group(1)) > 1000, traced.stderr
    rows = read_csv(trace)
    assert len(rows) == 2000 and all(0 <= int(r["delta"]) <= 20000 for r in rows)
    # a breakpoint sample with the ptrace backend, and the report of it
    samples = tmp_path / "samples.csv"
    attached = run(wheel_venv, "attach", "--backend", "ptrace", "--pid", pid, "--at", "ring_read",
                   "--expr", "delta=b->w - b->r", "--count", "5", "--rate", "20", "--quiet", "--out", str(samples))
    assert attached.returncode == 0, attached.stderr
    assert len(read_csv(samples)) == 5
    report = run(wheel_venv, "report", str(samples))
    assert report.returncode == 0 and "delta" in report.stdout, report.stderr
    # without matplotlib, --plot is one line, not an internal error
    plot = run(wheel_venv, "report", str(samples), "--plot", str(tmp_path / "p.png"))
    assert plot.returncode == 2 and "needs matplotlib" in plot.stderr, plot.stderr
    # THEN the target ran on untouched
    target.assert_untouched()


def test_delve_backends_run_from_the_wheel_alone(wheel_venv: Path, go_target: Target, tmp_path: Path) -> None:
    # GIVEN the Go ring buffer; WHEN both Delve backends sample it from the wheel's venv
    for backend in ("delve", "delve-rpc"):
        out = tmp_path / f"{backend}.csv"
        result = run(wheel_venv, "attach", "--backend", backend, "--pid", str(go_target.pid),
                     "--at", "main.(*Ring).Read", "--expr", "delta=b.w-b.r", "--count", "3", "--interval", "0.2s",
                     "--quiet", "--out", str(out))
        # THEN each writes its rows, values in range
        assert result.returncode == 0, (backend, result.stderr)
        rows = read_csv(out)
        assert len(rows) == 3 and all(0 <= int(r["delta"]) <= 20000 for r in rows), rows
    go_target.assert_untouched()

