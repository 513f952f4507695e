"""The stop flag a signal handler raises (sampler/stop.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sampler.stop import StopFlag


@pytest.fixture
def flag() -> Iterator[StopFlag]:
    stop = StopFlag()
    yield stop
    stop.close()


def test_a_wait_without_a_stop_lasts_its_timeout(flag: StopFlag) -> None:
    start = time.monotonic()
    assert flag.wait(0.05) is False
    assert time.monotonic() - start >= 0.05
    assert not flag.is_set()


def test_a_signal_handler_ends_a_wait(flag: StopFlag) -> None:
    previous = signal.signal(signal.SIGALRM, lambda *_: flag.set())
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        start = time.monotonic()
        assert flag.wait(30) is True
        assert time.monotonic() - start < 30  # woken by the handler, not by the timeout
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert flag.is_set() and flag.wait(30) is True  # stays set: later waits return at once


def test_set_never_blocks_even_when_its_pipe_is_full(flag: StopFlag) -> None:
    for _ in range(200_000):  # far more bytes than a pipe holds
        flag.set()
    assert flag.is_set()



STORM = """
import signal, sys, time
from sampler.stop import StopFlag
flag = StopFlag()
signal.signal(signal.SIGALRM, lambda *_: flag.set())
signal.setitimer(signal.ITIMER_REAL, 0.0007, 0.0007)
end = time.monotonic() + 1
while time.monotonic() < end:
    flag.wait(0.00001)
signal.setitimer(signal.ITIMER_REAL, 0)
print("survived", flag.is_set())
"""


def test_a_storm_of_handlers_setting_it_during_waits_never_hangs() -> None:
    """threading.Event hangs here (or overflows the stack) within a second: its set() in a
    handler waits for the lock that the interrupted wait() holds. sampler hung so once in CI."""
    result = subprocess.run([sys.executable, "-c", STORM], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0 and result.stdout.strip() == "survived True", result.stderr[-2000:]
