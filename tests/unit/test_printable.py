"""Nothing the target controls reaches a terminal raw (printable.py), in every writer."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

from sampler.output.console import format_line
from sampler.output.live import LiveView
from sampler.printable import printable
from sampler.sample import Reading, Sample, record, row

EVIL = "\x1b]0;PWNED\x07\x1b[2Jnext\nline\tend\x9b1m\u202egnp.exe\udcff"


def test_control_characters_are_escaped_and_text_is_kept() -> None:
    assert printable(EVIL) == "\\x1b]0;PWNED\\x07\\x1b[2Jnext\\nline\\tend\\x9b1m\\u202egnp.exe\\xff"
    assert printable("plain ünïcode, C:\\path") == "plain ünïcode, C:\\path"  # untouched
    assert printable(printable(EVIL)) == printable(EVIL)  # escaping twice changes nothing


def sample(value: object, error: str = "") -> Sample:
    return Sample(1, datetime(2026, 12, 1, tzinfo=UTC), 0.5, 42, Reading((value,), thread="7",
                                                                                   error=error), 0.0)


def test_no_writer_lets_a_raw_escape_through() -> None:
    s = sample(EVIL, error=f"s: {EVIL}")
    line = format_line(s, ["s"])
    fields = row(s)
    as_json = json.dumps(record(s, ["seq", "time", "elapsed_s", "pid", "thread", "s", "pause_us", "wait_us",
                                    "late_us", "error"]))
    live = io.StringIO()
    view = LiveView(["s"], 42, stream=live)
    view.write(s)
    view.close()
    for text in (line, *fields, as_json, live.getvalue()):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\u202e" not in text, text
    assert "\\x1b]0;PWNED" in line and fields[5] == printable(EVIL) and fields[-1] == f"s: {printable(EVIL)}"
