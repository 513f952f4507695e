"""Names and values as users write them: C++ and Rust programs, and a stripped server
read with argN, registers and C casts."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import BIN, Target, assert_csv_whole, assert_text_matches_file, one_line_error, sampler

CAPACITY = 20000

pytestmark = pytest.mark.usefixtures("built_targets")


def attach(pid: int, *args: str) -> subprocess.CompletedProcess[str]:
    return sampler("attach", "--backend", "ptrace", "--pid", str(pid), *args)


def rows_of(result: subprocess.CompletedProcess[str], out: Path) -> list[dict[str, str]]:
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    assert rows and all(r["error"] == "" for r in rows), rows
    return rows


# -- C++ -------------------------------------------------------------------------------


@pytest.mark.parametrize("at", ["rb::Ring::read", "rb::Ring::read(unsigned long*)"])
def test_cpp_method_by_qualified_name(start_target: Callable[..., Target], tmp_path: Path, at: str) -> None:
    # GIVEN the C++ ring: rb::Ring with std::atomic<uint64_t> r, w and a std::string name
    target = start_target("ringbuf-cpp")
    out = tmp_path / "cpp.csv"
    # WHEN breaking in the method by its qualified name (or its full signature)
    result = attach(target.pid, "--at", at, "--expr", "d=this->w - this->r", "--expr", "name=this->name",
                    "--expr", "cap=this->capacity", "--expr", "text=(char *)this->name._M_dataplus._M_p",
                    "--count", "3", "--rate", "20", "--out", str(out))
    # THEN `this` is a parameter, the atomics read as numbers and the string as its text
    for row in rows_of(result, out):
        assert 0 <= int(row["d"]) <= CAPACITY
        assert row["name"] == "ring-cpp" and row["text"] == "ring-cpp"
        assert int(row["cap"]) == CAPACITY
    target.assert_untouched()
    assert_text_matches_file(target)


def test_a_bare_name_picks_the_programs_function_and_says_so(start_target: Callable[..., Target],
                                                              tmp_path: Path) -> None:
    # GIVEN `read`: rb::Ring::read in the program, and libc's read
    target = start_target("ringbuf-cpp")
    out = tmp_path / "bare.csv"
    result = attach(target.pid, "--at", "read", "--expr", "w=this->w", "--count", "2", "--rate", "20",
                    "--out", str(out))
    # THEN the program's method is sampled (libc's read has no `this`), and the choice is said
    assert all(int(r["w"]) > 0 for r in rows_of(result, out))
    assert "--at read: the program's function (also in libc.so.6; libc.so.6:read picks that one)" in result.stderr
    target.assert_untouched()


def test_several_candidates_are_listed_not_guessed(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-cpp")
    line = one_line_error(attach(target.pid, "--quiet", "--at", "size", "--expr", "this"))
    assert "'size' is 2 functions in ringbuf-cpp: rb::Ring::size() const; rb::size(rb::Ring const&)" in line
    assert "give one of them in full" in line
    target.assert_untouched()


# -- Rust ------------------------------------------------------------------------------------


def test_rust_method_by_its_path(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN the Rust ring: main::Ring with AtomicU64 r, w and a String name; report(&self,
    # tag: &str, seconds: &Cell<u64>) called once a second with "tick"
    if not (BIN / "ringbuf-rust").exists():
        pytest.skip("rustc could not be installed, so targets/bin/ringbuf-rust was not built")
    target = start_target("ringbuf-rust")
    out = tmp_path / "rust.csv"
    result = attach(target.pid, "--at", "main::Ring::report", "--expr", "tag", "--expr", "secs=*seconds",
                    "--expr", "name=self.name", "--expr", "d=self.w - self.r", "--count", "2", "--out", str(out))
    rows = rows_of(result, out)
    # THEN &str and String give their text, a Cell and the atomics their number, `self` works
    assert all(r["tag"] == "tick" and r["name"] == "ring-rust" for r in rows)
    assert [int(r["secs"]) for r in rows] == [int(rows[0]["secs"]), int(rows[0]["secs"]) + 1]
    assert all(0 <= int(r["d"]) <= CAPACITY for r in rows)
    out = tmp_path / "write.csv"
    result = attach(target.pid, "--at", "main::Ring::write", "--expr", "v", "--expr", "cap=self.capacity",
                    "--count", "3", "--rate", "20", "--out", str(out))
    values = [int(r["v"]) for r in rows_of(result, out)]
    assert values == sorted(values) and all(int(r["cap"]) == CAPACITY for r in assert_csv_whole(out))
    target.assert_untouched()
    assert_text_matches_file(target)


# -- a stripped server: argN, registers, casts ----------------------------------------------------


def test_a_stripped_server_with_arguments_and_casts(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN ringbuf-c built with -rdynamic and stripped: no DWARF, no .symtab, its functions in .dynsym
    stripped = start_target("ringbuf-c-exported")
    out = tmp_path / "stripped.csv"
    expressions = ["--expr", "cap=*(uint64_t *)(arg0 + 16)", "--expr", "d=*(uint64_t *)(arg0 + 8) - *(uint64_t *)arg0",
                   "--expr", "cap2=((uint64_t *)$rdi)[2]", "--expr", "bug=((int32_t *)arg0)[6]"]
    # WHEN sampling ring_read(struct ring *b, ...) with the ABI's arguments and C casts
    result = attach(stripped.pid, "--at", "ring_read", *expressions, "--count", "3", "--rate", "20",
                    "--out", str(out))
    rows = rows_of(result, out)
    # THEN the values are those the unstripped build gives through its DWARF names
    unstripped = start_target("ringbuf-c")
    named = tmp_path / "named.csv"
    reference = rows_of(attach(unstripped.pid, "--at", "ring_read", "--expr", "named=b->capacity",
                               "--expr", "named_bug=b->bug", *expressions, "--count", "3", "--rate", "20",
                               "--out", str(named)), named)
    for row in rows:
        assert int(row["cap"]) == int(row["cap2"]) == CAPACITY == int(reference[0]["named"])
        assert 0 <= int(row["d"]) <= CAPACITY
        assert int(row["bug"]) == int(reference[0]["named_bug"]) == 0
    for row in reference:  # the same casts where DWARF exists, beside the DWARF names
        assert int(row["cap"]) == int(row["cap2"]) == int(row["named"])
        assert int(row["bug"]) == int(row["named_bug"])
    stripped.assert_untouched()
    assert_text_matches_file(stripped)


def test_trace_an_exported_function_of_a_stripped_program(start_target: Callable[..., Target],
                                                          tmp_path: Path) -> None:
    # GIVEN tick(b, second), called once a second with 1, 2, 3, ...
    target = start_target("ringbuf-c-exported")
    out = tmp_path / "tick.csv"
    result = sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "tick",
                     "--expr", "second=arg1", "--expr", "cap=*(uint64_t *)(arg0 + 16)", "--max-events", "3",
                     "--quiet", "--out", str(out))
    rows = rows_of(result, out)
    seconds = [int(r["second"]) for r in rows]
    # THEN every call is one row, in order, none missed
    assert seconds == list(range(seconds[0], seconds[0] + 3))
    assert all(int(r["cap"]) == CAPACITY for r in rows)
    target.assert_untouched()


@pytest.mark.parametrize("expression, expected", [
    ("arg6", "arg6: only arg0-arg5 are known"),
    ("*(foo_t *)arg0", "unknown type 'foo_t' in a cast"),
    ("$nope", "no register $nope"),
])
def test_bad_machine_level_expressions(start_target: Callable[..., Target], expression: str,
                                       expected: str) -> None:
    target = start_target("ringbuf-c-exported")
    line = one_line_error(attach(target.pid, "--quiet", "--at", "ring_read", "--expr", expression))
    assert expected in line, line
    line = one_line_error(attach(target.pid, "--quiet", "--expr", "arg0"))
    assert "arg0: arguments are only known at a breakpoint" in line
    target.assert_untouched()


# -- misspelt names ------------------------------------------------------------------


@pytest.mark.parametrize("build, at, meant", [
    ("ringbuf-c", "ring_raed", "'ring_read'"),
    ("ringbuf-c", "libc.so.6:mallco", "'malloc'"),
    ("ringbuf-cpp", "rb::Ring::raed", "'rb::Ring::read'"),
])
def test_a_misspelt_location_suggests_the_nearest_names(start_target: Callable[..., Target], build: str,
                                                         at: str, meant: str) -> None:
    target = start_target(build)
    line = one_line_error(attach(target.pid, "--at", at, "--expr", "arg0", "--quiet"))
    assert f"did you mean {meant}" in line, line
    target.assert_untouched()


def test_a_debian_server_is_named_as_it_runs_and_a_typo_gets_a_suggestion(
        start_target: Callable[..., Target]) -> None:
    # GIVEN Debian's redis-server (a link to redis-check-rdb), stripped, with its dynamic symbols
    from tests.integration.targets import start_redis

    target, _ = start_redis(start_target)
    # WHEN a breakpoint is asked for at a misspelt command handler
    line = one_line_error(sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "processComand",
                                  "--max-events", "1", "--quiet"))
    # THEN the line names the program as it runs (and its file), and the function meant
    assert "in redis-server (/usr/bin/redis-check-rdb)" in line, line
    assert "did you mean 'processCommand'" in line, line
    from tests.integration.targets import assert_code_matches_files

    assert_code_matches_files(target.pid)
    assert target.status()["TracerPid"].strip() == "0"


# -- data symbols without debug info -------------------------------------------------


def test_a_stripped_programs_global_is_read_through_its_symbol(start_target: Callable[..., Target],
                                                                tmp_path: Path) -> None:
    # GIVEN the C ring stripped of everything but its exported symbols: `ring` is a data symbol, no type
    target = start_target("ringbuf-c-exported")
    # WHEN it is named alone, THEN one line says, as gdb does, that it needs a cast
    line = one_line_error(attach(target.pid, "--expr", "ring", "--quiet"))
    assert "'ring' has no type (no debug info was found for ringbuf-c-exported; a data symbol of 8 bytes)" in line
    assert "*(uint64_t *)&ring" in line
    # WHEN read through casts of its address, without stopping the program (no --at)
    out = tmp_path / "symbol.csv"
    rows = rows_of(attach(target.pid, "--expr", "a=&ring", "--expr", "p=*(uint64_t *)&ring",
                          "--expr", "d=*(uint64_t *)(*(uint64_t *)&ring + 8) - *(uint64_t *)*(uint64_t *)&ring",
                          "--count", "5", "--rate", "20", "--out", str(out), "--quiet"), out)
    # THEN the address is in hex, the pointer it holds is a heap address, w - r is within the ring
    bias = min(int(line.split("-")[0], 16) for line in Path(f"/proc/{target.pid}/maps").read_text().splitlines()
               if line.endswith("ringbuf-c-exported"))
    symbol = subprocess.run(["nm", "-D", str(BIN / "ringbuf-c-exported")], capture_output=True, text=True).stdout
    [address] = [int(line.split()[0], 16) for line in symbol.splitlines() if line.endswith(" B ring")]
    for row in rows:
        assert row["a"] == hex(bias + address) and int(row["p"]) > 0 and row["pause_us"] == "0", row
    # (w and r are read one after another while the ring runs: r may pass the w read a moment
    # before, so d is w - r as two moments saw it, within a few rounds of the ring either way)
    signed = [(int(row["d"]) + 2**63) % 2**64 - 2**63 for row in rows]
    assert all(-100 * CAPACITY <= d <= CAPACITY for d in signed) and any(0 <= d <= CAPACITY for d in signed), signed
    assert_text_matches_file(target)


def test_a_debian_daemons_global_struct_is_read_without_stopping_it(start_target: Callable[..., Target],
                                                                    tmp_path: Path) -> None:
    # GIVEN Debian's redis-server, stripped: its `struct redisServer server` is a data symbol
    # (.dynsym), whose first field is the server's PID
    from tests.integration.targets import start_redis

    target, _ = start_redis(start_target)
    out = tmp_path / "server.csv"
    # WHEN server.pid is read through a cast of &server, with no breakpoint
    rows = rows_of(attach(target.pid, "--expr", "spid=*(int32_t *)&server", "--expr", "head=buf(&server, 4)",
                          "--count", "3", "--rate", "10", "--out", str(out), "--quiet"), out)
    # THEN every row holds the daemon's own PID, read while it ran (no pause)
    assert [row["spid"] for row in rows] == [str(target.pid)] * 3, rows
    assert rows[0]["head"] == target.pid.to_bytes(4, "little").hex() and rows[0]["pause_us"] == "0", rows
    from tests.integration.targets import assert_code_matches_files

    assert_code_matches_files(target.pid)
