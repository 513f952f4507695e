"""cli._exit_code: each way out is one line and its exit code; a Ctrl-C Python wrapped is still a Ctrl-C."""

from __future__ import annotations

import pytest

from sampler import cli


def ctrl_c_while_a_class_is_made() -> None:
    class Descriptor:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt  # (a SIGINT landing while a lazily imported module makes its dataclasses)

    class Made:
        field = Descriptor()


def test_a_ctrl_c_python_wrapped_is_an_interruption_not_an_internal_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli._exit_code(ctrl_c_while_a_class_is_made) == 130
    assert "interrupted before sampling started" in capsys.readouterr().err


def test_a_bug_is_still_an_internal_error(capsys: pytest.CaptureFixture[str]) -> None:
    def broken() -> None:
        raise RuntimeError("a bug")

    assert cli._exit_code(broken) == 70
    assert "internal error: RuntimeError: a bug" in capsys.readouterr().err
