"""One Ctrl-C, at any moment, sent as a terminal sends it (SIGINT to the whole process group:
the front process and its worker both get it): one line at most, exit 0 (the summary) or 130,
never a traceback, the target untouched. `make test-bench` takes 12 moments; `make ctrl-c` 100
(SAMPLER_CTRL_C_RUNS).

The moments start 0.25 s after the command: what comes before sampler's first line (the
interpreter's start-up, `site`, `runpy`: 30-110 ms measured here) is Python's own, where a
Ctrl-C ends the process by SIGINT or with Python's traceback (docs/safety.md)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.integration.targets import ROOT, Target, assert_csv_whole, assert_text_matches_file

RUNS = int(os.environ.get("SAMPLER_CTRL_C_RUNS", "12"))


def test_one_ctrl_c_at_any_moment_is_one_line_and_harms_nothing(start_target: Callable[..., Target],
                                                                 tmp_path: Path) -> None:
    target = start_target("ringbuf-c")
    moments = random.Random(32).sample(range(250, 2000), RUNS)
    outcomes = []
    for i, ms in enumerate(moments):
        command = (["attach", "--backend", "ptrace", "--rate", "50"], ["trace", "--probe", "int3"],
                   ["trace"])[i % 3]  # (trace: in-process, once its first hits made the read plan)
        out = tmp_path / f"{i}.csv"
        proc = subprocess.Popen([sys.executable, "-m", "sampler", *command, "--pid", str(target.pid),
                                 "--at", "ring_read", "--expr", "d=b->w - b->r", "--duration", "10s",
                                 "--out", str(out), "--quiet"],
                                cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            proc.wait(ms / 1000)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends it
        try:
            _, stderr = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"{command[0]} at {ms} ms: the Ctrl-C did not end the run") from None
        lines = [line for line in stderr.splitlines() if not line.startswith("sampler: in-process at ")]
        # (an in-process probe's count is said even under --quiet: its calls were counted in the target)
        where = f"{command[0]}, Ctrl-C at {ms} ms: exit {proc.returncode}, {stderr!r}"
        # THEN one line at most, exit 0 (sampling had begun) or 130 (it had not), never a traceback
        assert proc.returncode in (0, 130), where
        assert "Traceback" not in stderr and "Exception ignored" not in stderr, where
        assert len(lines) <= 1, where
        if proc.returncode == 130:
            assert lines == ["sampler: interrupted before sampling started; the target was not touched"], where
        if out.exists() and out.stat().st_size:
            assert_csv_whole(out)  # every row taken is kept, whole
        # AND the target is untouched: not traced, not stopped, its code as its file
        status = target.status()
        assert status["TracerPid"].strip() == "0", where
        assert not status["State"].startswith(("T", "t")), where
        assert_text_matches_file(target)
        outcomes.append(proc.returncode)
    target.assert_untouched()
    print(f"{outcomes.count(0)} runs ended with the summary, {outcomes.count(130)} before sampling")
