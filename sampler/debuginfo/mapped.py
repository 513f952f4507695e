"""The file behind a mapping of a process: the very file, not whatever its path names now."""

from __future__ import annotations

import os

from sampler.target import procfs


def build_id_of(pid: int, mapping: procfs.Mapping) -> str | None:
    """The build-id (hex; '' when it has none) of the file mapped at ``mapping``, or None when
    that very file cannot be opened: through /proc/PID/map_files (root), else by its path in
    the process's root, taken only when it is the mapping's device and inode."""
    from sampler.debuginfo.elffile import BadFile, ElfFile  # (not at import: the guardian imports this module)

    paths = [f"/proc/{pid}/map_files/{mapping.start:x}-{mapping.end:x}"]
    if mapping.path.startswith("/"):
        paths.append(procfs.in_root(pid, mapping.path))
    for path in paths:
        try:
            elf = ElfFile(path)
        except BadFile:
            continue
        with elf:
            try:
                info = os.fstat(elf.fileno())
            except OSError:
                continue
            if (device_of(info.st_dev), info.st_ino) != (mapping.device, mapping.inode):
                continue
            return (elf.build_id or b"").hex()
    return None


def device_of(dev: int) -> str:
    """A device number as /proc/PID/maps writes it."""
    return f"{os.major(dev):02x}:{os.minor(dev):02x}"
