"""Where a module's debug information lives, in gdb's order.

1. the file's own DWARF;
2. a separate file by build-id: ``DIR/.build-id/ab/cdef....debug`` under each debug directory;
3. the file named by ``.gnu_debuglink``, its CRC checked: next to the file, in ``.debug/``
   beside it, and under ``DIR/<the file's directory>``;
4. debuginfod, when ``DEBUGINFOD_URLS`` is set (only for the modules whose DWARF is needed).

Files of the target are read through /proc/PID/root, so a target in a container is
looked up in its own file system; ``--debug-dir`` folders are the user's, on this host,
and the default /usr/lib/debug is looked up in the target's root, then on this host.
"""

from __future__ import annotations

import errno
import os
import posixpath
from collections.abc import Callable
from dataclasses import dataclass

from sampler.debuginfo import debuginfod
from sampler.debuginfo.elffile import BadFile, ElfFile, crc32
from sampler.errors import UsageError
from sampler.target import files

DEFAULT_DIRS = ("/usr/lib/debug",)


@dataclass
class Source:
    file: ElfFile
    """The file with the DWARF (may be the module's own file)."""
    how: str
    """Where it came from, for the user."""


class DebugFinder:
    def __init__(self, pid: int, debug_dirs: tuple[str, ...], say: Callable[[str], None],
                 warn: Callable[[str], None]) -> None:
        self.root = f"/proc/{pid}/root"
        self.say = say
        """Tells the user something (a no-op under --quiet)."""
        self.warn = warn
        """Tells the user something that changes the result, even under --quiet. Files that
        were not used are not said at once: they go into the ``notes`` of the lookup, and
        into the one error line when the missing debug info makes one."""
        self.dirs: list[str] = list(debug_dirs)
        """Folders to look in, as paths sampler can open."""
        same_root = _same_file(self.root, "/")
        for default in DEFAULT_DIRS:
            self.dirs.append(self.root + default)
            if not same_root:
                self.dirs.append(default)

    def move_to(self, pid: int) -> None:
        """Look in process ``pid``'s file system from now on (modules.Modules.move_to)."""
        old, self.root = self.root, f"/proc/{pid}/root"
        self.dirs = [self.root + folder[len(old):] if folder.startswith(old + "/") else folder
                     for folder in self.dirs]

    def local(self, module: ElfFile, path_in_target: str, notes: list[str]) -> Source | None:
        """Steps 1-3: the module's DWARF from files on disk, or None."""
        if module.has_dwarf:
            return Source(module, "in the file itself")
        build_id = module.build_id
        if build_id is not None and len(build_id) >= 2:
            hexed = build_id.hex()
            for folder in self.dirs:
                candidate = f"{folder}/.build-id/{hexed[:2]}/{hexed[2:]}.debug"
                found = self._open(candidate, notes, build_id)
                if found is not None:
                    return Source(found, f"from {_shown(candidate, self.root)} (by build-id)")
        try:
            link = module.debuglink()
        except BadFile:
            link = None
        if link is not None:
            file_name, crc = link
            directory = posixpath.dirname(path_in_target)
            candidates = [f"{self.root}{directory}/{file_name}", f"{self.root}{directory}/.debug/{file_name}"]
            candidates += [f"{folder}{directory}/{file_name}" for folder in self.dirs]
            for candidate in candidates:
                if not files.is_file(candidate) or _same_file(candidate, module.path):
                    continue
                try:
                    matches = crc32(candidate) == crc
                except OSError as e:
                    notes.append(f"ignored {_shown(candidate, self.root)}: {e.strerror or e}")
                    continue
                if not matches:
                    notes.append(f"ignored {_shown(candidate, self.root)}: its CRC does not match "
                                 ".gnu_debuglink (a different build)")
                    continue
                found = self._open(candidate, notes, None)
                if found is not None:
                    return Source(found, f"from {_shown(candidate, self.root)} (by .gnu_debuglink)")
        return None

    def remote(self, module: ElfFile, name: str, notes: list[str]) -> Source | None:
        """Step 4: debuginfod, when DEBUGINFOD_URLS is set and the module has a build-id."""
        if not debuginfod.enabled() or module.build_id is None:
            return None
        try:
            path = debuginfod.fetch_debuginfo(module.build_id, self.say, name)
        except debuginfod.DebuginfodError as e:
            notes.append(f"debuginfod failed: {e}")
            return None
        if path is None:
            notes.append(f"debuginfod has no file for build-id {module.build_id.hex()}")
            return None
        found = self._open(path, notes, module.build_id)
        return None if found is None else Source(found, f"from {path} (debuginfod)")

    def symbols_file(self, path: str, program: ElfFile) -> Source:
        """--symbols FILE: an unstripped copy of the executable, checked against it."""
        try:
            copy = ElfFile(path)
        except BadFile as e:
            raise UsageError(f"--symbols {path}: not a readable ELF file ({e})",
                             "give an unstripped copy of the program") from None
        wanted, got = program.build_id, copy.build_id
        if wanted is not None and got is not None:
            same = wanted == got
            detail = f"its build-id is {got.hex()}, the program's is {wanted.hex()}"
        else:
            try:
                same = copy.text_section() == program.text_section() is not None
            except BadFile:
                same = False
            detail = "it has no build-id to compare and its .text differs from the program's"
        if not same:
            copy.close()
            raise UsageError(f"--symbols {path} is not a build of the running program ({detail})",
                             "give the unstripped file of the very build that runs")
        if not copy.has_dwarf and not copy.symbols():
            copy.close()
            raise UsageError(f"--symbols {path} has neither symbols nor DWARF",
                             "give the unstripped file of the build that runs")
        return Source(copy, f"from {path} (--symbols)")

    def _open(self, path: str, notes: list[str], build_id: bytes | None) -> ElfFile | None:
        try:
            found = ElfFile(path)  # resolved inside the target's root (target/files.py)
        except BadFile as e:
            if str(e) in _ABSENT:
                return None
            notes.append(f"ignored {_shown(path, self.root)}: not a readable ELF file ({e})")
            return None
        if build_id is not None and found.build_id not in (None, build_id):
            notes.append(f"ignored {_shown(path, self.root)}: its build-id does not match")
        elif not found.has_dwarf:
            notes.append(f"ignored {_shown(path, self.root)}: it has no DWARF")
        else:
            return found
        found.close()
        return None


_ABSENT = (os.strerror(errno.ENOENT), os.strerror(errno.ENOTDIR))
"""What ElfFile says of a path with nothing there: not worth a note."""


def _same_file(a: str, b: str) -> bool:
    try:
        first, second = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _shown(path: str, root: str) -> str:
    """A path as the user knows it: without the /proc/PID/root prefix when it is "/"."""
    if path.startswith(root + "/") and _same_file(root, "/"):
        return path[len(root):]
    return path
