"""procfs.ThreadFiles: a thread's files opened once, and no more kept open than the cap."""

from __future__ import annotations

import os
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
