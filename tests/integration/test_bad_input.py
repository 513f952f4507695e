"""Bad input: one clear line, a non-zero exit, no traceback, and the target untouched."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    Seizer,
    Target,
    have_delve,
    one_line_error,
    sampler,
    unused_pid,
)

pytestmark = pytest.mark.skipif(not have_delve(), reason="dlv or the Go target is missing")
READ = "main.(*Ring).Read"


def attach(pid: int, *args: str) -> subprocess.CompletedProcess[str]:
    return sampler("attach", "--pid", str(pid), "--count", "2", "--rate", "10", "--quiet", *args)


def test_a_pid_that_does_not_exist() -> None:
    line = one_line_error(attach(unused_pid(), "--expr", "main.ring.w"))
    assert "no process with PID" in line and "ps" in line


def test_a_process_that_is_not_a_go_program(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        for backend, expected in (("delve", "is not a Go program"), ("auto", "no debug info was found for sleep")):
            line = one_line_error(attach(sleeper.pid, "--backend", backend, "--expr", "x",
                                         "--out", str(tmp_path / "x.csv")))
            assert expected in line, line
        assert sleeper.poll() is None
        assert not (tmp_path / "x.csv").exists(), "nothing is written before the checks pass"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_a_process_already_traced(go_target: Target) -> None:
    seizer = Seizer(go_target.pid)
    try:
        line = one_line_error(attach(go_target.pid, "--expr", "main.ring.w"))
        assert f"already traced by PID {seizer.proc.pid} (python" in line, line
        assert go_target.status()["TracerPid"].strip() == str(seizer.proc.pid)
    finally:
        seizer.release()
    go_target.assert_untouched()


@pytest.mark.parametrize("backend", ["delve", "delve-rpc"])
@pytest.mark.parametrize("location, expected", [
    ("main.nope", 'cannot break at \'main.nope\': location "main.nope" not found'),
    ("main.go:9999", "could not find statement"),
    ("main.(*Ring).Raed", "not found: did you mean 'main.(*Ring).Read'?"),
])
def test_an_unknown_location(go_target: Target, location: str, expected: str, backend: str) -> None:
    result = attach(go_target.pid, "--backend", backend, "--at", location, "--expr", "b.w")
    line = one_line_error(result)
    assert expected in line, line
    assert result.returncode == 2
    go_target.assert_untouched()


@pytest.mark.parametrize("expression, expected", [
    ("b.w-", "is not a valid expression"),
    ("b.w=1", "assignment"),
    ("b.w++", "increments"),
    ("f(b)", "function calls are not allowed"),
    ("b.w; b.r", "one expression only"),
    ("b.w\nb.r", "one expression only"),
])
def test_a_bad_or_unsafe_expression_is_refused_before_attaching(
        go_target: Target, expression: str, expected: str) -> None:
    result = attach(go_target.pid, "--at", READ, "--expr", expression)
    line = one_line_error(result)
    assert expected in line, line
    assert result.returncode == 2
    go_target.assert_untouched()


@pytest.mark.parametrize("args, expected", [
    (["--at", READ, "--expr", "b.nope"], "b has no member nope"),
    (["--backend", "delve-rpc", "--at", READ, "--expr", "b.nope"], "b has no member nope"),
    (["--backend", "delve-rpc", "--expr", "nosuchglobal"], "could not find symbol value for nosuchglobal"),
    (["--at", READ, "--expr", "nope"], "could not find symbol value for nope"),
    # at a breakpoint in package main, main is the function main.main (halted anywhere, dlv reads main
    # in whatever frame it halted in: in two clean-clone runs of 2026-12-01 one of its answers was
    # taken for a moment's error and the run went on, exit 0; the cause is not yet found)
    (["--at", READ, "--expr", "main.nope"], ("'main.nope': main (type func()) is not a struct",
                                             "'main.nope': could not find symbol value for main")),
    (["--expr", "nosuchglobal"], "could not find symbol value for nosuchglobal"),
])
def test_an_expression_naming_nothing(go_target: Target, args: list[str], expected: str | tuple[str, ...]) -> None:
    result = attach(go_target.pid, *args)
    line = one_line_error(result)
    assert any(text in line for text in ((expected,) if isinstance(expected, str) else expected)), line
    go_target.assert_untouched()


def test_an_unwritable_output(go_target: Target) -> None:
    line = one_line_error(attach(go_target.pid, "--expr", "main.ring.w",
                                 "--out", "/nonexistent-dir/samples.csv"))
    assert "cannot write --out /nonexistent-dir/samples.csv" in line
    go_target.assert_untouched()


@pytest.mark.parametrize("backend", ["delve", "delve-rpc", "ptrace"])
def test_a_bad_out_is_refused_before_any_work(go_target: Target, tmp_path: Path, backend: str) -> None:
    # an unknown location too: --out is checked first, before the program is read or dlv started
    line = one_line_error(attach(go_target.pid, "--backend", backend, "--at", "main.Nope", "--expr", "b.w",
                                 "--out", str(tmp_path / "missing" / "x.csv")))
    assert "cannot write --out" in line, line
    go_target.assert_untouched()


@pytest.mark.parametrize("backend", ["delve", "delve-rpc", "ptrace"])
def test_no_csv_header_when_the_attach_fails(go_target: Target, tmp_path: Path, backend: str) -> None:
    kept = tmp_path / "kept.csv"
    kept.write_text("an earlier run\n")
    for out in ("-", str(kept)):
        result = attach(go_target.pid, "--backend", backend, "--at", "main.Nope", "--expr", "b.w", "--out", out)
        one_line_error(result)
        assert result.stdout == ""
    assert kept.read_text() == "an earlier run\n"
    go_target.assert_untouched()


def test_the_go_advice_is_for_go_programs_only(start_target: Callable[..., Target]) -> None:
    c_target = start_target("ringbuf-c")
    line = one_line_error(attach(c_target.pid, "--backend", "ptrace", "--at", "ring_read", "--expr", "nope"))
    assert "no variable 'nope'" in line and "Go" not in line and "package-qualified" not in line, line
    go = start_target("ringbuf-go")
    line = one_line_error(attach(go.pid, "--backend", "ptrace", "--expr", "ring.w"))
    assert "Go globals are package-qualified (main.ring)" in line, line
