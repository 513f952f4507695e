"""--pgrep PATTERN: the target by its name or command line, where its PID is not known in
advance (in a container, a pod: every one has other PIDs)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sampler.errors import ProcessNotFound, UsageError
from sampler.target import procfs

SHOWN = 5
"""Matches listed in the error when there are several."""


def find(pattern: str | None, container: str | None = None) -> int:
    """The one process whose name (comm), else whose command line, matches ``pattern`` (a
    regular expression, searched); sampler itself and its ancestors never match. With
    ``container`` (a container runtime's ID, or its first 12 characters or more), only that
    container's processes count, by their cgroup; without a pattern, its first process."""
    matched = _matches(pattern, container)
    if pattern is None:
        return min(matched, key=lambda p: (procfs.start_time(p[0]) or 0, p[0]))[0]
    if len(matched) > 1:
        listed = "; ".join(f"{pid} {name} ({line[:60]})" for pid, name, line in matched[:SHOWN])
        more = f" and {len(matched) - SHOWN} more" if len(matched) > SHOWN else ""
        raise UsageError(f"--pgrep {pattern!r} matches {len(matched)} processes: {listed}{more}",
                         "make the pattern match one (e.g. '^name$'), give --pid, or add --all to sample them all")
    return matched[0][0]


def find_all(pattern: str | None, container: str | None = None) -> list[int]:
    """Every process ``find`` would choose among (--all): by name, else by command line, in
    ``container`` when given (without a pattern, all of its processes)."""
    return sorted(pid for pid, _, _ in _matches(pattern, container))


def running(path: str, judged: set[int] | None = None, users: tuple[int, ...] = (),
            among: list[int] | None = None) -> list[int]:
    """Every process whose program is the file ``path`` (the same file: device and inode, so a
    process in a container that maps it by another path counts); sampler, its ancestors and its
    own children (the guardian) excepted; with ``users``, only those whose real user ID is one of them.
    ``judged``: PIDs looked at before, not looked at again (kept to those still there, and
    added to: a scan every tick costs a listing of /proc and a stat of each new process).
    ``among``: only these PIDs are looked at (processes that just exec'd), judged or not."""
    try:
        wanted = os.stat(path)
    except OSError as e:
        raise UsageError(f"--exe {path}: {e.strerror}", "give the path of a program file") from None
    own = _own_line()
    found = []
    pids = _pids() if among is None else among
    if judged is not None and among is None:
        judged &= set(pids)
    for pid in pids:
        if pid in own or (judged is not None and pid in judged and among is None):
            continue
        if judged is not None:
            judged.add(pid)
        try:
            exe = os.stat(f"/proc/{pid}/exe")
        except OSError:
            continue  # a kernel thread, gone, or not ours to see
        same = (exe.st_dev, exe.st_ino) == (wanted.st_dev, wanted.st_ino)
        if same and _parent(pid) != os.getpid() and (not users or _real_uid(pid) in users):
            found.append(pid)
    return found


def _real_uid(pid: int) -> int | None:
    try:
        return int(procfs.status(pid)["Uid"].split()[0])
    except (ProcessNotFound, KeyError, ValueError, IndexError):
        return None


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def _matches(pattern: str | None, container: str | None) -> list[tuple[int, str, str]]:
    try:
        wanted = re.compile(pattern or "")
    except re.error as e:
        raise UsageError(f"--pgrep {pattern!r} is not a regular expression ({e})",
                         "e.g. --pgrep ringbuf or --pgrep '^myserver$'") from None
    own = _own_line()
    processes = [(pid, procfs.comm(pid), _command_line(pid)) for pid in _pids() if pid not in own]
    processes = [p for p in processes if p[2]]  # kernel threads have no command line
    if container is not None:
        wanted_id = container.split("://", 1)[-1].lower()  # (containerd://ID as kubectl shows it)
        if len(wanted_id) < 12:
            raise UsageError(f"--container {container!r} is too short to name one container",
                             "give at least its first 12 characters")
        processes = [p for p in processes if (container_of(_cgroup(p[0])) or "").startswith(wanted_id)]
        if not processes:
            raise ProcessNotFound(f"--container {container}: no process of this machine is in that container",
                                  "check the ID (kubectl get pod -o jsonpath='{..containerID}') and the node")
        if pattern is None:
            return processes
    matched = [p for p in processes if wanted.search(p[1])] or [p for p in processes if wanted.search(p[2])]
    if not matched:
        inside = f" in container {container}" if container else ""
        raise ProcessNotFound(f"--pgrep {pattern!r}: no process{inside} has a name or command line that matches",
                              "check the name with ps -e, or give --pid")
    return matched


_CONTAINER = re.compile(r"^(?:(?:docker|libpod|cri-containerd|crio|containerd|cri-o)-)?([0-9a-f]{64})(?:\.scope)?$")


def container_of(cgroup: str) -> str | None:
    """The container ID of a process, from its /proc/PID/cgroup: the first path component, from the
    root, that is a container's (``docker-ID.scope``, ``cri-containerd-ID.scope``, ``libpod-ID.scope``,
    cgroupfs' bare ``ID``). Not any text of the file: a container given a cgroup subtree of its own can
    name a child after another container's ID, below its own, and must not join a run aimed there; and a
    user's own subtree (``user.slice``, ``user@UID.service``: systemd delegates it, a rootless runtime's
    containers live there) is no container of a runtime's, nor a cgroup v2 directory that is not root's."""
    for line in cgroup.splitlines():
        hierarchy, _, path = line.partition(":")[2].partition(":")
        components = path.split("/")
        for at, component in enumerate(components):
            if component == "user.slice" or component.startswith("user@"):
                break  # (a user's own subtree, systemd's delegation: whatever it is named, no runtime's)
            found = _CONTAINER.match(component)
            if found:
                if hierarchy == "" and not _roots("/".join(components[:at + 1])):
                    break
                return found.group(1)
    return None


def _roots(path: str) -> bool:
    """Whether the cgroup v2 directory ``path`` is root's (a container runtime's), where this host's
    /sys/fs/cgroup shows it; True where it cannot be seen (another cgroup namespace)."""
    try:
        return os.stat(f"/sys/fs/cgroup{path}", follow_symlinks=False).st_uid == 0
    except OSError:
        return True


def _cgroup(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cgroup").read_text(errors="surrogateescape")
    except OSError:
        return ""


def _pids() -> list[int]:
    return sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="surrogateescape").strip()
    except OSError:
        return ""


def _own_line() -> set[int]:
    """sampler and every process above it (the shell that started it has the pattern in
    its command line too)."""
    found, pid = set(), os.getpid()
    while pid > 1 and pid not in found:
        found.add(pid)
        pid = _parent(pid)
    return found
