"""Every hit without a single-step: the instruction under an every-hit breakpoint is
emulated (sampler/process/emulate.py). With SAMPLER_CHECK_EMULATION=1 each emulated
hit is also single-stepped on the CPU and the two compared (registers, arithmetic flags and
the stack), on functions that start with each emulated kind of instruction, called with
inputs at the edges of signed and unsigned arithmetic (targets/emulate), and on a Go
server's stack checks while its goroutines' stacks grow."""

from __future__ import annotations

import csv
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    ROOT,
    SAMPLER_ENV,
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    finish,
    have_delve,
    redis_cli,
    start_redis,
)

FUNCTIONS = ["f_endbr", "f_nop", "f_push", "f_push_r15", "f_sub_rsp", "f_mov", "f_mov32", "f_mov8", "f_mov_imm",
             "f_movabs", "f_lea", "f_lea_rip", "f_xor", "f_add", "f_add32", "f_sub", "f_sub_imm", "f_cmp",
             "f_cmp_imm", "f_cmp8", "f_test", "f_test8", "f_and", "f_or", "f_cmpb_mem", "f_ret", "f_store_at",
             "f_load_at"]
_CHECKED = re.compile(r"emulation checked against the CPU at (\d+) hit\(s\): (\d+) differed")
_STEPS = re.compile(r"every hit: (\d+) ran on without a single-step, (\d+) single-stepped")


def _trace(target: Target, places: list[str], out: Path, check: bool, exprs: tuple[str, ...] = ()
           ) -> subprocess.Popen[str]:
    """sampler's trace, its stderr (a line per row) into a file next to OUT: a pipe nobody
    reads would fill and hold sampler, and the target with it."""
    env = {**SAMPLER_ENV, "SAMPLER_CHECK_EMULATION": "1" if check else "0"}
    args = [arg for expression in exprs for arg in ("--expr", expression)] + \
        [arg for place in places for arg in ("--at", place)]
    with open(out.with_suffix(".err"), "w") as err:
        return subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--backend", "ptrace", "--probe", "int3",
                                 "--pid", str(target.pid), *args, "--duration", "300s", "--out", str(out)],
                                cwd=ROOT, text=True, env=env, stdout=subprocess.DEVNULL, stderr=err)


