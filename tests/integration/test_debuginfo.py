"""Debug information wherever it lives: in a shared library, a separate file found by
.gnu_debuglink or build-id, --symbols, a real debuginfod server on 127.0.0.1, Debian's
libc6-dbg; and corrupted debug information, which never makes an internal error."""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.elffile import ElfFile
from sampler.debuginfo.locate import resolve
from sampler.debuginfo.modules import Modules
from tests.integration.targets import (
    BIN,
    ROOT,
    Target,
    assert_csv_whole,
    assert_text_matches_file,
    one_line_error,
    sampler,
)

CAPACITY = 20000
"""ringbuf-c's ring."""
LIB_CAPACITY = 1000
"""ringbuf-lib's ring, in libring.so."""


pytestmark = pytest.mark.usefixtures("built_targets")


def attach(pid: int, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = ["attach", "--backend", "ptrace", "--pid", str(pid), *args]
    return subprocess.run([sys.executable, "-m", "sampler", *command], cwd=ROOT, text=True,
                          capture_output=True, timeout=180, env={**os.environ, **(env or {})})


def assert_harmless(target: Target) -> None:
    target.assert_untouched()
    assert_text_matches_file(target)


def build_id(path: Path) -> str:
    file = ElfFile(str(path))
    try:
        assert file.build_id is not None, f"{path} has no build-id"
        return file.build_id.hex()
    finally:
        file.close()


def split(binary: Path, folder: Path, debuglink: bool) -> tuple[Path, Path]:
    """A stripped copy of BINARY (no .symtab, no DWARF) and its debug file, as a
    distribution's packaging makes them (objcopy --only-keep-debug, strip, debuglink)."""
    folder.mkdir(parents=True, exist_ok=True)
    debug = folder / f"{binary.name}.debug"
    stripped = folder / binary.name
    subprocess.run(["objcopy", "--only-keep-debug", str(binary), str(debug)], check=True)
    subprocess.run(["objcopy", "--strip-all", str(binary), str(stripped)], check=True)
    if debuglink:
        subprocess.run(["objcopy", f"--add-gnu-debuglink={debug}", str(stripped)], check=True, cwd=folder)
    return stripped, debug


def by_build_id(stripped: Path, debug: Path, folder: Path) -> Path:
    """Move DEBUG to FOLDER/.build-id/ab/cdef....debug, where a debug directory keeps it."""
    hexed = build_id(stripped)
    placed = folder / ".build-id" / hexed[:2] / f"{hexed[2:]}.debug"
    placed.parent.mkdir(parents=True)
    return debug.rename(placed)


# -- a shared library with DWARF ---------------------------------------------------


def test_a_library_function_reads_its_parameters_and_its_globals(start_target: Callable[..., Target],
                                                                 tmp_path: Path) -> None:
    # GIVEN a program whose ring buffer and counters live in libring.so
    target = start_target("ringbuf-lib")
    out = tmp_path / "lib.csv"
    # WHEN breaking in the library's function, by its bare name
    result = attach(target.pid, "--at", "lring_push", "--expr", "d=b->w - b->r", "--expr", "v",
                    "--expr", "counted=lib_counted", "--expr", "cap=lib_ring->capacity",
                    "--count", "5", "--rate", "20", "--out", str(out))
    # THEN its parameters come from the library's DWARF, and its globals (a static one, and
    # one the program reaches by a copy relocation) are read where they live
    assert result.returncode == 0, result.stderr
    assert "libring.so: debug info in the file itself" in result.stderr
    rows = assert_csv_whole(out)
    assert len(rows) == 5
    for row in rows:
        assert row["error"] == "", row
        v, d = int(row["v"]), int(row["d"])
        assert int(row["counted"]) == v, row  # lib_count(round) comes after the pushes of the round
        assert int(row["cap"]) == LIB_CAPACITY
        assert d == LIB_CAPACITY or v <= d <= v + 2, row  # one more item per round until full
    assert_harmless(target)


@pytest.mark.parametrize("library", ["libring.so", "libring"])
def test_library_colon_function_picks_the_library(start_target: Callable[..., Target], tmp_path: Path,
                                                  library: str) -> None:
    target = start_target("ringbuf-lib")
    out = tmp_path / "pop.csv"
    result = attach(target.pid, "--at", f"{library}:lring_pop", "--expr", "d=b->w - b->r", "--count", "3",
                    "--rate", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert all(0 <= int(r["d"]) <= LIB_CAPACITY and r["error"] == "" for r in assert_csv_whole(out))
    line = one_line_error(attach(target.pid, "--quiet", "--at", "libnope.so:lring_pop", "--expr", "b"))
    assert "no library 'libnope.so' is loaded in process" in line
    line = one_line_error(attach(target.pid, "--quiet", "--at", "libring.so:ring_read", "--expr", "b"))
    assert "no function or line 'ring_read' in" in line and "libring.so" in line
    assert_harmless(target)


def test_file_and_line_in_a_library(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN the line of lib_count that stores its argument
    source = (BIN.parent / "ringbuf-lib" / "ring.c").read_text().splitlines()
    line = 1 + next(i for i, text in enumerate(source) if "lib_last = i;" in text)
    target = start_target("ringbuf-lib")
    out = tmp_path / "line.csv"
    result = attach(target.pid, "--at", f"ring.c:{line}", "--expr", "i", "--expr", "lib_counted",
                    "--count", "3", "--rate", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    for row in assert_csv_whole(out):
        assert row["error"] == "" and int(row["lib_counted"]) == int(row["i"]), row
    assert_harmless(target)


def test_library_globals_are_read_without_stopping(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("ringbuf-lib")
    out = tmp_path / "zero.csv"
    result = attach(target.pid, "--expr", "last=lib_last", "--expr", "counted=lib_counted",
                    "--expr", "d=lib_ring->w - lib_ring->r", "--count", "5", "--rate", "20", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert all(r["pause_us"] == "0" and r["thread"] == "" for r in rows), "zero-stop reads stop nothing"
    for row in rows:
        last, counted = int(row["last"]), int(row["counted"])
        assert last <= counted <= last + 2, row  # two separate reads of a running program
        assert 0 <= int(row["d"]) <= LIB_CAPACITY
    assert int(rows[-1]["last"]) > int(rows[0]["last"]), "the program kept running"
    assert_harmless(target)


def test_trace_counts_every_call_of_a_library_function(start_target: Callable[..., Target],
                                                       tmp_path: Path) -> None:
    # GIVEN lib_count(round), called once per round with 0, 1, 2, ...
    target = start_target("ringbuf-lib")
    out = tmp_path / "trace.csv"
    # WHEN tracing every hit for a second
    result = sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "libring.so:lib_count",
                     "--expr", "i", "--expr", "before=lib_counted", "--duration", "1s", "--quiet", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    calls = [int(r["i"]) for r in rows]
    # THEN every call between the first and the last row has exactly one row
    assert len(calls) > 50, len(calls)
    assert calls == list(range(calls[0], calls[0] + len(calls))), "a call was missed or seen twice"
    assert all(int(r["before"]) == int(r["i"]) for r in rows)
    assert_harmless(target)


def test_a_library_loaded_after_the_modules_were_read(start_target: Callable[..., Target],
                                                      tmp_path: Path) -> None:
    # GIVEN the modules of a program that has not loaded its plug-in yet
    target = start_target("ringbuf-lib")
    modules = Modules(target.pid, DebugFinder(target.pid, (), lambda _: None, lambda _: None))
    try:
        assert all(m.name != "libplugin.so" for m in modules.everything())
        # WHEN it loads it with dlopen, and the plug-in's function is looked up by name
        target.proc.send_signal(signal.SIGUSR1)
        target.wait_for(lambda: "plugin loaded" in target.lines, 10, "the plug-in was not loaded")
        place = resolve(modules, "plugin_work")
        # THEN the lookup finds the new library, with its DWARF
        assert place.module is not None and place.module.name == "libplugin.so"
        assert place.function is not None and place.function.name == "plugin_work"
    finally:
        modules.close()
    out = tmp_path / "plugin.csv"
    result = sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "plugin_work",
                     "--expr", "x", "--expr", "plugin_calls", "--max-events", "5", "--quiet", "--out", str(out))
    assert result.returncode == 0, result.stderr
    xs = [int(r["x"]) for r in assert_csv_whole(out)]
    assert xs == list(range(xs[0], xs[0] + 5))
    assert_harmless(target)


# -- separate debug files ------------------------------------------------------------


@pytest.mark.parametrize("where", ["beside", ".debug"])
def test_a_stripped_program_with_a_debuglink(tmp_path: Path, where: str) -> None:
    # GIVEN the C target stripped, its DWARF in a file named by .gnu_debuglink
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=True)
    if where == ".debug":
        (debug.parent / ".debug").mkdir()
        debug = debug.rename(debug.parent / ".debug" / debug.name)
    target = Target([str(stripped)])
    try:
        out = tmp_path / "s.csv"
        # WHEN sampling it by function name
        result = attach(target.pid, "--at", "ring_read", "--expr", "d=b->w - b->r", "--expr", "cap=b->capacity",
                        "--count", "3", "--rate", "20", "--out", str(out))
        # THEN symbols and DWARF come from the debug file, and say so
        assert result.returncode == 0, result.stderr
        assert f"ringbuf-c: debug info from {debug} (by .gnu_debuglink)" in result.stderr
        for row in assert_csv_whole(out):
            assert int(row["cap"]) == CAPACITY and 0 <= int(row["d"]) <= CAPACITY
        assert_harmless(target)
    finally:
        target.stop()


def test_a_debuglink_whose_crc_does_not_match_is_not_used(tmp_path: Path) -> None:
    # GIVEN a stripped program whose debuglink names a file of another build
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=True)
    subprocess.run(["objcopy", "--only-keep-debug", str(BIN / "ringbuf-c-O0"), str(debug)], check=True)
    target = Target([str(stripped)])
    try:
        line = one_line_error(attach(target.pid, "--quiet", "--at", "ring_read", "--expr", "b->w"))
        assert "ringbuf-c is stripped; no debug info was found for ringbuf-c (ignored " in line
        assert "its CRC does not match .gnu_debuglink (a different build)" in line
        assert_harmless(target)
    finally:
        target.stop()


def test_a_build_id_file_in_a_debug_dir(tmp_path: Path) -> None:
    # GIVEN a stripped program (no debuglink) and its debug file under DIR/.build-id/ab/cdef.debug
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=False)
    placed = by_build_id(stripped, debug, tmp_path / "debug")
    target = Target([str(stripped)])
    try:
        # WHEN sampling without --debug-dir: one clear line that says what to do
        line = one_line_error(attach(target.pid, "--quiet", "--at", "ring_read", "--expr", "b->w"))
        assert "ringbuf-c is stripped; no debug info was found for ringbuf-c" in line and "--debug-dir" in line
        # and with it: found by build-id
        out = tmp_path / "b.csv"
        result = attach(target.pid, "--debug-dir", str(tmp_path / "debug"), "--at", "ring_read",
                        "--expr", "cap=b->capacity", "--count", "3", "--rate", "20", "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert f"debug info from {placed} (by build-id)" in result.stderr
        assert all(int(r["cap"]) == CAPACITY for r in assert_csv_whole(out))
        # a debug directory that does not exist: one line
        line = one_line_error(attach(target.pid, "--quiet", "--debug-dir", str(tmp_path / "nope"), "--at", "ring_read",
                                     "--expr", "b->w"))
        assert f"--debug-dir {tmp_path / 'nope'}: no such directory" in line
        assert_harmless(target)
    finally:
        target.stop()


def test_symbols_from_an_unstripped_copy(tmp_path: Path) -> None:
    stripped, _ = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=False)
    target = Target([str(stripped)])
    try:
        out = tmp_path / "s.csv"
        result = attach(target.pid, "--symbols", str(BIN / "ringbuf-c"), "--at", "ring_read",
                        "--expr", "cap=b->capacity", "--count", "2", "--rate", "20", "--out", str(out))
        assert result.returncode == 0, result.stderr
        assert f"debug info from {BIN / 'ringbuf-c'} (--symbols)" in result.stderr
        assert all(int(r["cap"]) == CAPACITY for r in assert_csv_whole(out))
        # another build: refused, one line, target untouched
        line = one_line_error(attach(target.pid, "--quiet", "--symbols", str(BIN / "ringbuf-c-O0"), "--at", "ring_read",
                                     "--expr", "b->w"))
        assert "is not a build of the running program (its build-id is" in line
        line = one_line_error(attach(target.pid, "--quiet", "--symbols", str(tmp_path / "nope"), "--at", "ring_read",
                                     "--expr", "b->w"))
        assert "not a readable ELF file" in line
        assert_harmless(target)
    finally:
        target.stop()


# -- debuginfod ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def debuginfod_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real debuginfod (Debian's package) on 127.0.0.1, serving a folder of debug files."""
    if shutil.which("debuginfod") is None:
        pytest.skip("debuginfod is not installed (make setup installs it)")
    folder = tmp_path / "served"
    folder.mkdir()
    port = free_port()
    server = subprocess.Popen(["debuginfod", "-F", str(folder), "-p", str(port), "-d", str(tmp_path / "db.sqlite"),
                               "-t", "1", "-g", "0"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}", folder
    finally:
        server.terminate()
        server.wait(20)


def wait_until_served(url: str, hexed: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/buildid/{hexed}/debuginfo", timeout=5) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            pass
        assert time.monotonic() < deadline, "debuginfod never served the file"
        time.sleep(0.3)


def test_debug_info_from_a_debuginfod_server(tmp_path: Path, debuginfod_server: tuple[str, Path]) -> None:
    url, served = debuginfod_server
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=False)
    debug.rename(served / debug.name)
    hexed = build_id(stripped)
    wait_until_served(url, hexed)
    target = Target([str(stripped)])
    env = {"DEBUGINFOD_URLS": url, "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache")}
    try:
        out = tmp_path / "d.csv"
        # WHEN sampling the stripped program with DEBUGINFOD_URLS set
        result = attach(target.pid, "--at", "ring_read", "--expr", "cap=b->capacity", "--count", "2",
                        "--rate", "20", "--out", str(out), env=env)
        # THEN the debug file is downloaded into the client cache (saying so) and used
        assert result.returncode == 0, result.stderr
        assert "ringbuf-c: downloading debug info from debuginfod" in result.stderr
        cached = tmp_path / "cache" / hexed / "debuginfo"
        assert f"debug info from {cached} (debuginfod)" in result.stderr
        assert all(int(r["cap"]) == CAPACITY for r in assert_csv_whole(out))
        # a second run takes it from the cache: no download
        again = attach(target.pid, "--at", "ring_read", "--expr", "b->capacity", "--count", "1", env=env)
        assert again.returncode == 0 and "downloading" not in again.stderr, again.stderr
        # an unreachable server: the one error line says why
        line = one_line_error(attach(target.pid, "--quiet", "--at", "ring_read", "--expr", "b->w",
                                     env={"DEBUGINFOD_URLS": f"http://127.0.0.1:{free_port()}",
                                          "DEBUGINFOD_CACHE_PATH": str(tmp_path / "cache2")}))
        assert "no debug info was found for ringbuf-c (debuginfod failed: connection refused)" in line
        assert_harmless(target)
    finally:
        target.stop()


# -- a program nobody here wrote ------------------------------------------------------------


def test_malloc_in_debian_python_with_libc6_dbg(tmp_path: Path) -> None:
    # GIVEN Debian's own python3 (stripped) allocating 100,000-byte bytearrays, and glibc's
    # DWARF from Debian's libc6-dbg under /usr/lib/debug/.build-id
    python = shutil.which("python3")
    assert python is not None
    target = Target(["/usr/bin/python3", "-u", "-c",
                     "import os, time\nprint('ready pid=%d' % os.getpid())\n"
                     "while True:\n    b = bytearray(100000)\n    time.sleep(0.002)\n"])
    try:
        out = tmp_path / "malloc.csv"
        # WHEN tracing malloc's size parameter, `bytes` as glibc names it
        result = sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "malloc",
                         "--expr", "bytes", "--max-events", "40", "--out", str(out))
        # THEN it is read from libc's separate debug file, and the bytearrays' size is seen
        assert result.returncode == 0, result.stderr
        assert "libc.so.6: debug info from /usr/lib/debug/.build-id/" in result.stderr
        sizes = [int(r["bytes"]) for r in assert_csv_whole(out)]
        assert len(sizes) == 40 and all(0 < s < 1 << 32 for s in sizes)
        assert 100001 in sizes, sizes  # bytearray(100000) asks for its size plus the NUL
        assert target.proc.poll() is None and target.status()["TracerPid"].strip() == "0"
        assert_text_matches_file(target)
    finally:
        target.stop()


# -- corrupted debug information ---------------------------------------------------------------


def flip(path: Path, count: int, seed: int, section: str | None) -> None:
    """Flip COUNT random bytes of a file, inside one section when SECTION is given."""
    data = bytearray(path.read_bytes())
    low, high = 0, len(data)
    if section is not None:
        file = ElfFile(str(path))
        found = file.elf.get_section_by_name(section)
        low, high = found["sh_offset"], found["sh_offset"] + found["sh_size"]
        file.close()
    chance = random.Random(seed)
    for _ in range(count):
        at = chance.randrange(low, high)
        data[at] ^= 1 << chance.randrange(8)
    path.write_bytes(bytes(data))


def assert_no_internal_error(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode in (0, 1, 2), (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr, result.stderr
    if result.returncode != 0:
        assert result.stderr.splitlines()[-1].startswith("sampler: "), result.stderr


@pytest.mark.parametrize("seed", range(8))
def test_corrupted_dwarf_in_the_program(tmp_path: Path, seed: int) -> None:
    # GIVEN a copy of the C target with 20 random bits flipped in its .debug_info
    copy = tmp_path / "ringbuf-c"
    shutil.copy(BIN / "ringbuf-c", copy)
    flip(copy, 20, seed, ".debug_info")
    target = Target([str(copy)])
    try:
        # WHEN sampling it at a function and without stopping: never exit 70, never a hang
        for args in (["--at", "ring_read", "--expr", "b->w - b->r"], ["--expr", "ring->w"]):
            result = attach(target.pid, *args, "--count", "2", "--rate", "20", "--quiet")
            assert_no_internal_error(result)
        assert_harmless(target)
    finally:
        target.stop()


@pytest.mark.parametrize("seed", range(4))
def test_a_corrupted_separate_debug_file(tmp_path: Path, seed: int) -> None:
    # GIVEN a stripped program whose build-id debug file has 50 random bits flipped anywhere
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=False)
    placed = by_build_id(stripped, debug, tmp_path / "debug")
    flip(placed, 50, seed, None)
    target = Target([str(stripped)])
    try:
        result = attach(target.pid, "--debug-dir", str(tmp_path / "debug"), "--at", "ring_read",
                        "--expr", "b->w - b->r", "--count", "2", "--rate", "20", "--quiet")
        assert_no_internal_error(result)
        assert_harmless(target)
    finally:
        target.stop()


def test_a_truncated_debug_file(tmp_path: Path) -> None:
    stripped, debug = split(BIN / "ringbuf-c", tmp_path / "pkg", debuglink=True)
    debug.write_bytes(debug.read_bytes()[: os.path.getsize(debug) // 3])
    subprocess.run(["objcopy", "--remove-section=.gnu_debuglink", str(stripped)], check=True)
    subprocess.run(["objcopy", f"--add-gnu-debuglink={debug}", str(stripped)], check=True, cwd=debug.parent)
    target = Target([str(stripped)])
    try:
        line = one_line_error(attach(target.pid, "--quiet", "--at", "ring_read", "--expr", "b->w"))
        assert "ignored" in line or "cannot be read" in line, line
        assert_harmless(target)
    finally:
        target.stop()
