"""What every bench shares: the targets and how to start them, read their throughput, check that
they are unharmed (running, untraced, code equal to the file), check a CSV, find sampler's
processes, and load the machine.

Used by overhead.py, faults.py, soak.py, guardian.py, attach.py and limit.py.
"""

from __future__ import annotations

import csv
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from sampler.target import procfs  # noqa: E402 (the tree's own sampler, also without an installed one)

BIN = ROOT / "targets" / "bin"
COMMIT = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=ROOT, capture_output=True,
                        text=True).stdout.strip()
THROUGHPUT = re.compile(r"^reads/s=(\d+) writes/s=(\d+)$")
CHILD_DIED = re.compile(r"^child \d+ (signal|status) \d+ forked ")
"""A child of the forker that died or failed."""
SAMPLER = [sys.executable, "-m", "sampler"]


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    binary: str
    hot: str
    """Called millions of times a second: a breakpoint there is hit at once."""
    rare: str
    """Called once a second: a breakpoint there sits armed most of each tick."""
    at_expr: str
    """A field at the hot location."""
    delta: str
    """w - r at the hot location."""
    global_expr: str
    """w - r from globals only (zero-stop)."""
    args: tuple[str, ...] = ()
    """The target's arguments; ``{exit}`` stands for the seconds after which it exits (0: never)."""

    def argv(self, exit_after: int = 0) -> list[str]:
        """Its arguments, exiting (status 0) after ``exit_after`` seconds when that is not 0."""
        if self.args:
            return [a.replace("{exit}", str(exit_after or 10 ** 6)) for a in self.args]
        return ["--exit-after", str(exit_after)] if exit_after else []


TARGETS = {
    "go": Target("go", "Go", "ringbuf-go", "main.(*Ring).Read", "main.Tick", "b.w", "b.w - b.r",
                 "main.ring.w - main.ring.r"),
    "c": Target("c", "C -O2", "ringbuf-c", "ring_read", "tick", "b->w", "b->w - b->r", "ring->w - ring->r"),
}
FORKER = Target("forks", "C forking", "forker", "work", "tick", "calls", "calls", "calls",
                args=("mixed", "10", "{exit}"))
"""For the fault suite and the soak (not the throughput benches): a program that forks, vforks and
execs a child every 10 ms, the forked ones calling ``work`` (the hot breakpoint): a child that dies
of an int3 copied from its parent counts as the target harmed."""


class RunningTarget:
    """A target started from targets/bin (or a path), its output lines timestamped as they come."""

    def __init__(self, binary: str | Path, *args: str) -> None:
        self.proc = subprocess.Popen([str(BIN / binary), *args], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.pid = self.proc.pid
        self.lines: list[tuple[float, str]] = []
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready.startswith("ready pid="):
            raise SystemExit(f"bench: {binary} did not start: {ready!r}")
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def throughput(self, start: float, end: float) -> list[int]:
        """reads/s of the lines whose whole second lies in [start, end]."""
        found = []
        for t, line in list(self.lines):
            match = THROUGHPUT.match(line)
            if match and start + 1.0 <= t <= end:
                found.append(int(match.group(1)))
        return found

    def trapped(self, children: bool = True) -> bool:
        """It, or (``children``) a child of its, died of a trap (the forker prints "child PID signal S")."""
        return any("SIGTRAP" in line or "Trace/breakpoint trap" in line or (children and CHILD_DIED.match(line))
                   for _, line in self.lines)

    def healthy(self, since: float, children_died: bool = True) -> bool:
        """Alive, running, untraced, never trapped, printed throughput since ``since``
        (``children_died`` False: a child's death does not count)."""
        state = procfs.state(self.pid)
        return (self.proc.poll() is None and not self.trapped(children_died) and state not in ("", "T", "t", "Z")
                and not procfs.traced(self.pid)
                and any(t > since and line.startswith(("reads/s=", "requests/s=")) for t, line in list(self.lines)))

    def stop(self) -> None:
        kill_debuggers_of(self.pid)
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGCONT)
            self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def code_intact(pid: int) -> bool:
    """The executable mappings of the program in memory equal its file, byte for byte."""
    try:
        exe = procfs.exe_path(pid)
        binary = Path(f"/proc/{pid}/exe").read_bytes()
        with open(f"/proc/{pid}/mem", "rb") as mem:
            for mapping in procfs.maps(pid):
                if mapping.executable and mapping.path == exe:
                    mem.seek(mapping.start)
                    size = mapping.end - mapping.start
                    if mem.read(size) != binary[mapping.offset:mapping.offset + size]:
                        return False
    except (OSError, procfs.ProcessNotFound):
        return False
    return True


def csv_whole(path: Path) -> tuple[bool, int]:
    """(it parses, every row has the header's fields and seq rises, rows)."""
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
    except (OSError, csv.Error, UnicodeDecodeError):
        return False, 0
    if not rows or rows[0][:1] != ["seq"]:
        return False, 0
    body = rows[1:]
    whole = all(len(row) == len(rows[0]) for row in body)
    try:
        seqs = [int(row[0]) for row in body]
    except ValueError:
        return False, len(body)
    return whole and seqs == sorted(set(seqs)), len(body)


def worker_of(front: int) -> int | None:
    """The forked worker of sampler's front process (the one that traces)."""
    for child in procfs.children(front):
        try:
            if "sampler" in Path(f"/proc/{child}/cmdline").read_text():
                return child
        except OSError:
            pass
    return None


def kill_tree(pid: int) -> None:
    for child in procfs.children(pid):
        kill_tree(child)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_debuggers_of(pid: int) -> None:
    """A dlv left holding the target (a failed rescue) goes with it."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if command[0].endswith(b"dlv") and str(pid).encode() in command:
                try:
                    os.kill(int(entry.name), signal.SIGKILL)
                except ProcessLookupError:
                    pass


@contextmanager
def cpu_hog(processes: int = 0) -> Iterator[None]:
    """Load the machine: one busy process per core (or ``processes``), ended on the way out."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(processes or os.cpu_count() or 2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def rss_kb(pid: int) -> int:
    """Resident memory of a process in kB (0 when gone)."""
    try:
        return int(procfs.status(pid).get("VmRSS", "0 kB").split()[0])
    except procfs.ProcessNotFound:
        return 0


def write_results(folder: Path, name: str, rows: list[dict[str, object]], report: str) -> None:
    """A bench's rows as FOLDER/NAME.csv and its report as FOLDER/NAME-in-capitals.md."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{name}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (folder / f"{name.upper()}.md").write_text(report)
