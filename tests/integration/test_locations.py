"""Locations as gdb and bpftrace take them: FUNCTION+OFFSET, MODULE:0xADDR (a file's address, as
objdump and nm print it), patterns of functions with --max-probes; each checked against what
objdump and nm say of the file, and each refusal one line that harms nothing."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.integration.targets import (
    BIN,
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    one_line_error,
    sampler,
)


def second_instruction(program: Path, function: str) -> int:
    """The file address of the function's second instruction, by objdump (not by sampler)."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(program)], capture_output=True, text=True,
                          check=True).stdout
    body = text.split(f"<{function}>:\n", 1)[1]
    addresses = [int(m.group(1), 16) for m in re.finditer(r"^\s+([0-9a-f]+):", body, re.M)]
    return addresses[1]


def function_names(program: Path, pattern: str) -> set[str]:
    text = subprocess.run(["nm", str(program)], capture_output=True, text=True, check=True).stdout
    return {line.split()[2] for line in text.splitlines()
            if len(line.split()) == 3 and line.split()[1] in "Tt" and re.fullmatch(pattern, line.split()[2])}


def test_function_plus_offset_and_a_files_address_are_the_same_instruction(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN ringbuf-c, and ring_read's second instruction as objdump decodes it
    target = start_target("ringbuf-c")
    program = BIN / "ringbuf-c"
    second = second_instruction(program, "ring_read")
    start = int(subprocess.run(["nm", str(program)], capture_output=True, text=True).stdout.split(" T ring_read")[0]
                .split()[-1], 16)
    base = next(int(line.split("-")[0], 16) for line in Path(f"/proc/{target.pid}/maps").read_text().splitlines()
                if line.endswith(str(program)) and int(line.split()[2], 16) == 0)
    seen = []
    for at in (f"ring_read+{second - start:#x}", f"ringbuf-c:{second:#x}"):
        out = tmp_path / "rows.csv"
        # WHEN each form is traced by int3
        result = sampler("trace", "--pid", str(target.pid), "--probe", "int3", "--at", at, "--expr", "w=b->w",
                         "--expr", "pc=$rip", "--max-events", "50", "--out", str(out))
        assert result.returncode == 0, result.stderr
        # THEN its probe is at that instruction (the pc of each hit), and reads as a probe there should
        rows = assert_csv_whole(out)
        assert len(rows) == 50 and all(r["error"] == "" and int(r["w"]) > 0 for r in rows)
        seen.append({int(r["pc"]) for r in rows})
    assert seen == [{base + second}, {base + second}]
    assert_code_matches_files(target.pid)


def test_offsets_that_miss_an_instruction_or_the_file_are_one_line(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    program = BIN / "ringbuf-c"
    second = second_instruction(program, "ring_read")
    cases = {
        f"ringbuf-c:{second + 1:#x}": "is not the start of an instruction",
        "ring_read+0x99999": "past the end of ring_read",
        "no_such_function+4": "no function symbol 'no_such_function'",
        "ringbuf-c:0x7fffffff": "no loadable segment",
        "nolib:0x1000": "no library 'nolib'",
    }
    for at, said in cases.items():
        message = one_line_error(sampler("trace", "--pid", str(target.pid), "--at", at, "--duration", "1s",
                                          "--quiet"))
        assert said in message, (at, message)
    assert "objdump -d" in one_line_error(sampler("trace", "--pid", str(target.pid), "--at",
                                                  f"ringbuf-c:{second + 1:#x}", "--duration", "1s", "--quiet"))
    assert_code_matches_files(target.pid)


def test_a_pattern_is_every_function_nm_names_each_a_probe(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    # GIVEN ringbuf-c, whose ring_* functions nm lists
    target = start_target("ringbuf-c")
    expected = function_names(BIN / "ringbuf-c", r"ring_.*")
    assert len(expected) >= 2
    out = tmp_path / "rows.csv"
    # WHEN the pattern is traced
    result = sampler("trace", "--pid", str(target.pid), "--at", "ring_*", "--duration", "1s", "--out", str(out),
                     "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN each of them is a probe, the probe column naming it
    assert {r["probe"] for r in assert_csv_whole(out)} == {f"ring_* [{name}]" for name in expected}
    # AND a library's pattern beyond --max-probes, or one that matches nothing, is one line
    message = one_line_error(sampler("trace", "--pid", str(target.pid), "--at", "libc:str*", "--max-probes", "5",
                                     "--duration", "1s", "--quiet"))
    assert re.search(r"\d+ functions match, over --max-probes 5", message), message
    assert "no function of ringbuf-c matches" in one_line_error(
        sampler("trace", "--pid", str(target.pid), "--at", "nosuch_*", "--duration", "1s", "--quiet"))
    assert "a pattern is read by the ptrace backend" in one_line_error(
        sampler("trace", "--pid", str(target.pid), "--at", "ring_*", "--backend", "delve", "--duration", "1s",
                "--quiet"))
    assert_code_matches_files(target.pid)
