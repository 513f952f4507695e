"""procfs.ThreadFiles: a thread's files opened once, and no more kept open than the cap."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from sampler.target import procfs


def test_files_are_kept_for_live_threads_and_the_cap_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(procfs, "MAX_THREAD_FILES", 2)
    pid = os.getpid()
    done = threading.Event()
    other = threading.Thread(target=done.wait)
    other.start()
    try:
        tid = other.native_id
        assert tid is not None
        deadline = time.monotonic() + 10  # until it sleeps in the wait (a loaded machine: a while)
        while procfs.thread_state(pid, tid) != "S" and time.monotonic() < deadline:
            time.sleep(0.01)
        files = procfs.ThreadFiles(lambda: {pid})
        assert files.state(pid, pid) in ("R", "S")
        assert files.ran(pid, pid) is not None
        assert len(files._fds) == 2
        # past the cap, a thread's files are read and closed again, the live ones' kept
        assert files.state(pid, tid) == "S"
        assert files.system_call(pid, tid) is not None  # blocked in futex
        assert len(files._fds) == 2 and all(key[0] == pid for key in files._fds)
        # a thread that is no longer live gives its place
        files2 = procfs.ThreadFiles(lambda: {tid})
        files2.state(pid, pid)
        files2.ran(pid, pid)
        files2.state(pid, tid)
        assert {key[0] for key in files2._fds} == {tid}
        files.close()
        files2.close()
    finally:
        done.set()
        other.join()


def test_a_thread_that_blocks_sigurg_is_seen_as_a_go_thread_in_a_signal_handler() -> None:
    """inprocess._in_go_handler: Go blocks every signal while its handler runs (SIGURG among them)."""
    from sampler.backends.ptrace.inprocess import _in_go_handler

    pid = os.getpid()
    blocked, release, done = threading.Event(), threading.Event(), threading.Event()

    def blocks() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGURG})
        blocked.set()
        release.wait()

    def opens() -> None:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGURG})
        done.wait()

    threads = [threading.Thread(target=blocks), threading.Thread(target=opens)]
    for thread in threads:
        thread.start()
    try:
        assert blocked.wait(10)
        in_handler, running = (thread.native_id for thread in threads)
        assert in_handler is not None and running is not None
        assert _in_go_handler(pid, in_handler)
        assert not _in_go_handler(pid, running)
        assert procfs.blocked_signals(pid, 1 << 30) is None  # (no such thread)
    finally:
        release.set()
        done.set()
        for thread in threads:
            thread.join()
