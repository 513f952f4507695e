"""Where a function's code leaves it (sampler/debuginfo/exits.py): made-up functions for each kind of
exit, and every function of Debian's libc, redis-server and python3 checked against objdump's own
decoding (another decoder than capstone): the same returns, the same jumps out, the same indirect jumps."""

from __future__ import annotations

import subprocess
from collections import defaultdict

import pytest

from sampler.debuginfo.exits import exits
from sampler.inprocess.relocate import Refused
from tests.unit.real_programs import programs, text_functions

PREFIXES = {"repz", "rep", "bnd", "notrack", "ds", "cs", "data16", "lock"}


def test_each_kind_of_exit_is_found() -> None:
    code = bytes.fromhex(
        "4885ff"        # 0x1000 test rdi, rdi
        "7405"          # 0x1003 je 0x100a (inside)
        "0f8400100000"  # 0x1005 je 0x200b (outside: a tail call on a condition)
        "c3"            # 0x100b ret
        "f3c3"          # 0x100c repz ret
        "c20800"        # 0x100e ret 8
        "ffe0"          # 0x1011 jmp rax
        "e9eaefffff"    # 0x1013 jmp 0x2 (outside)
    )
    found = exits(code, 0x1000)
    assert found.returns == (0x100B, 0x100C, 0x100E)
    assert found.tail_calls == ((0x1005, 0x200B), (0x1013, 0x2))
    assert found.indirect == (0x1011,)
    assert not found.only_returns
    assert exits(bytes.fromhex("4889f8" "c3"), 0x1000).only_returns


def test_code_that_cannot_be_decoded_is_refused() -> None:
    with pytest.raises(Refused, match="decoded"):
        exits(bytes.fromhex("4889f8" "0f0b" "ff"), 0x1000)


def objdump_exits(path: str) -> tuple[set[int], dict[int, int], set[int]]:
    """Returns, jumps (address -> target) and indirect jumps, as objdump decodes the file's .text."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-j", ".text", path], capture_output=True,
                         text=True, check=True).stdout
    returns, jumps, indirect = set(), {}, set()
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or not parts[0].strip().endswith(":"):
            continue
        words = [w for w in parts[1].split() if w not in PREFIXES]
        if not words:
            continue
        address, mnemonic = int(parts[0].strip()[:-1], 16), words[0]
        if mnemonic.startswith("ret"):
            returns.add(address)
        elif mnemonic.startswith(("j", "loop")) and len(words) > 1:
            if words[1].startswith("*"):
                indirect.add(address)
            else:
                jumps[address] = int(words[1], 16)
    return returns, jumps, indirect


@pytest.mark.parametrize("name", programs("exits"))
def test_every_function_of_a_real_program_has_the_exits_objdump_decodes(name: str) -> None:
    path, data, base, functions = text_functions(name)
    returns, jumps, indirect = objdump_exits(path)
    outcome: defaultdict[str, int] = defaultdict(int)
    for address, size in functions:
        end = address + size
        try:
            found = exits(data[address - base:end - base], address)
        except Refused:
            outcome["refused"] += 1
            continue
        outcome["decoded"] += 1
        outcome["only returns"] += found.only_returns
        assert set(found.returns) == {a for a in returns if address <= a < end}, (name, hex(address))
        assert set(found.indirect) == {a for a in indirect if address <= a < end}, (name, hex(address))
        assert set(found.tail_calls) == {(a, t) for a, t in jumps.items()
                                         if address <= a < end and not address <= t < end}, (name, hex(address))
    assert outcome["decoded"] > len(functions) * 0.95, dict(outcome)
