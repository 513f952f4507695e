"""py: values of CPython programs, read with nothing stopped: every value equal to what the program
logged after the step it was read at (it steps only when told), for Debian's python3.11 and pyenv's
3.8-3.13; bad names one line each; a process that is not CPython one line."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.pythons import SCRIPTS, SOME, need
from tests.integration.targets import Target, read_csv, sampler

VALUES = SCRIPTS / "values.py"
EXPRS = {
    "big": "py:__main__.big", "text": "py:__main__.text", "n": "len(py:__main__.table)",
    "k": 'py:__main__.table["key9999"]', "new": "py:__main__.table['new2']", "t": 'py:__main__.cfg["timeout"]',
    "s": "py:__main__.cfg[7]", "q": "len(py:__main__.state.queue)", "m": "py:__main__.state.maxsize",
    "nm": "py:__main__.state.name", "r": "py:__main__.ratio", "f": "py:__main__.flag", "no": "py:__main__.nothing",
    "raw": "py:__main__.raw", "i": "py:__main__.items[-1]", "p": "py:__main__.pair[1]",
    "ms": "len(py:__main__.members)", "st": "py:__main__.state", "mod": "py:collections.deque",
}


def _untouched(target: Target) -> None:
    """Not traced, not stopped, and it still answers (it steps when told)."""
    status = Path(f"/proc/{target.pid}/status").read_text()
    assert re.search(r"^TracerPid:\s+0$", status, re.M) and re.search(r"^State:\s+S", status, re.M), status
    done = sum(line.startswith("step ") for line in target.lines)
    target.send("s")
    target.wait_for(lambda: sum(line.startswith("step ") for line in target.lines) > done, 10, "it stepped no more")


def _row(pid: int, tmp_path: object, *more: str) -> dict[str, str]:
    out = f"{tmp_path}/rows.csv"
    args = [a for name, text in EXPRS.items() for a in ("--expr", f"{name}={text}")]
    result = sampler("attach", "--pid", str(pid), *args, *more, "--count", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    [row] = read_csv(Path(out))
    return row


@pytest.mark.parametrize("python", SOME)
def test_every_value_is_what_the_program_logged(python: str, start_target: Callable[..., Target],
                                               tmp_path: object) -> None:
    need(python)
    target = start_target(python, str(VALUES), binary=False, stdin=True)
    for step in (1, 2, 3):
        target.send("s")
        prefix = f"step {step} "
        target.wait_for(lambda: any(line.startswith(prefix) for line in target.lines), 10, "no step")  # noqa: B023
        logged = next(line for line in target.lines if line.startswith(prefix))
        fields = dict(re.findall(r"(\w+)=(\S+)", logged))
        row = _row(target.pid, tmp_path)
        assert row["error"] == "" if step >= 2 else row["error"] == "new: no key 'new2'", row["error"]
        assert row["big"] == fields["big"] == str(2 ** 64 + step)
        assert row["text"] == fields["text"] == f"naïve-{step}"
        assert row["n"] == fields["keys"] == str(10_000 + step)
        assert row["q"] == fields["queue"] == str(step)
        assert (row["k"], row["t"], row["s"], row["m"], row["nm"]) == ("9999", str(30 + step), "seven", "64", "état")
        assert float(row["r"]) == step / 4 and row["f"] == str(step % 2)
        assert (row["no"], row["raw"], row["i"], row["p"], row["ms"]) == ("None", "00ff6162", "30", "two", "3")
        assert re.fullmatch(r"<State at 0x[0-9a-f]+>", row["st"]) and re.fullmatch(r"<type at 0x[0-9a-f]+>", row["mod"])
        assert step < 2 or row["new"] == "2"
    _untouched(target)


@pytest.mark.parametrize("text, error", [
    ("py:nope.x", "no module 'nope' in sys.modules"),
    ("py:__main__.state.nope", "no attribute 'nope'"),
    ('py:__main__.cfg["nope"]', "no key 'nope'"),
    ("py:__main__.items[9]", "index 9 is out of the list's 3 items"),
    ("len(py:__main__.big)", "len() of a int"),
])
def test_a_name_that_is_not_there_is_the_rows_error(text: str, error: str, start_target: Callable[..., Target],
                                                   tmp_path: object) -> None:
    target = start_target("/usr/bin/python3.11", str(VALUES), binary=False, stdin=True)
    out = f"{tmp_path}/rows.csv"
    result = sampler("attach", "--pid", str(target.pid), "--expr", f"v={text}", "--count", "1", "--out", out)
    assert result.returncode == 0, result.stderr
    [row] = read_csv(Path(out))
    assert row["v"] == "" and row["error"].startswith(f"v: {error}"), row["error"]


@pytest.mark.parametrize("text", ["py:", "py:a..b", "py:a+1", "len(py:a", 'py:a["x]', 'py:a["\\x"]',
                                  "py:a[" + "9" * 5000 + "]"])
def test_a_malformed_py_expression_is_one_line(text: str, start_target: Callable[..., Target]) -> None:
    target = start_target("/usr/bin/python3.11", str(VALUES), binary=False, stdin=True)
    result = sampler("attach", "--pid", str(target.pid), "--expr", text, "--count", "1", "--out", "-")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    _untouched(target)


def test_a_process_that_is_not_cpython_is_one_line(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    result = sampler("attach", "--pid", str(target.pid), "--expr", "py:app.x", "--count", "1", "--out", "-")
    assert result.returncode == 2, (result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert "is not CPython: no _PyRuntime" in lines[-1] and "Traceback" not in result.stderr, lines
    target.assert_untouched()


def test_a_debug_build_of_cpython_is_one_line(start_target: Callable[..., Target]) -> None:
    """python3.11d (python3.11-dbg's Py_DEBUG interpreter): its objects carry more than a release build's, so
    values are refused in one line and a stack says why it has no Python frames."""
    python = "/usr/bin/python3.11d"
    if not os.path.exists(python):
        pytest.skip("python3.11-dbg's python3.11d is not here (make setup installs python3.11-dbg)")
    target = start_target(python, str(VALUES), binary=False, stdin=True)
    result = sampler("attach", "--pid", str(target.pid), "--expr", "py:__main__.big", "--count", "1", "--out", "-")
    last = result.stderr.strip().splitlines()[-1]
    assert result.returncode == 2 and "debug" in last and "build of CPython" in last, result.stderr
    stack = sampler("stack", "--pid", str(target.pid))
    assert stack.returncode == 0 and "Python frames not read" in stack.stdout and "debug" in stack.stdout, stack.stdout
