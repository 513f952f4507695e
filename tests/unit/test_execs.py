"""The parser of the kernel's process events (a datagram built here) and one real exec."""

from __future__ import annotations

import struct
import subprocess
import time

from sampler.target import execs


def _event(what: int, tgid: int, nanoseconds: int = 5_000_000_000) -> bytes:
    body = struct.pack("=IIQ", what, 0, nanoseconds) + struct.pack("=II", tgid, tgid)
    cn = struct.pack("=IIIIHH", execs.CN_IDX_PROC, execs.CN_VAL_PROC, 0, 0, len(body), 0) + body
    return struct.pack("=IHHII", 16 + len(cn), 3, 0, 0, 0) + cn


def test_exec_events_are_read_and_others_passed_over() -> None:
    data = _event(execs.PROC_EVENT_EXEC, 42) + _event(0x80000000, 43) + _event(execs.PROC_EVENT_EXEC, 44, 7)
    assert execs.parse(data) == [(42, 5.0), (44, 7e-9)]


def test_a_truncated_or_lying_datagram_gives_what_is_whole() -> None:
    whole = _event(execs.PROC_EVENT_EXEC, 42)
    assert execs.parse(whole[:-3]) == []
    lying = struct.pack("=I", 10_000) + whole[4:]  # a length past the end
    assert execs.parse(lying + whole) == []
    assert execs.parse(struct.pack("=I", 2) + whole[4:]) == []  # shorter than a header
    assert execs.parse(b"") == []


def test_a_real_exec_is_told_as_it_happens() -> None:
    events = execs.open_events()
    if events is None:  # not root: the look at /proc stays the only way
        return
    try:
        started = time.monotonic()
        child = subprocess.Popen(["/bin/true"])
        child.wait()
        deadline = time.monotonic() + 5
        told: dict[int, float] = {}
        while child.pid not in told and time.monotonic() < deadline:
            told.update(events.take())
            time.sleep(0.01)
        assert child.pid in told
        assert started <= told[child.pid] <= time.monotonic()
    finally:
        events.close()
