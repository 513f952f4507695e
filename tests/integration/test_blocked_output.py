"""A reader that stops reading never holds the target, and never holds a Ctrl-C (issue 32).

Before: in `trace`, a blocked write of sampler's (stdout to a pipe no one read, Ctrl-S on the
terminal) left every thread that hit a breakpoint stopped: ringbuf-c's reads/s was 0 for the
4 s of a 6 s stall, and SIGINT did nothing until the reader drained the pipe."""

from __future__ import annotations

import csv
import fcntl
import io
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from tests.integration.targets import ROOT, SAMPLER_ENV, Target, assert_text_matches_file, read_counter

F_SETPIPE_SZ = 1031


def _trace(target: Target, *args: str, queue: int = 500) -> subprocess.Popen[bytes]:
    """The int3 path, whose threads wait at every hit (an in-process probe's never do)."""
    return subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--backend", "ptrace", "--pid", str(target.pid),
                             "--at", "ring_read", "--expr", "d=b->w - b->r", "--probe", "int3", *args], cwd=ROOT,
                            env={**SAMPLER_ENV, "SAMPLER_QUEUE_LINES": str(queue)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_a_reader_that_stops_reading_holds_nothing(start_target: Callable[..., Target]) -> None:
    # GIVEN ringbuf-c traced at its hot ring_read, the rows going to a pipe no one reads for 4 s
    # (its 64 KiB are full within half a second: about 3,000 rows a second of 80 bytes)
    target = start_target("ringbuf-c")
    before = len(target.throughput())
    proc = _trace(target, "--duration", "5s", "--quiet")
    assert proc.stdout is not None
    # a pipe of one page (about 50 rows), before sampler's first row: full within the 4 s however
    # slowly a loaded machine lets the trace go (it filled 64 KiB but one time in a loaded run)
    fcntl.fcntl(proc.stdout.fileno(), F_SETPIPE_SZ, 4096)
    reads = []  # the reader's own count, each second: its printing thread is held at every step
    for _ in range(4):  # (sampler holds every thread while one steps; that one may print late)
        reads.append(read_counter(target, "reads"))
        time.sleep(1)
    # WHEN the reader starts reading only then
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.communicate(timeout=60)
    # THEN the target's own throughput never stopped, the run ended as asked, and the summary
    # says how many rows were dropped: exactly those the seq column lacks
    reads.append(read_counter(target, "reads"))
    during = [b - a for a, b in zip(reads, reads[1:])]
    assert min(during) > 0, during
    assert min(target.throughput()[before:]) > 0
    assert proc.returncode == 0, err.decode()
    rows = list(csv.DictReader(io.StringIO(out.decode())))
    said = [line for line in err.decode().splitlines() if "rows to stdout were dropped" in line]
    assert len(said) == 1, err.decode()
    dropped = int(said[0].split()[1])
    seqs = [int(row["seq"]) for row in rows]
    assert dropped > 0 and max(seqs) == len(rows) + dropped, (dropped, len(rows), max(seqs))
    assert seqs == sorted(seqs)
    target.assert_untouched()
    assert_text_matches_file(target)


def test_a_ctrl_c_ends_the_run_whatever_the_output_does(start_target: Callable[..., Target]) -> None:
    # GIVEN a trace whose per-sample lines (stderr) and rows (stdout) no one reads
    target = start_target("ringbuf-c")
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--backend", "ptrace", "--pid", str(target.pid),
                             "--at", "ring_read", "--expr", "d=b->w - b->r", "--duration", "60s"], cwd=ROOT,
                            env=SAMPLER_ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(3)  # both pipes full by now
    # WHEN a Ctrl-C comes, as a terminal sends it (to the whole process group)
    os.killpg(proc.pid, signal.SIGINT)
    sent = time.monotonic()
    deadline = sent + 15
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    # THEN sampler ends within seconds though no one read, and the target runs on untouched
    ended = time.monotonic() - sent
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and ended < 10, (proc.returncode, ended, err.decode()[-2000:])
    target.assert_untouched()
    assert_text_matches_file(target)