def _int3s(pid: int) -> int:
    """How many bytes of the program's code differ from its file (one per breakpoint)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    differ = 0
    with open(f"/proc/{pid}/mem", "rb") as mem, open(exe, "rb") as file:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split()
            if len(fields) < 6 or fields[5] != exe or "x" not in fields[1]:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            mem.seek(start)
            file.seek(int(fields[2], 16))
            code, original = mem.read(end - start), file.read(end - start)
            differ += sum(a != b for a, b in zip(code, original, strict=False))
    return differ


def _run(target: Target, places: list[str], out: Path, check: bool, start: Callable[[], None],
         done: Callable[[str], int | None], exprs: tuple[str, ...] = ()) -> tuple[int, Counter[str], str]:
    """Trace ``places`` while ``start()`` makes the target call them; (the target's count,
    rows per probe, sampler's stderr)."""
    proc = _trace(target, places, out, check, exprs)
    deadline = time.monotonic() + 60
    while _int3s(target.pid) < len(places):
        assert proc.poll() is None, finish(proc)
        assert time.monotonic() < deadline, "the breakpoints did not all go in within 60 s"
        time.sleep(0.02)
    start()
    target.wait_for(lambda: any(done(line) is not None for line in target.lines), 240,
                    "the target did not finish its calls")
    made = next(n for n in map(done, target.lines) if n is not None)
    time.sleep(0.5)  # every call was served before it returned
    proc.send_signal(signal.SIGINT)
    finish(proc)
    stderr = "\n".join(line for line in out.with_suffix(".err").read_text().splitlines() if " pause=" not in line)
    assert proc.returncode == 0, stderr
    rows = assert_csv_whole(out)
    return made, Counter(row["probe"] if "probe" in row else places[0] for row in rows), stderr


def _entries(pid: int) -> dict[str, int]:
    """Each function's run-time address in the target (its symbol and the program's load bias)."""
    exe = os.readlink(f"/proc/{pid}/exe")
    bias = min(int(line.split("-")[0], 16) for line in Path(f"/proc/{pid}/maps").read_text().splitlines()
               if line.endswith(exe) and int(line.split()[2], 16) == 0)
    symbols = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout.splitlines()
    return {fields[2]: int(fields[0], 16) + bias for fields in map(str.split, symbols) if len(fields) == 3}


def _calls(line: str) -> int | None:
    return int(line.split("=")[1]) if line.startswith("done calls=") else None


def test_every_emulated_instruction_does_what_the_cpu_does(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    # GIVEN two threads that will call functions starting with each emulated instruction,
    # with inputs that set and clear every arithmetic flag
    target = start_target("emulate", "2", "80")
    # WHEN each is traced on every hit, each emulation checked against the CPU's own step
    made, rows, stderr = _run(target, FUNCTIONS, tmp_path / "check.csv", True,
                              lambda: target.proc.send_signal(signal.SIGUSR1), _calls)
    # THEN no emulation differed from the CPU, every hit was checked, and each call has its row
    checked = _CHECKED.search(stderr)
    assert checked, stderr
    assert int(checked.group(2)) == 0, stderr
    assert made == 160
    assert int(checked.group(1)) == made * len(FUNCTIONS), stderr
    assert rows == dict.fromkeys(FUNCTIONS, made), rows
    assert_code_matches_files(target.pid)


def test_eight_threads_are_counted_exactly_with_no_single_step(start_target: Callable[..., Target],
                                                                tmp_path: Path) -> None:
    # GIVEN eight threads calling functions that start with emulated instructions at once
    target = start_target("emulate", "8", "400")
    places = ["f_push", "f_sub_rsp", "f_xor", "f_ret"]
    # WHEN every call is traced (no check: the emulation alone), reading the registers the
    # emulated instructions change
    out = tmp_path / "count.csv"
    made, rows, stderr = _run(target, places, out, False, lambda: target.proc.send_signal(signal.SIGUSR1), _calls,
                              ("pc=$rip", "sp=$rsp", "ax=$rax"))
    # THEN each function's rows are exactly the program's count, none single-stepped, and
    # every row reads the registers as they were at the breakpoint: $rip its address, $rsp
    # as the call left it (8 past a multiple of 16), and after xor eax, eax a rax not always 0
    assert made == 3200
    assert rows == dict.fromkeys(places, made), rows
    entries = _entries(target.pid)
    with open(out, newline="") as f:
        read = list(csv.DictReader(f))
    assert all(int(row["pc"], 0) == entries[row["probe"]] for row in read), read[0]
    assert all(int(row["sp"], 0) % 16 == 8 for row in read), read[0]
    assert any(int(row["ax"], 0) != 0 for row in read if row["probe"] == "f_xor")
    steps = _STEPS.search(stderr)
    assert steps and (int(steps.group(1)), int(steps.group(2))) == (made * len(places), 0), stderr
    assert "missed" not in stderr
    assert_code_matches_files(target.pid)


def test_a_go_servers_stack_checks_are_emulated_as_its_stacks_grow(start_target: Callable[..., Target],
                                                                   tmp_path: Path) -> None:
    if not have_delve():
        pytest.skip("the Go targets are missing (make setup builds them)")
    # GIVEN a Go server that serves 100 requests, each on a new connection, from deep in its
    # stack (its goroutines' stacks grow in these functions' stack checks)
    binary = ROOT / "targets" / "bin" / "httpd-go"
    target = start_target("httpd-go", "-rate", "0", "-burst", "100")
    symbols = {line.split()[2]: int(line.split()[0], 16)
               for line in subprocess.run(["nm", str(binary)], capture_output=True, text=True,
                                          check=True).stdout.splitlines() if len(line.split()) == 3}
    # main.handler starts with cmp rsp, [r14+16]; main.serve with lea r12, [rsp-N]; cmp r12, [r14+16]
    places = [f"*{symbols['main.handler']:#x}", f"*{symbols['main.serve']:#x}", f"*{symbols['main.serve'] + 5:#x}"]
    code = binary.read_bytes()
    assert code.find(bytes.fromhex("493b6610")) >= 0  # the stack check is in the program as built

    def done(line: str) -> int | None:
        match = re.match(r"^burst connections=(\d+) requests=(\d+)$", line)
        return int(match.group(2)) if match else None

    # WHEN every call is traced, each emulation checked against the CPU's own step
    made, rows, stderr = _run(target, places, tmp_path / "go.csv", True,
                              lambda: target.proc.send_signal(signal.SIGUSR1), done)
    # THEN none differed, and each call has its row (the server's own count); a function
    # whose stack grew runs its entry again after morestack: a row more at its first address
    checked = _CHECKED.search(stderr)
    assert checked and int(checked.group(2)) == 0, stderr
    assert made == 100
    assert int(checked.group(1)) == sum(rows.values()), (rows, stderr)
    # (main.handler's too: 101 rows for 100 requests once in a clean-clone run)
    assert made <= rows[places[0]] < 2 * made and rows[places[1]] == rows[places[2]] >= made, rows
    assert_code_matches_files(target.pid)


def test_debians_redis_is_counted_exactly_and_every_emulation_matches_the_cpu(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN Debian's redis-server (stripped: breakpoints at the entries of its exported
    # functions: push, xor, cmp, movabs) under redis-benchmark
    target, port = start_redis(start_target, "--loglevel", "warning")
    if not shutil.which("redis-benchmark"):
        pytest.fail("redis-benchmark is missing: make setup installs redis-server with it")

    def benchmark() -> None:
        subprocess.run(["redis-benchmark", "-p", str(port), "-n", "600", "-c", "4", "-t", "set,get,incr", "-q"],
                       capture_output=True, timeout=120, check=True)
        target.lines.append("benchmark done")

    done: Callable[[str], int | None] = lambda line: 0 if line == "benchmark done" else None  # noqa: E731
    # WHEN its hot functions are traced with each emulated hit checked against the CPU's step
    checked_places = ["dictFind", "lookupKeyRead", "createStringObject", "zmalloc"]
    _, rows, stderr = _run(target, checked_places, tmp_path / "check.csv", True, benchmark, done, ())
    # THEN none differed, and all were checked
    checked = _CHECKED.search(stderr)
    assert checked and int(checked.group(2)) == 0 and int(checked.group(1)) == sum(rows.values()) > 1000, stderr
    # AND WHEN the commands are counted where redis processes each one, without the check
    before = _commands(port)
    _, rows, stderr = _run(target, ["processCommand", "call"], tmp_path / "count.csv", False, benchmark, done, ())
    # THEN the rows are redis' own count of the commands it ran, none single-stepped
    made = _commands(port) - before - 1  # the INFO that took ``before`` ran untraced
    assert made == 1800 + 2, made  # and redis-benchmark's two CONFIG GETs
    assert rows == {"processCommand": made, "call": made}, rows
    steps = _STEPS.search(stderr)
    assert steps and int(steps.group(2)) == 0, stderr
    assert redis_cli(port, "PING").strip() == "PONG"
    assert_code_matches_files(target.pid)


def _commands(port: int) -> int:
    """The commands redis ran so far, by its own count (INFO commandstats, the INFO itself not yet in)."""
    return sum(int(n) for n in re.findall(r"calls=(\d+)", redis_cli(port, "INFO", "commandstats")))
