"""elffile._read_symbols: a name's default version wins, and IFUNCs are functions that say so."""

from __future__ import annotations

import struct

import pytest

from sampler.debuginfo.elffile import Symbol, _read_symbols

STRINGS = b"\0memcpy\0strlen\0"
MEMCPY, STRLEN = 1, 8
FUNC, IFUNC, GLOBAL = 2, 10, 1 << 4


def entry(name: int, kind: int, value: int) -> bytes:
    return struct.pack("<IBBHQQ", name, GLOBAL | kind, 0, 16, value, 40)


@pytest.mark.parametrize("old_first", [True, False])
def test_the_default_version_wins_over_an_old_one(old_first: bool) -> None:
    old, new = entry(MEMCPY, FUNC, 0xA2D70), entry(MEMCPY, IFUNC, 0x9BE70)  # memcpy@GLIBC_2.2.5, @@GLIBC_2.14
    old_version, new_version = struct.pack("<H", 0x8002), struct.pack("<H", 3)
    table = entry(0, 0, 0) + (old + new if old_first else new + old)
    versions = b"\0\0" + (old_version + new_version if old_first else new_version + old_version)
    found: dict[str, Symbol] = {}
    others: list[tuple[str, Symbol]] = []
    _read_symbols(table, STRINGS, found, others, versions)
    assert found["memcpy"] == Symbol(0x9BE70, 40, True, True, True)
    assert others == []  # an old version is no other function (clones.py would break there)


def test_an_ifunc_alone_is_a_function_and_an_old_version_alone_is_kept() -> None:
    table = entry(0, 0, 0) + entry(STRLEN, IFUNC, 0x9F1C0) + entry(MEMCPY, FUNC, 0x1000)
    found: dict[str, Symbol] = {}
    _read_symbols(table, STRINGS, found, [], b"\0\0" + struct.pack("<HH", 2, 0x8002))
    assert found["strlen"].is_function and found["strlen"].ifunc
    assert found["memcpy"].address == 0x1000 and not found["memcpy"].ifunc


def test_versions_shorter_than_the_table_are_no_error() -> None:
    found: dict[str, Symbol] = {}
    _read_symbols(entry(0, 0, 0) + entry(STRLEN, FUNC, 0x10), STRINGS, found, [], b"\x01")
    assert found["strlen"].address == 0x10
