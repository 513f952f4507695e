"""`sampler doctor`: what this host lets sampler do, on one screen, and `--version`'s text.

Each fact is looked up, not assumed: ptrace is tried on a child of sampler's own (seized and let
go), Yama's scope, sampler's capabilities and seccomp mode are read from /proc, and the container,
debuginfod and dlv are looked for where they live.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from sampler import __version__
from sampler.printable import printable
from sampler.target import procfs

PTRACE_SEIZE = 0x4206
PTRACE_DETACH = 17
CAP_SYS_PTRACE = 19
YAMA = {0: "any process of the same user (classic ptrace permissions)",
        1: "only descendants, unless sampler holds CAP_SYS_PTRACE (or the target allows it)",
        2: "only with CAP_SYS_PTRACE",
        3: "no process at all (only a reboot lowers it)"}
SECCOMP = {"0": "none", "1": "strict (only read, write, exit)", "2": "a filter"}


def version() -> str:
    """The version, and the commit when sampler runs from a git checkout."""
    commit = _commit()
    return f"sampler {__version__}" + (f" (commit {commit})" if commit else "")


def _commit() -> str:
    top = Path(__file__).resolve().parents[1]
    if not (top / ".git").exists() or shutil.which("git") is None:
        try:  # a wheel or the single file: the commit make dist was run at
            return (Path(__file__).parent / "_commit.txt").read_text().strip()[:40]
        except OSError:
            return ""
    try:
        found = subprocess.run(["git", "-C", str(top), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return found.stdout.strip() if found.returncode == 0 else ""


def report() -> str:
    """The lines `sampler doctor` prints."""
    status = procfs.status(os.getpid())
    caps = int(status.get("CapEff", "0"), 16)
    privileged = bool(caps >> CAP_SYS_PTRACE & 1)
    works, how = try_ptrace()
    scope = procfs.yama_scope()
    dlv = shutil.which("dlv")
    lines = [
        f"{version()}, Python {platform.python_version()}, Linux {platform.release()} ({platform.machine()})",
        f"ptrace:      {'works here' if works else 'does NOT work here'} ({how})",
        f"  as:        uid {os.getuid()}, "
        + ("with CAP_SYS_PTRACE: any process it can see" if privileged else
           "without CAP_SYS_PTRACE: processes of the same user only"),
        "  yama:      " + ("no Yama in this kernel" if scope is None else f"ptrace_scope {scope}: "
                           f"{YAMA.get(scope, 'unknown')}"),
        f"  seccomp:   {SECCOMP.get(status.get('Seccomp', '0'), 'unknown')}",
        f"container:   {container()}",
        f"debuginfod:  {debuginfod()}",
        f"dlv:         {dlv_version(dlv) if dlv else 'not on PATH (the delve backends need it; ptrace does not)'}",
        "backends:    " + "; ".join([
            f"ptrace {'yes' if works else 'no'} (any ELF program; zero-stop reads too)",
            f"delve {'yes' if works and dlv else 'no'} (Go, with DWARF)",
            f"delve-rpc {'yes' if works and dlv else 'no'}"]),
    ]
    return "\n".join(lines) + "\n"


def try_ptrace() -> tuple[bool, str]:
    """Seize a sleeping child of sampler's own and let it go: whether ptrace works at all here
    (a seccomp filter or a Yama scope of 3 refuses it), and how it went."""
    child = os.fork()
    if child == 0:  # the child waits to be killed
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            time.sleep(30)
        finally:
            os._exit(0)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    try:
        if libc.ptrace(PTRACE_SEIZE, child, None, None) != 0:
            return False, f"PTRACE_SEIZE of a child of sampler's own failed: {os.strerror(ctypes.get_errno())}"
        libc.ptrace(PTRACE_DETACH, child, None, None)
        return True, "a child of sampler's own was seized and let go"
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


def container() -> str:
    """Whether sampler runs in a container, and which kind, by the marks runtimes leave."""
    marks = []
    if os.path.exists("/.dockerenv"):
        marks.append("docker")
    if os.path.exists("/run/.containerenv"):
        marks.append("podman")
    try:
        cgroup = Path("/proc/self/cgroup").read_text()
    except OSError:
        cgroup = ""
    marks += [name for name in ("kubepods", "libpod", "docker", "containerd") if name in cgroup and name not in marks]
    init = printable(procfs.comm(1))
    if not marks:
        return f"none seen (PID 1 is {init or 'not visible'})"
    return (f"yes ({', '.join(marks)}; PID 1 is {init or 'not visible'}: only the processes of this PID namespace "
            "can be sampled; a node agent needs the host's, hostPID)")


def debuginfod() -> str:
    urls = os.environ.get("DEBUGINFOD_URLS", "").strip()
    library = ctypes.util.find_library("debuginfod")
    where = f"DEBUGINFOD_URLS={urls}" if urls else "DEBUGINFOD_URLS unset (no server is asked)"
    return f"{where}; client library {'found' if library else 'missing (apt-get install libdebuginfod1)'}"


def dlv_version(path: str) -> str:
    try:
        said = subprocess.run([path, "version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return f"{path} (its version could not be read)"
    line = next((line for line in said.splitlines() if line.startswith("Version:")), "")
    return f"{path} ({line.split(':', 1)[1].strip() if line else 'version unknown'})"


if __name__ == "__main__":
    sys.stdout.write(report())
