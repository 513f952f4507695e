"""Where a call of an IFUNC goes in one process.

glibc's memcpy, strlen, strchr and their kin are STT_GNU_IFUNC symbols: the symbol's
address is a resolver, which the dynamic loader runs once per process and whose answer,
the implementation for this CPU (``__memmove_avx_unaligned_erms``), is what every call
reaches. A breakpoint at the symbol would catch the loader's one call of the resolver.

Each resolver's answer is in the process's memory: the library's own calls go through its
R_X86_64_IRELATIVE slots (the loader writes the answer into each at start-up, addend: the
resolver), and other modules' through their GOT slots for the name (JUMP_SLOT or GLOB_DAT,
once bound). Both are read here; the file says where the slots are, the process what they
hold.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sampler.debuginfo.elffile import MAX_SECTION, BadFile, ElfFile
from sampler.debuginfo.modules import Module, Modules
from sampler.debuginfo.untrusted import converting
from sampler.errors import LocationNotFound

T = TypeVar("T")
_RELA = struct.Struct("<QQq")
_X86_64_GLOB_DAT, _X86_64_JUMP_SLOT, _X86_64_IRELATIVE = 6, 7, 37
_MAX_RELOCATIONS = 16 << 20
"""No more of a file's relocation sections is read than this (libc's: 40 kB)."""


def irelative_slots(file: ElfFile, resolver: int) -> list[int]:
    """File addresses of the slots the loader fills with ``resolver``'s answer."""
    return [offset for offset, kind, _, addend in _relocations(file)
            if kind == _X86_64_IRELATIVE and addend == resolver]


def named_slots(file: ElfFile, name: str) -> list[int]:
    """File addresses of the GOT slots that hold the address of the symbol ``name`` once bound."""
    wanted = _dynamic_indexes(file, name)
    return [offset for offset, kind, index, _ in _relocations(file)
            if kind in (_X86_64_JUMP_SLOT, _X86_64_GLOB_DAT) and index in wanted]


def answer(slots: list[int], bias: int, read: Callable[[int, int], bytes | None],
           within: Callable[[int], bool]) -> int | None:
    """The address the slots hold (run-time), when they agree and it lies where ``within``
    says code of the library is; None when none holds one yet (a lazy binding not made)."""
    found = set()
    for slot in slots:
        data = read(slot + bias, 8)
        if data is not None and len(data) == 8:
            value = int.from_bytes(data, "little")
            if within(value):
                found.add(value)
    return found.pop() if len(found) == 1 else None


_SHF_COMPRESSED = 0x800
_guarded = converting(BadFile)


def _or_none(find: Callable[[ElfFile, T], list[int]], file: ElfFile, key: T) -> list[int]:
    """``find``'s slots; none when the file's relocations cannot be read (a hostile file)."""
    try:
        return find(file, key)
    except BadFile:
        return []



@functools.lru_cache(maxsize=16)
@_guarded
def _relocations(file: ElfFile) -> list[tuple[int, int, int, int]]:
    """(offset, type, symbol index, addend) of every RELA entry of an x86-64 file (BadFile
    when the file's sections cannot be read)."""
    elf = file.elf
    if elf["e_machine"] != "EM_X86_64" or elf.elfclass != 64 or not elf.little_endian:
        return []
    found = []
    total = 0
    for section in elf.iter_sections():
        if section["sh_type"] != "SHT_RELA" or section["sh_size"] > MAX_SECTION \
                or section["sh_flags"] & _SHF_COMPRESSED:  # (a loader reads none compressed)
            continue
        total += section["sh_size"]
        if total > _MAX_RELOCATIONS:
            break
        data = section.data()
        usable = len(data) - len(data) % _RELA.size
        found += [(offset, info & 0xFFFFFFFF, info >> 32, addend)
                  for offset, info, addend in _RELA.iter_unpack(data[:usable])]
    return found


@_guarded
def _dynamic_indexes(file: ElfFile, name: str) -> set[int]:
    """The .dynsym indexes of the symbols called ``name``."""
    section = file.elf.get_section_by_name(".dynsym")
    if section is None or section["sh_type"] == "SHT_NOBITS" or section["sh_flags"] & _SHF_COMPRESSED:
        return set()
    strings = file.elf.get_section(section["sh_link"])
    if strings["sh_type"] != "SHT_STRTAB":
        return set()
    table, text = section.data(), strings.data()
    wanted = name.encode() + b"\0"
    size = 24
    return {index for index in range(len(table) // size)
            if text[(at := int.from_bytes(table[index * size:index * size + 4], "little")):at + len(wanted)]
            == wanted}


@dataclass(frozen=True)
class Choice:
    address: int
    """Run-time address of the implementation calls reach."""
    name: str
    """Its symbol ('' when no symbol table names it)."""
    also: tuple[str, ...]
    """The module's other IFUNCs that chose the same code (memmove beside memcpy)."""


def chosen(modules: Modules, module: Module, name: str, resolver: int) -> Choice:
    """Where the process's calls of ``module``'s IFUNC ``name`` (resolver at file address
    ``resolver``) go; LocationNotFound when no slot of the process holds the choice."""
    mapped = modules.containing

    def within(address: int) -> bool:
        return mapped(address) is module

    address = answer(_or_none(irelative_slots, module.file, resolver), module.bias, modules.code, within)
    if address is None:
        for other in modules.everything():
            address = answer(_or_none(named_slots, other.file, name), other.bias, modules.code, within)
            if address is not None:
                break
    if address is None:
        candidates = sorted(n for n, symbol in module.function_symbols() if f"{name}_" in n and not symbol.ifunc)
        raise LocationNotFound(
            f"{name} in {module.name} is an IFUNC (its implementation is chosen for the CPU as the process "
            "starts) and no slot of this process holds the choice yet",
            f"give an implementation by name: {', '.join(candidates[:6])}" if candidates else
            "give the implementation's address as *ADDR")
    names = sorted({n for n, symbol in module.function_symbols()
                    if symbol.address + module.bias == address and not symbol.ifunc})
    preferred = [n for n in names if f"_{name}_" in n] or names
    also = sorted({n for n, symbol in module.function_symbols()
                   if symbol.ifunc and symbol.address != resolver and not n.startswith("_") and "@" not in n
                   and answer(_or_none(irelative_slots, module.file, symbol.address), module.bias, modules.code,
                              within)
                   == address})
    return Choice(address, preferred[0] if preferred else "", tuple(also))
