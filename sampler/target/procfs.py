"""The one reader of /proc: every fact sampler reads about a process is parsed here, typed.

Nothing here changes a process. A process that is gone raises ProcessNotFound where
the caller needs the fact, and gives None or False where "gone" is an answer.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from sampler.errors import ProcessNotFound, TargetExited

T = TypeVar("T")

YAMA = Path("/proc/sys/kernel/yama/ptrace_scope")


def gone_is_exit(pid: int, run: Callable[[], T]) -> T:
    """``run()``; a system call that found the process gone (ESRCH, or its /proc files
    vanished) at a moment no check caught is the process's exit, said as such."""
    try:
        return run()
    except (ProcessLookupError, FileNotFoundError) as e:
        if is_running(pid):
            raise
        raise TargetExited(f"target process {pid} exited ({e.strerror})") from None


def open_mem(pid: int, writable: bool = False) -> int:
    """A descriptor of /proc/PID/mem: the address space the process has now, which it keeps
    whatever the PID runs later (an exec, a reused PID). Raises OSError as os.open does."""
    return os.open(f"/proc/{pid}/mem", (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)


def _lines(pid: int, name: str) -> list[str]:
    """The lines of /proc/PID/NAME, bytes that are not UTF-8 kept (surrogateescape); ProcessNotFound when it is gone."""
    try:
        with open(f"/proc/{pid}/{name}", encoding="utf-8", errors="surrogateescape") as f:
            return f.read().splitlines()
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessNotFound(f"no process with PID {pid}") from None


def status(pid: int) -> dict[str, str]:
    """/proc/PID/status as a dict; raise ProcessNotFound when the process is gone."""
    lines = _lines(pid, "status")
    fields = {}
    for line in lines:
        key, _, value = line.partition(":")
        fields[key] = value.strip()
    return fields


def own_pid(pid: int) -> int:
    """The process's id in its own pid namespace (NSpid's last: a container's process sees another)."""
    ids = status(pid).get("NSpid", "").split()
    return int(ids[-1]) if ids else pid


def seccomp(pid: int) -> int:
    """0: no seccomp; 1: strict; 2: a filter."""
    return int(status(pid).get("Seccomp", "0") or 0)


def has_userfaultfd(pid: int) -> bool:
    """The process holds a userfaultfd (its faults on some pages wait for a thread of its own)."""
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(f"/proc/{pid}/fd/{name}") == "anon_inode:[userfaultfd]":
                return True
        except OSError:
            continue
    return False


def tracer_pid(pid: int) -> int:
    """The PID of the process tracing ``pid`` (0: none); ProcessNotFound when it is gone."""
    return tracer_in(status(pid))


def tracer_in(fields: dict[str, str]) -> int:
    """The tracer's PID from a ``status`` already read (0: none)."""
    try:
        return int(fields.get("TracerPid", "0") or 0)
    except ValueError:
        return 0


def traced(pid: int) -> bool:
    """True when something traces ``pid`` right now (False when it is gone)."""
    try:
        return tracer_pid(pid) != 0
    except ProcessNotFound:
        return False


def state(pid: int) -> str:
    """The one-letter state (R, S, T, t, Z...), '' when the process is gone."""
    try:
        return status(pid).get("State", "")[:1]
    except ProcessNotFound:
        return ""


def is_running(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    return state(pid) not in ("", "Z", "X")


def ends_within(pid: int, timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for process ``pid`` to end (a zombie counts); True if it did."""
    deadline = time.monotonic() + timeout
    while is_running(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True


def start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (field 22 of stat), None when it is gone.

    With the PID it names one process for good: a reused PID has another start time.
    """
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
        return int(text.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


PF_KTHREAD = 0x00200000
"""A task's flag (field 9 of stat) for a kernel thread."""


def is_kernel_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[6]) & PF_KTHREAD != 0
    except (OSError, IndexError, ValueError):
        return False


def age_s(pid: int) -> float | None:
    """How long ago the process started (its fork: an exec keeps it), to the clock tick
    (10 ms); None when it is gone."""
    started = start_time(pid)
    try:
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return None if started is None else max(0.0, uptime - started / os.sysconf("SC_CLK_TCK"))


def comm(pid: int) -> str:
    """The process's short name, or 'unknown'."""
    try:
        return Path(f"/proc/{pid}/comm").read_text(errors="surrogateescape").strip()
    except OSError:
        return "unknown"


def tasks(pid: int) -> list[int]:
    """Thread ids of the process; ProcessNotFound when it is gone."""
    try:
        return [int(name) for name in os.listdir(f"/proc/{pid}/task")]
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessNotFound(f"no process with PID {pid}") from None


def thread_state(pid: int, tid: int) -> str:
    """The one-letter state of one thread (R, S, D, T, t, Z...), '' when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            text = f.read()
        return text.rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def blocked_signals(pid: int, tid: int) -> int | None:
    """One thread's blocked signals (its status's SigBlk: bit n-1 for signal n); None when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/status", "rb") as f:
            text = f.read(16 << 10)
        line = next(line for line in text.splitlines() if line.startswith(b"SigBlk:"))
        return int(line.split()[1], 16)
    except (OSError, StopIteration, IndexError, ValueError):
        return None


MAX_THREAD_FILES = 512
"""ThreadFiles keeps no more descriptors open than this."""


class ThreadFiles:
    """A thread's stat and schedstat, each opened once and read again at offset 0 (an open
    costs 20 us, a read 1-3 us: they are read at every single-step of a hit)."""

    def __init__(self, live: Callable[[], Collection[int]] = frozenset) -> None:
        """``live``: the threads still there (the others' files are closed when the cap is reached)."""
        self._fds: dict[tuple[int, str], int] = {}
        self._live = live

    def _read(self, pid: int, tid: int, name: str, size: int) -> bytes:
        fd = self._fds.get((tid, name))
        if fd is not None:
            return os.pread(fd, size, 0)
        if len(self._fds) >= MAX_THREAD_FILES:  # threads that ended keep theirs: closed now
            live = self._live()
            for gone in {t for t, _ in self._fds if t not in live}:
                self.forget(gone)
        path = f"/proc/{pid}/task/{tid}/{name}"
        if len(self._fds) >= MAX_THREAD_FILES:  # that many threads alive: this one read the slow way
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                return os.pread(fd, size, 0)
            finally:
                os.close(fd)
        fd = self._fds[(tid, name)] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        return os.pread(fd, size, 0)

    def state(self, pid: int, tid: int) -> str:
        """As thread_state."""
        try:
            return self._read(pid, tid, "stat", 1024).rsplit(b")", 1)[1].split()[0].decode()
        except (OSError, IndexError, UnicodeDecodeError):
            self.forget(tid)
            return ""

    def ran(self, pid: int, tid: int) -> bytes | None:
        """The thread's schedstat line (CPU time, wait, times switched in): another line later
        means it ran meanwhile; None when it is gone."""
        try:
            return self._read(pid, tid, "schedstat", 128)
        except OSError:
            self.forget(tid)
            return None

    def system_call(self, pid: int, tid: int) -> int | None:
        """The system call a thread blocked in the kernel is in (/proc/PID/task/TID/syscall's
        first field); None when it runs in user space, is gone, or it cannot be read."""
        try:
            first = self._read(pid, tid, "syscall", 256).split(b" ", 1)[0]
        except OSError:
            self.forget(tid)
            return None
        return int(first) if first.lstrip(b"-").isdigit() and not first.startswith(b"-") else None

    def forget(self, tid: int) -> None:
        for key in [key for key in self._fds if key[0] == tid]:
            os.close(self._fds.pop(key))

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def pending_signals(pid: int, tid: int) -> int:
    """The signals pending for one thread alone (SigPnd, a bit per signal: 1 << (signum - 1)),
    0 when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{tid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigPnd:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def is_thread_of(pid: int, tid: int) -> bool:
    """True when ``tid`` is a thread of process ``pid`` (not a process of its own)."""
    return os.path.exists(f"/proc/{pid}/task/{tid}")


def group_and_parent(tid: int) -> tuple[int, int]:
    """The process (thread group) task ``tid`` belongs to, and its parent process; (0, 0)
    when it is gone."""
    try:
        fields = status(tid)
        return int(fields.get("Tgid", "0")), int(fields.get("PPid", "0"))
    except (ProcessNotFound, ValueError, OSError):
        return 0, 0


def children(pid: int) -> list[int]:
    """Child processes of ``pid`` (of its main thread); empty when it is gone."""
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def exe_path(pid: int) -> str:
    """The program's path as the process sees it (/proc/PID/exe); ProcessNotFound when gone."""
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessNotFound(f"no process with PID {pid}") from None


def in_root(pid: int, path: str) -> str:
    """``path`` as seen from the process's root (works across mount namespaces)."""
    return f"/proc/{pid}/root{path}"


def file_systems(pid: int) -> set[str]:
    """The types of the file systems mounted where ``pid`` lives (/proc/PID/mountinfo)."""
    lines = _lines(pid, "mountinfo")
    return {line.split(" - ", 1)[1].split()[0] for line in lines if " - " in line}


def yama_scope() -> int | None:
    """kernel.yama.ptrace_scope, or None when the kernel has no Yama."""
    try:
        return int(YAMA.read_text())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/PID/maps."""

    start: int
    end: int
    perms: str
    """'r-xp' and the like."""
    offset: int
    """Offset in the mapped file."""
    inode: int
    path: str
    """The file, or '' / '[heap]' / '[vdso]' ..."""
    device: str = ""
    """The file's device as maps writes it (major:minor in hex, "fd:01")."""

    @property
    def executable(self) -> bool:
        return "x" in self.perms


def maps(pid: int) -> list[Mapping]:
    """The process's memory mappings; ProcessNotFound when it is gone."""
    lines = _lines(pid, "maps")
    found = []
    for line in lines:
        fields = line.split(maxsplit=5)
        if len(fields) < 5:
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        found.append(Mapping(start, end, fields[1], int(fields[2], 16), int(fields[4]),
                             fields[5].strip() if len(fields) > 5 else "", fields[3]))
    return found


def maps_text(pid: int) -> bytes | None:
    """/proc/PID/maps as it is now (to see whether it changed), None when the process is gone."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as f:
            return f.read()
    except OSError:
        return None
