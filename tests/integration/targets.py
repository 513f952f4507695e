"""Real target processes for the tests: start, wait for 'ready', watch, stop."""

from __future__ import annotations

import atexit
import csv
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "targets" / "bin"
_THROUGHPUT = re.compile(r"^(?:reads/s=(\d+) writes/s=\d+|requests/s=(\d+))$")


_LINKS = Path(os.environ.get("TMPDIR", "/tmp")) / f"sampler-tests-{os.getpid()}"
atexit.register(shutil.rmtree, _LINKS, True)  # the links, gone with the test session


def unique_name(prefix: str) -> str:
    """A process name (comm: 15 characters at most) no other process of the machine has: a test
    that finds its target by name must not match another test's, or another run's."""
    return f"{prefix[:6]}-{os.urandom(4).hex()}"


def named_link(program: str, name: str) -> Path:
    """A symbolic link NAME to ``program``: run through it, the process's name is NAME (the
    kernel names a process by the file it was started by; /proc/PID/exe is still the program)."""
    _LINKS.mkdir(exist_ok=True)
    link = _LINKS / name
    if not link.exists():
        link.symlink_to(program)
    return link


class Target:
    """A running target whose stdout is collected line by line in the background."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None,
                 preexec_fn: Callable[[], None] | None = None, stdin: bool = False) -> None:
        """``stdin``: a pipe to the target's stdin, for ``send`` (else it inherits the tests' own)."""
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if stdin else None,
                                     text=True, env={**os.environ, **(env or {})}, preexec_fn=preexec_fn)
        self.pid = self.proc.pid
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.wait_for(lambda: any(line.startswith("ready pid=") for line in self.lines), 10,
                      "the target never said ready")

    def send(self, line: str) -> None:
        """A line to the target's stdin (started with stdin=True)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} within {timeout}s; output: {self.lines[-5:]}")
            time.sleep(0.02)

    def throughput(self) -> list[int]:
        """reads/s of every throughput line so far."""
        return [int(m.group(1) or m.group(2)) for m in map(_THROUGHPUT.match, self.lines) if m]

    def more_throughput(self, lines: int = 2, timeout: float = 10) -> list[int]:
        """Wait for ``lines`` new throughput lines and return them."""
        seen = len(self.throughput())
        self.wait_for(lambda: len(self.throughput()) >= seen + lines, timeout,
                      f"the target printed no {lines} new throughput lines (is it stopped?)")
        return self.throughput()[seen:seen + lines]

    def status(self) -> dict[str, str]:
        with open(f"/proc/{self.pid}/status") as f:
            return dict(line.split(":\t", 1) for line in f.read().splitlines() if ":\t" in line)

    def assert_untouched(self) -> None:
        """Alive, not traced, no thread stopped, still running (its threads use the CPU: each target
        here does work steadily, a spinning reader or a request loop), never trapped; alive and
        untrapped again at the end. Read from /proc in tens of milliseconds: the throughput line it
        waited for before cost the suite up to a second a call (``assert_working`` still waits for it)."""
        self._assert_alive()
        status = self.status()
        assert status["TracerPid"].strip() == "0", "target is still traced"
        assert not status["State"].startswith(("T", "t")), f"target left stopped: {status['State']}"
        states = self.thread_states()
        assert not [tid for tid, state in states.items() if state in "Tt"], f"threads left stopped: {states}"
        before = self.cpu_ticks()
        self.wait_for(lambda: self.cpu_ticks() > before or self.proc.poll() is not None, 5,
                      "the target's threads ran no more (is one stuck?)")
        self._assert_alive()

    def _assert_alive(self) -> None:
        assert self.proc.poll() is None, f"target died: {self.lines[-5:]}"
        assert not any("SIGTRAP" in line or "trace trap" in line for line in self.lines), self.lines

    def assert_working(self) -> list[int]:
        """``assert_untouched``, and the throughput line (reads/s) printed after the call, > 0."""
        self.assert_untouched()
        after = self.more_throughput(1)
        assert min(after) > 0, f"target does no work any more: {after}"
        return after

    def thread_states(self) -> dict[int, str]:
        """Each thread's state letter (R, S, D, T, t...)."""
        states = {}
        for tid in os.listdir(f"/proc/{self.pid}/task"):
            stat = _proc_field(self.pid, f"task/{tid}/stat")
            if stat:
                states[int(tid)] = stat.rsplit(") ", 1)[1][:1]
        return states

    def cpu_ticks(self) -> int:
        """User and system time of the whole process so far (clock ticks, 10 ms); -1 once it is gone."""
        stat = _proc_field(self.pid, "stat")
        if ") " not in stat:
            return -1
        fields = stat.rsplit(") ", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        self._reader.join(10)
        if self.proc.stdout is not None and not self._reader.is_alive():
            self.proc.stdout.close()  # (a child that outlives it holds the pipe: closing it then would block)


def baseline(target: Target) -> float:
    return statistics.median(target.more_throughput(2))


def run_bench(script: str, results: Path) -> subprocess.CompletedProcess[str]:
    """Run a bench script's short form (--quick) with its results under ``results``; it must exit 0."""
    result = subprocess.run([sys.executable, f"bench/{script}", "--quick", "--results", str(results)],
                            cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return result


SAMPLER_ENV = {**os.environ, "PYTHONFAULTHANDLER": "1"}
"""sampler's processes print every thread's stack on SIGABRT: what ``finish`` shows of a hang."""


def sampler(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the real sampler CLI to completion."""
    proc = start_sampler(*args)
    stdout, stderr = finish(proc, timeout)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[str, str]:
    """stdout and stderr of a sampler that is ending. One still running after ``timeout`` is
    a hang: the test fails with where each of its processes waited (the kernel's wait channel,
    and the Python stack of the worker, which SIGABRT makes faulthandler print)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    tree = descendants(proc.pid)
    where = "\n".join(f"  {pid} {_proc_field(pid, 'comm')} state={_proc_field(pid, 'stat').split(') ')[-1][:1]} "
                      f"wchan={_proc_field(pid, 'wchan')}" for pid in [proc.pid, *tree])
    for pid in tree:
        if _proc_field(pid, "comm") == "sampler-worker":  # not the guardian (sampler-guard): it then
            os.kill(pid, signal.SIGABRT)  # leaves the target as sampler would
    try:
        _, stderr = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        for pid in [proc.pid, *tree]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, stderr = proc.communicate(timeout=30)
    raise AssertionError(f"sampler did not end within {timeout:g}s; its processes:\n{where}\n"
                         f"stderr (a stack dump at the end):\n{stderr[-6000:]}")


def stop_once(proc: subprocess.Popen[str], written: Callable[[], bool], timeout: float = 10) -> tuple[str, str]:
    """Once ``written()`` holds (the rows of what the target did are out; ``timeout`` at most) and a moment
    after (none more come), sampler's Ctrl-C; its stdout and stderr."""
    deadline = time.monotonic() + timeout
    while not written() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    return finish(proc)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now (children of any of its threads, theirs, ...)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = _proc_field(int(entry), "stat")
            if stat:
                children.setdefault(int(stat.rsplit(") ", 1)[1].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _proc_field(pid: int, name: str) -> str:
    try:
        with open(f"/proc/{pid}/{name}") as f:
            return f.read().strip()
    except OSError:
        return ""


def start_sampler(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "sampler", *args], cwd=ROOT, text=True, env=SAMPLER_ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def wait_for_rows(out: Path, proc: subprocess.Popen[str], rows: int, timeout: float = 60) -> None:
    """Wait until a running sampler has written more than ``rows`` rows (header included)."""
    deadline = time.monotonic() + timeout
    while not (out.exists() and len(out.read_text().splitlines()) > rows):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no samples came"
        time.sleep(0.05)


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def assert_csv_whole(path: Path) -> list[dict[str, str]]:
    """Every row has every column, and the file ends with a complete line."""
    text = path.read_text()
    assert text.endswith("\n"), "the CSV ends in the middle of a row"
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header = rows[0]
    assert header[:5] == ["seq", "time", "elapsed_s", "pid", "thread"]
    assert header[-4:] == ["pause_us", "wait_us", "late_us", "error"]
    for row in rows[1:]:
        assert len(row) == len(header), f"incomplete row {row}"
    return read_csv(path)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    """Assert the sampler failed the way a user error should, and return its message."""
    assert result.returncode not in (0, 70), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("sampler: "), lines
    return lines[0]


def have_delve() -> bool:
    return shutil.which("dlv") is not None and (BIN / "ringbuf-go").exists()


def unused_pid() -> int:
    with open("/proc/sys/kernel/pid_max") as f:
        pid = int(f.read()) - 1
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


class Seizer:
    """Another tracer holding the target (PTRACE_SEIZE stops nothing), as a child process."""

    CODE = (
        "import ctypes, sys, time\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]\n"
        "if libc.ptrace(0x4206, int(sys.argv[1]), None, None) != 0:\n"
        "    sys.exit('seize failed: %d' % ctypes.get_errno())\n"
        "print('seized', flush=True)\n"
        "time.sleep(600)\n"
    )

    def __init__(self, pid: int) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", self.CODE, str(pid)],
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "seized"

    def release(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # the kernel detaches a dead tracer's tracees
        self.proc.wait(10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def assert_text_matches_file(target: Target) -> None:
    """The target's executable code in memory, the program's and every library's, is byte
    for byte its file: no int3 left."""
    assert_code_matches_files(target.pid)


def code_differs(pid: int) -> bool:
    """True while the process's code differs from its files (a breakpoint is in)."""
    try:
        assert_code_matches_files(pid)
    except AssertionError:
        return True
    return False


def wait_until_patched(pid: int, timeout: float = 30) -> None:
    """Wait until a sampler has written its breakpoint into process ``pid``."""
    deadline = time.monotonic() + timeout
    while not code_differs(pid):
        assert time.monotonic() < deadline, f"no breakpoint in process {pid} within {timeout}s"
        time.sleep(0.02)


def symbol_address(pid: int, symbol: str) -> int:
    """The run-time address of SYMBOL of the process's own program (nm's value and where the file is
    mapped), found by the test, not by sampler."""
    exe = os.readlink(f"/proc/{pid}/exe")
    value = next(int(line.split()[0], 16) for line in subprocess.run(
        ["nm", exe], capture_output=True, text=True, check=True).stdout.splitlines()
        if line.split()[-1] == symbol and len(line.split()) == 3)
    base = next(int(line.split("-")[0], 16) for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
                if line.split()[-1] == exe and int(line.split()[2], 16) == 0)
    return base + value


def read_counter(target: Target, symbol: str) -> int:
    """The 64-bit global SYMBOL of the target's own program, read from the test (not by sampler):
    its progress without waiting for the thread that prints it."""
    with open(f"/proc/{target.pid}/mem", "rb") as mem:
        mem.seek(symbol_address(target.pid, symbol))
        return int.from_bytes(mem.read(8), "little")


def assert_code_matches_files(pid: int) -> None:
    exe = os.readlink(f"/proc/{pid}/exe")
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    files: dict[str, bytes] = {}
    checked = set()
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "r-xp" and fields[5].startswith("/") \
                    and not fields[5].startswith("/memfd:"):  # (sampler-stops: a filtering probe's private page)
                path = fields[5]
                if path not in files:
                    files[path] = Path(f"/proc/{pid}/root{path}").read_bytes()
                binary = files[path]
                start, end = (int(x, 16) for x in fields[0].split("-"))
                offset = int(fields[2], 16)
                mem.seek(start)
                assert mem.read(end - start) == binary[offset:offset + end - start], f"code of {path} differs from file"
                checked.add(path)
    assert exe in checked, "no code mapping of the program found"


def assert_signal_ends_cleanly(proc: subprocess.Popen[str], signum: int, out: Path, target: Target) -> None:
    """Signal a running sampler: exit 0, the CSV whole, the target running with its code intact."""
    proc.send_signal(signum)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    assert_csv_whole(out)
    target.assert_untouched()
    assert_text_matches_file(target)


def dlv_of(front: int) -> int:
    """The dlv that a running sampler (front process PID) drives, or 0."""
    from sampler.target import procfs

    for worker in procfs.children(front):
        for child in procfs.children(worker):
            if procfs.comm(child) == "dlv":
                return child
    return 0


def start_redis(start_target: Callable[..., Target], *options: str) -> tuple[Target, int]:
    """Debian's redis-server on a free port of 127.0.0.1, without persistence, answering PING
    (``options`` after sampler's own); a failure under CI when it is missing (make setup
    installs it), else a skip."""
    import socket

    import pytest

    if not shutil.which("redis-server"):
        if os.environ.get("CI"):
            pytest.fail("redis-server is missing: make setup installs it")
        pytest.skip("redis-server is missing (make setup installs it)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    target = start_target("sh", "-c", f"echo ready pid=$$; exec redis-server --port {port} --bind 127.0.0.1 "
                          f"--save '' --appendonly no {' '.join(options)}", binary=False)
    deadline = time.monotonic() + 20
    while redis_cli(port, "PING").strip() != "PONG":
        assert time.monotonic() < deadline, "redis-server did not answer"
        time.sleep(0.05)
    return target, port


def redis_cli(port: int, *command: str, stdin: str | None = None) -> str:
    """What redis-cli prints for ``command`` (or for the commands on ``stdin``, one connection)."""
    return subprocess.run(["redis-cli", "-p", str(port), *command], capture_output=True, text=True, input=stdin,
                          timeout=30).stdout
