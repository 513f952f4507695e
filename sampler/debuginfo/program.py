"""Whether a process can be sampled and what its program is (ELF, Go, DWARF), read before
anything touches it: /proc through target.procfs, the program through the guarded ELF reader."""

from __future__ import annotations

import os

from sampler.debuginfo.elffile import BadFile, ElfFile
from sampler.errors import ProcessNotFound, UnsupportedTarget
from sampler.target import permission, procfs
from sampler.target.process import TargetProcess


def inspect(pid: int) -> TargetProcess:
    """Check that ``pid`` can be sampled; raise a SamplerError that says why not."""
    if pid <= 0:
        raise ProcessNotFound(f"no process with PID {pid}")
    if pid in (os.getpid(), os.getppid()):
        raise UnsupportedTarget(f"PID {pid} is sampler itself or its parent",
                                "sample another process")
    fields = procfs.status(pid)
    if fields.get("State", "").startswith(("Z", "X")):
        raise ProcessNotFound(f"process {pid} has exited (it is a zombie)")
    if procfs.tracer_in(fields):
        raise permission.denied(pid, "trace")  # names the tracer
    exe = f"/proc/{pid}/exe"
    try:
        path = os.readlink(exe)
        os.close(os.open(exe, os.O_RDONLY))  # the reason it cannot be read, before the ELF reader
    except PermissionError:
        raise permission.denied(pid, "read the program of") from None
    except (FileNotFoundError, ProcessLookupError):
        if procfs.is_kernel_thread(pid):
            raise UnsupportedTarget(f"PID {pid} ({procfs.comm(pid)}) is a kernel thread: it runs no program to "
                                    "sample", "give the PID of a user-space process") from None
        raise ProcessNotFound(f"no process with PID {pid}") from None
    try:
        elf = ElfFile(exe, shown_as=path)  # the guarded reader: a hostile file raises BadFile only
        try:
            names = elf.section_names()
        finally:
            elf.close()
    except BadFile as e:
        if not procfs.is_running(pid):
            raise ProcessNotFound(f"no process with PID {pid}") from None
        raise UnsupportedTarget(f"process {pid} runs a program sampler does not read as ELF ({e})") from None
    return TargetProcess(
        pid=pid,
        exe=path,
        is_go=bool(names & {".gopclntab", ".go.buildinfo", ".data.rel.ro.gopclntab"}),
        has_debug_info=bool(names & {".debug_info", ".zdebug_info"}),
    )

