"""The one way sampler writes a file it makes (a row file, a flame graph, a folded profile, speedscope
JSON, a plot): sampler often runs as root, and a folder it writes into may be another user's, or a
sticky one where another user planted a name. So:

- the folder is opened once (O_DIRECTORY, O_NOFOLLOW; through a link only when the link is root's or
  sampler's user's own), and every name is made in it by descriptor, never by path again;
- a whole file (``write_file``) goes into a new temporary file of its own (O_CREAT|O_EXCL|O_NOFOLLOW,
  the umask's mode), then is renamed over the name: a link planted at the name is replaced, never
  followed; a file of another user there is refused (a sticky folder's kernel refuses it too);
- the row files keep one file open (csv.OutFile) with the same folder and the same refusals, and a
  debugging log is appended to the same way (``open_append``).

Links are written through only where they are the point: /dev/stdout, /dev/stderr, /dev/fd/N and
/proc/self/fd/N; a character device (/dev/null) is written in place.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat

from sampler.errors import OutputError
from sampler.printable import printable


def link_ok(path: str) -> bool:
    """A path that is a link by design: written through, as given."""
    return path in ("/dev/stdout", "/dev/stderr") or re.fullmatch(r"/dev/fd/\d+|/proc/self/fd/\d+", path) is not None


WHOLE_HINT = "choose a path in a writable directory"
"""What to do when a whole file cannot be written (the row files' own hint also offers --out -)."""


def open_folder(path: str, option: str = "--out", hint: str | None = None) -> int:
    """The folder of ``path``, opened once (O_DIRECTORY): a file made again later (the old one was
    removed) is made in this folder, whatever is at its path by then (another user swapping a
    folder of a world-writable one for a link to a root-only one). The folder itself through a
    link only when the link is root's or sampler's user's own."""
    folder = os.path.dirname(path) or "."
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    shown = printable(path)
    try:
        return os.open(folder, flags | os.O_NOFOLLOW)
    except OSError as e:
        if e.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise OutputError(f"cannot write {option} {shown}: {printable(folder)}: {e.strerror}", hint) from None
    try:
        owner = os.lstat(folder).st_uid
        if owner not in (0, os.geteuid()):
            raise OutputError(f"{option} {shown}: its folder {printable(folder)} is a symbolic link of uid {owner}: "
                              "sampler does not write through another user's link", "give the folder's own path")
        return os.open(folder, flags)
    except OSError as e:
        raise OutputError(f"cannot write {option} {shown}: {printable(folder)}: {e.strerror}", hint) from None


def check_file(path: str, option: str = "--out") -> None:
    """Refuse now, before any work, what ``write_file`` would refuse at the end (a missing folder, a
    folder by that name, a link at the name, another user's file, a folder sampler cannot write)."""
    if link_ok(path):
        return
    folder = open_folder(path, option, WHOLE_HINT)
    try:
        _refuse_existing(folder, os.path.basename(path), path, option)
        if not os.access(f"/proc/self/fd/{folder}", os.W_OK | os.X_OK):
            raise OutputError(f"cannot write {option} {printable(path)}: its folder is not writable", WHOLE_HINT)
    finally:
        os.close(folder)


def write_file(path: str, data: bytes, option: str = "--out", checked: bool = False) -> str:
    """``data`` as the whole file at ``path``: made as a new temporary file in the folder (never
    through a link, never into a file someone else made) and renamed over the name at once. A
    link or another's file at the name is refused; ``checked``: the name was checked free or the
    user's own before a long run (check_file), so what is there now was planted meanwhile: it is
    replaced, never followed or written into, and the line returned says so ('' otherwise)."""
    if link_ok(path):
        _write_through(path, data, option)
        return ""
    folder = open_folder(path, option, WHOLE_HINT)
    name = os.path.basename(path)
    said = ""
    try:
        try:
            existing = _refuse_existing(folder, name, path, option)
        except OutputError:
            if not checked:
                raise
            existing = None
            said = (f"{option} {printable(path)}: a link or another user's file appeared at its name during the "
                    "run: replaced by the file, not followed")
        if existing is not None and stat.S_ISCHR(existing.st_mode):  # /dev/null and its kind: in place
            _write_through(name, data, option, folder)
            return ""
        temporary = b"." + os.fsencode(name)[:200] + f".{os.urandom(6).hex()}.tmp".encode()  # (a name's bytes)
        try:
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666,
                         dir_fd=folder)
        except OSError as e:
            raise OutputError(f"cannot write {option} {printable(path)}: {e.strerror}", WHOLE_HINT) from None
        try:
            try:
                _write_all(fd, data)
            finally:
                os.close(fd)
            os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as e:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=folder)
            if e.errno == errno.EPERM:  # a sticky folder: the name is another user's
                raise OutputError(f"{option} {printable(path)} was made by another user: sampler does not replace "
                                  "another's file", "remove it, or give a path of your own") from None
            raise OutputError(f"cannot write {option} {printable(path)}: {e.strerror}", WHOLE_HINT) from None
    finally:
        os.close(folder)
    return said


def open_append(path: str, option: str) -> int:
    """A log file to append to (a debugging transcript named by an environment variable): made in its
    folder by descriptor, never through a link, never another user's file."""
    folder = open_folder(path, option, WHOLE_HINT)
    try:
        _refuse_existing(folder, os.path.basename(path), path, option)
        try:
            fd = os.open(os.path.basename(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o600, dir_fd=folder)
        except OSError as e:
            raise OutputError(f"cannot write {option} {printable(path)}: {e.strerror}") from None
        if os.fstat(fd).st_uid != os.geteuid():  # (made by another between the check and the open)
            os.close(fd)
            raise OutputError(f"{option} {printable(path)} was made by another user just now")
        return fd
    finally:
        os.close(folder)


def _refuse_existing(folder: int, name: str, path: str, option: str) -> os.stat_result | None:
    """What is at ``name`` now (None: nothing), refused when sampler would not write there."""
    try:
        info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise OutputError(f"cannot write {option} {printable(path)}: {e.strerror}") from None
    if stat.S_ISLNK(info.st_mode):
        raise OutputError(f"{option} {printable(path)} is a symbolic link: sampler does not write through one",
                          "give the path of the file itself")
    if stat.S_ISDIR(info.st_mode):
        raise OutputError(f"cannot write {option} {printable(path)}: it is a folder")
    if not stat.S_ISCHR(info.st_mode) and info.st_uid != os.geteuid():
        raise OutputError(f"{option} {printable(path)} belongs to uid {info.st_uid}, not to sampler's user "
                          f"(uid {os.geteuid()}): sampler does not write into another's file",
                          "remove it, or give a path of your own")
    return info


def _write_through(name: str, data: bytes, option: str, folder: int | None = None) -> None:
    try:
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC | (os.O_NOFOLLOW if folder is not None else 0), dir_fd=folder)
    except OSError as e:
        raise OutputError(f"cannot write {option} {printable(name)}: {e.strerror}") from None
    try:
        _write_all(fd, data)
    except OSError as e:
        raise OutputError(f"cannot write {option} {printable(name)}: {e.strerror}") from None
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
