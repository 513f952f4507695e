"""What /proc says of a thread, parsed (sampler/target/threads.py), and the system call table."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from sampler.target import syscalls
from sampler.target.threads import SystemCall, parse_syscall, threads_of

HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")


def test_the_syscall_line_in_each_of_its_forms() -> None:
    assert parse_syscall("running") == SystemCall(None, running=True)
    assert parse_syscall("-1 0x7ffd1 0x4011") == SystemCall(None)
    futex = parse_syscall("202 0x7f00 0x80 0x2 0x0 0x0 0x0 0x7ffd 0x7f12")
    assert futex == SystemCall(202, (0x7F00, 0x80, 2, 0, 0, 0))
    assert str(futex) == "futex(0x7f00, 0x80, 0x2, ...)" and futex.name == "futex"
    assert str(parse_syscall("0 0x5 0x7f00 0x1000 0x0 0x0 0x0 0x7ffd 0x7f12")) == "read(fd 5)"
    assert str(parse_syscall("999 0x0 0x0 0x0 0x0 0x0 0x0 0x1 0x2")) == "syscall 999(0x0, 0x0, 0x0, ...)"
    assert str(SystemCall(None)) == "not in a system call" and str(SystemCall(None, running=True)) == "running"
    for bad in ("", "garbage", "5 0x1", "-7 0x0 0x0 0x0 0x0 0x0 0x0 0x0 0x0"):  # the kernel's, but bounded
        assert parse_syscall(bad) is None


@pytest.mark.skipif(not HEADER.exists(), reason="no kernel headers (linux-libc-dev) to check the table against")
def test_the_table_is_the_kernel_headers() -> None:
    found = {int(m.group(2)): m.group(1) for m in re.finditer(r"#define __NR_(\w+)\s+(\d+)", HEADER.read_text())}
    assert found == syscalls.NAMES


def test_this_process_threads_are_read_without_stopping_it() -> None:
    threads = threads_of(os.getpid())
    assert [t.tid for t in threads] == sorted(int(tid) for tid in os.listdir("/proc/self/task"))
    me = next(t for t in threads if t.tid == os.getpid())
    # caught reading its own syscall file: in read() on that file's descriptor
    assert me.state == "R" and me.syscall is not None and me.syscall.name == "read", me
