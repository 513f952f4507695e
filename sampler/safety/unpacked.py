"""The single file (PyInstaller's --onefile) unpacks its interpreter, libraries and extension
modules into a new folder of $TMPDIR at each start and loads them from there, some only when
first imported. Run as root with a TMPDIR another user can change, that user can rename the
folder and put their own library in its place: code of theirs running as root. Before sampler
loads anything of its own, the single file checks that no one but root can change the unpacked
folder or any folder above it, and refuses to run otherwise.

What it cannot close: the bootloader has already loaded the interpreter from that folder when
this check runs. The check makes the race a matter of milliseconds, not of the whole run; the
README says to give root's own folder (TMPDIR=/root/tmp, 0700)."""

from __future__ import annotations

import os
import stat
import sys


def _changeable_by_others(st: os.stat_result) -> str | None:
    """Why someone other than root can change the entries of a folder with ``st``, or None."""
    if st.st_uid != 0:
        return f"it belongs to user {st.st_uid}"
    if stat.S_ISLNK(st.st_mode):
        return None  # root's link: its target is checked in turn
    sticky = bool(st.st_mode & stat.S_ISVTX)  # only an entry's owner may rename or remove it
    if st.st_mode & stat.S_IWOTH and not sticky:
        return "every user may write it"
    if st.st_mode & stat.S_IWGRP and st.st_gid != 0 and not sticky:
        return f"group {st.st_gid} may write it"
    return None


def unsafe(unpacked: str) -> str | None:
    """What makes ``unpacked`` (the single file's folder) changeable by a user other than root,
    naming the folder, or None when only root can change it and every folder above it."""
    path = os.path.abspath(unpacked)
    seen: set[str] = set()
    todo = [path]
    while todo:
        here = todo.pop()
        while here not in seen:
            seen.add(here)
            try:
                st = os.lstat(here)
            except OSError as e:
                return f"{here} cannot be checked ({e.strerror})"
            why = _changeable_by_others(st)
            if why is None and here == path and st.st_mode & 0o077:
                why = f"its mode is {stat.S_IMODE(st.st_mode):04o}, not 0700"
            if why:
                return f"{here}: {why}"
            if stat.S_ISLNK(st.st_mode):
                todo.append(os.path.abspath(os.path.join(os.path.dirname(here), os.readlink(here))))
            parent = os.path.dirname(here)
            if parent == here:
                break
            here = parent
    return None


def check() -> str | None:
    """The line to refuse with when this is the single file, run as root, unpacked where another
    user can change it; None otherwise (not the single file, not root, or a safe folder)."""
    unpacked = getattr(sys, "_MEIPASS", None)
    if unpacked is None or os.geteuid() != 0:
        return None
    why = unsafe(unpacked)
    if why is None:
        return None
    return (f"sampler: the single file unpacked itself where another user can change it ({why}), which as root "
            "would run their code; give it a folder of root's own: mkdir -m 700 /root/tmp; TMPDIR=/root/tmp ./sampler")
