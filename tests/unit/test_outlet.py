"""Outlets: a reader that stops reading holds no one; whole lines dropped, counted, in order."""

from __future__ import annotations

import os
import time

import pytest

from sampler.output import outlet


def test_a_pipe_no_one_reads_never_blocks_the_writer(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN an outlet on a pipe no one reads, holding 100 lines
    monkeypatch.setattr(outlet, "QUEUE_ITEMS", 100)
    read_end, write_end = os.pipe()
    pipe = outlet.Outlet("pipe", outlet.write_all(write_end))
    stream = outlet.LineStream(pipe, write_end)
    # WHEN 20,000 lines of 100 bytes are written (30 times what the pipe holds), in parts
    started = time.monotonic()
    for index in range(20_000):
        stream.write(f"{index:09d} ")
        stream.write("x" * 89 + "\n")
    took = time.monotonic() - started
    # THEN no write waited, every line that did not fit was dropped whole, and once the reader
    # reads, the lines kept arrive whole and in order
    assert took < 5 and pipe.dropped > 18_000
    data = b""
    os.set_blocking(read_end, False)  # a blocking read after the last chunk, the thread still "busy"
    while True:  # writing it, waited for good (seen once in a clean-clone CI)
        writing = pipe.pending()
        try:
            data += os.read(read_end, 1 << 16)
        except BlockingIOError:
            if not writing:  # nothing in the pipe and nothing left to write into it
                break
            time.sleep(0.001)
    lines = data.decode().splitlines()
    assert len(lines) + pipe.dropped == 20_000
    numbers = [int(line[:9]) for line in lines]
    assert numbers == sorted(numbers) and all(line.endswith("x" * 89) for line in lines)
    os.close(read_end)
    os.close(write_end)


def test_an_error_of_the_thread_reaches_the_writer() -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # EPIPE (Python ignores SIGPIPE)
    pipe = outlet.Outlet("closed", outlet.write_all(write_end))
    pipe.put(b"a line\n")
    deadline = time.monotonic() + 5
    while pipe.error is None and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(BrokenPipeError):
        pipe.put(b"another\n")
    os.close(write_end)


def test_a_stop_signal_cuts_the_wait_for_a_reader_short(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN lines queued for a pipe no one reads, and a stop signal
    monkeypatch.setattr(outlet, "_outlets", [])
    monkeypatch.setattr(outlet, "_stop_at", None)
    monkeypatch.setattr(outlet, "ABANDON_S", 0.3)
    read_end, write_end = os.pipe()
    pipe = outlet.register(outlet.Outlet("stuck", outlet.write_all(write_end)))
    for _ in range(2000):
        pipe.put(b"y" * 100 + b"\n")
    outlet.request_stop()
    # WHEN the worker settles its output: THEN it waits ABANDON_S, not for the reader
    started = time.monotonic()
    outlet.settle()
    assert time.monotonic() - started < 3
    assert pipe.dropped > 0 and outlet.dropped() == [("stuck", pipe.dropped)]
    os.close(read_end)
    os.close(write_end)
