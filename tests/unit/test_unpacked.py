"""The single file refuses, as root, a TMPDIR another user can change (real folders, chowned to nobody)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sampler.safety import unpacked

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give folders to another user")


def folder(path: Path, mode: int = 0o700, uid: int = 0) -> Path:
    path.mkdir()
    os.chmod(path, mode)
    os.chown(path, uid, 0)
    return path


def test_root_own_folder_is_safe(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o700)
    assert unpacked.unsafe(str(folder(tmp_path / "_MEI1"))) is None


def test_a_folder_under_sticky_world_writable_tmp_is_safe(tmp_path: Path) -> None:
    tmp = folder(tmp_path / "tmp", 0o1777)
    assert unpacked.unsafe(str(folder(tmp / "_MEI1"))) is None


@pytest.mark.parametrize("mode, uid, says", [
    (0o700, NOBODY, "it belongs to user 65534"),
    (0o777, 0, "every user may write it"),
])
def test_a_parent_another_user_can_change_is_refused(tmp_path: Path, mode: int, uid: int, says: str) -> None:
    theirs = folder(tmp_path / "theirs", mode, uid)
    os.chmod(tmp_path, 0o755)
    mei = folder(theirs / "_MEI1")
    assert unpacked.unsafe(str(mei)) == f"{theirs}: {says}"


def test_a_folder_higher_up_counts_too(tmp_path: Path) -> None:
    theirs = folder(tmp_path / "theirs", 0o755, NOBODY)
    deep = folder(folder(theirs / "a") / "b")
    assert unpacked.unsafe(str(folder(deep / "_MEI1"))) == f"{theirs}: it belongs to user 65534"


def test_the_unpacked_folder_must_be_0700(tmp_path: Path) -> None:
    mei = folder(tmp_path / "_MEI1", 0o755)
    assert unpacked.unsafe(str(mei)) == f"{mei}: its mode is 0755, not 0700"


def test_a_link_another_user_owns_or_points_into_their_folder_is_refused(tmp_path: Path) -> None:
    mine = folder(tmp_path / "mine")
    folder(mine / "_MEI1")
    theirs = folder(tmp_path / "theirs", 0o755, NOBODY)
    folder(theirs / "_MEI2")
    link = tmp_path / "link"
    link.symlink_to(mine)
    assert unpacked.unsafe(str(link / "_MEI1")) is None  # root's link to root's folder
    os.lchown(link, NOBODY, NOBODY)
    assert unpacked.unsafe(str(link / "_MEI1")) == f"{link}: it belongs to user 65534"
    to_theirs = tmp_path / "to_theirs"
    to_theirs.symlink_to(theirs)
    assert unpacked.unsafe(str(to_theirs / "_MEI2")) == f"{theirs}: it belongs to user 65534"


def test_the_command_refuses_in_one_line_before_it_loads_anything(tmp_path: Path) -> None:
    """As the single file would run: sys._MEIPASS set, the whole start-up, exit 2, nothing of cli loaded."""
    theirs = folder(tmp_path / "theirs", 0o777)
    mei = folder(theirs / "_MEI1")
    code = ("import sys; sys._MEIPASS = sys.argv[1]; from sampler import start; code = start.main(); "
            "print('cli' if 'sampler.cli' in sys.modules else 'no cli', code)")
    run = subprocess.run([sys.executable, "-c", code, str(mei), "doctor"], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == ["no", "cli", "2"], run
    assert run.stderr.count("\n") == 1, run.stderr
    assert f"({theirs}: every user may write it)" in run.stderr
    assert "TMPDIR=/root/tmp" in run.stderr
    assert unpacked.check() is None  # this interpreter is not the single file
