"""Every thread of a process as the kernel shows it, read from /proc without stopping anything:
its name, state, the system call it is in (named, with its arguments), its wait channel and,
where the host lets root read it, its kernel stack (`sampler stack`, issue 35).

What a thread shows here is the target's to choose (its name) or a moment's (a running thread's
state changes as it is read): each field is read once and bounded, and a thread that ends while
it is read is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

from sampler.target import procfs, syscalls

MAX_KERNEL_FRAMES = 64
"""Lines of /proc/PID/task/TID/stack kept (the kernel writes at most 64)."""


@dataclass(frozen=True)
class SystemCall:
    number: int | None
    """None: the thread runs in user space, or is blocked outside a system call (a page fault)."""
    arguments: tuple[int, ...] = ()
    running: bool = False

    def __str__(self) -> str:
        if self.running:
            return "running"
        if self.number is None:
            return "not in a system call"
        name = syscalls.name(self.number)
        if name in syscalls.FD_FIRST and self.arguments:
            return f"{name}(fd {self.arguments[0]})"
        return f"{name}({', '.join(f'{a:#x}' for a in self.arguments[:3])}{', ...' if len(self.arguments) > 3 else ''})"

    @property
    def name(self) -> str | None:
        return syscalls.name(self.number) if self.number is not None else None


@dataclass(frozen=True)
class Thread:
    tid: int
    name: str
    state: str
    """R, S, D, T, t, Z..."""
    syscall: SystemCall | None
    """None: not readable (permission)."""
    wchan: str
    """Where the kernel waits for it ('' when it runs)."""
    kernel: tuple[str, ...] | None
    """Its kernel stack, innermost first; None: the host does not let it be read."""


def parse_syscall(text: str) -> SystemCall | None:
    """/proc/PID/task/TID/syscall: 'running', '-1 SP PC' (blocked, not in a call), or
    'NR ARG1 ... ARG6 SP PC'; None for anything else."""
    fields = text.split()
    if fields == ["running"]:
        return SystemCall(None, running=True)
    try:
        values = [int(field, 0) for field in fields]
    except ValueError:
        return None
    if not values:
        return None
    if values[0] == -1:
        return SystemCall(None)
    if values[0] < 0 or len(values) < 7:
        return None
    return SystemCall(values[0], tuple(values[1:7]))


def threads_of(pid: int) -> list[Thread]:
    """Every thread of ``pid`` now, in tid order; ProcessNotFound when it is gone."""
    found = []
    for tid in sorted(procfs.tasks(pid)):
        thread = thread_of(pid, tid)
        if thread is not None:
            found.append(thread)
    return found


def thread_of(pid: int, tid: int, kernel: bool = True) -> Thread | None:
    """One thread of ``pid`` now; None when it ended. ``kernel``: its wait channel and kernel stack
    too (a profile, which reads its threads a hundred times a second, leaves them out)."""
    where = f"/proc/{pid}/task/{tid}"
    state = procfs.thread_state(pid, tid)
    if not state:
        return None
    wchan = _read(f"{where}/wchan") if kernel else None
    return Thread(tid, _read(f"{where}/comm") or "", state, _syscall(f"{where}/syscall"),
                  "" if wchan in (None, "0") else wchan, _kernel(f"{where}/stack") if kernel else ())


def _read(path: str, limit: int = 4096) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode(errors="surrogateescape").strip()
    except OSError:
        return None


def _syscall(path: str) -> SystemCall | None:
    text = _read(path)
    return parse_syscall(text) if text is not None else None


def _kernel(path: str) -> tuple[str, ...] | None:
    text = _read(path, 16384)
    if text is None:
        return None
    return tuple(line.split("] ", 1)[-1] for line in text.splitlines()[:MAX_KERNEL_FRAMES])
