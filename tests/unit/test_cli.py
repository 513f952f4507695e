"""The command line in-process (cli.main): a usage mistake is one line on stderr and exit 2,
before anything is looked up (no worker, no process). The whole command as a user runs it is
tests/integration's."""

from __future__ import annotations

import pytest

from sampler import cli


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str]]:
    code = cli.main(list(args))
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, [line for line in captured.err.splitlines() if line.strip()]


@pytest.mark.parametrize("args, expected", [
    (["--interval", "1s", "--rate", "5"], "exclude each other"),
    (["--interval", "soon"], "is not a duration"),
    (["--expr", "seq=main.ring.w"], "fixed column"),
    (["--count-by", "nope"], "--count-by nope: no such column"),
    (["--stop-when", "nope > 1"], "no column 'nope'"),
    (["--at", "f", "--at", "g", "--backend", "delve"], "several --at need the ptrace backend"),
    (["--user", "root"], "--user goes with --exe"),
    (["--debug-dir", "/nonexistent"], "--debug-dir /nonexistent: no such directory"),
])
def test_usage_mistakes(capsys: pytest.CaptureFixture[str], args: list[str], expected: str) -> None:
    code, lines = run(capsys, "attach", "--pid", "1", "--expr", "main.ring.w", *args)
    assert code == 2 and len(lines) == 1 and lines[0].startswith("sampler: ") and expected in lines[0], lines


def test_attach_without_expr_says_what_to_do(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines = run(capsys, "attach", "--pid", "1")
    assert code == 2 and lines == [lines[0]] and "attach needs an --expr" in lines[0] and "sampler trace" in lines[0]


def test_each_expr_follows_its_at_as_click_parsed_it() -> None:
    ctx = cli.attach.make_context("attach", ["--pid", "1", "--expr", "c=calls", "--at", "f", "--expr", "y",
                                             "--out", "--at", "--at=g", "--expr=z=w", "--quiet", "--at", "h"])
    assert ctx.meta["order"] == ((None, ("c=calls",)), ("f", ("y",)), ("g", ("z=w",)), ("h", ()))
    assert ctx.params["out"] == "--at"  # an option's value that looks like --at is its value
