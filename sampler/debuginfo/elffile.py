"""One ELF file, read defensively: its build-id, .gnu_debuglink, symbols and DWARF presence.

Every file here may be corrupted or truncated (debug files are input sampler does not
control, and it often runs as root): reading one never raises anything but BadFile.
"""

from __future__ import annotations

import functools
import os
import struct
import time
import zlib
from dataclasses import dataclass
from typing import BinaryIO

from elftools.elf.elffile import ELFFile
from elftools.elf.sections import NoteSection, SymbolTableSection

from sampler.debuginfo.gopclntab import BadTable, PcLineTable
from sampler.debuginfo.untrusted import converting
from sampler.target import files

MAX_SECTION = 2 << 30
"""The largest section sampler reads (2 GiB): pyelftools holds each whole in memory."""


class BadFile(Exception):
    """Not an ELF file, or one that cannot be read."""


_guarded = converting(BadFile)
_SHARED: dict[tuple[int, int, int, int], ElfFile] = {}
"""The files open_shared opened and not closed yet, by device, inode, size and change time."""


def open_shared(path: str, shown_as: str | None = None) -> ElfFile:
    """``path`` opened and parsed, or the ElfFile already open for the same file (device, inode,
    size, change time): the processes of one program (--exe, a server's workers mapped at other
    addresses) share one parse and its symbol table. Each call's close() gives its share back."""
    try:
        fd = files.open_file(path)
    except OSError as e:
        raise BadFile(e.strerror or str(e)) from None
    try:
        info = os.fstat(fd)
    except OSError as e:
        os.close(fd)
        raise BadFile(e.strerror or str(e)) from None
    key = (info.st_dev, info.st_ino, info.st_size, info.st_ctime_ns)
    known = _SHARED.get(key)
    if known is not None:
        os.close(fd)
        known._shares += 1
        return known
    opened = ElfFile(path, shown_as, fd=fd)
    opened._key = key
    _SHARED[key] = opened
    return opened


@dataclass(frozen=True)
class Symbol:
    address: int
    """File address."""
    size: int
    is_function: bool
    exported: bool = True
    """Not a local (static) symbol: one that a copy relocation can move into the program."""
    ifunc: bool = False
    """An STT_GNU_IFUNC: its address is the resolver's, which returns, once per process, the
    implementation calls go to (ifunc.py)."""


class ElfFile:
    """An opened ELF file (closed with close())."""

    def __init__(self, path: str, shown_as: str | None = None, fd: int | None = None) -> None:
        self.path = path
        """Where it was opened (may be under /proc/PID/root)."""
        self.shown_as = shown_as or path
        self._key: tuple[int, int, int, int] | None = None
        self._shares = 1
        self._first_load: int | None = None
        try:
            # inside the target's root
            self._file: BinaryIO = os.fdopen(files.open_file(path) if fd is None else fd, "rb")
        except OSError as e:
            raise BadFile(e.strerror or str(e)) from None
        try:
            self.elf = self._open()
        except BadFile:
            self._file.close()
            raise
        self._symbols: dict[str, Symbol] | None = None
        self.shadowed: list[tuple[str, Symbol]] = []
        """Symbols that another of the same name displaced in ``symbols()`` (static functions
        of one name in two files: their clones are all breakpoints of that name)."""
        self._go_table: PcLineTable | bool | None = False

    @_guarded
    def _open(self) -> ELFFile:
        elf = ELFFile(self._file)
        end = self._file.seek(0, 2)
        for section in elf.iter_sections():  # what a section claims is checked before any is read
            if section["sh_type"] not in ("SHT_NOBITS", "SHT_NULL") and \
                    (section["sh_offset"] + section["sh_size"] > end or section["sh_size"] > MAX_SECTION):
                raise BadFile(f"its section {section.name} claims {section['sh_size']} bytes at "
                              f"{section['sh_offset']:#x}, past its end or over {MAX_SECTION >> 20} MiB")
        return elf

    def close(self) -> None:
        if self._key is not None:  # shared (open_shared): the last to close it closes it
            self._shares -= 1
            if self._shares > 0:
                return
            _SHARED.pop(self._key, None)
        self._file.close()

    def __enter__(self) -> ElfFile:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def fileno(self) -> int:
        return self._file.fileno()

    @functools.cached_property
    def build_id(self) -> bytes | None:
        try:
            return self._build_id()
        except BadFile:
            return None

    @_guarded
    def _build_id(self) -> bytes | None:
        for section in self.elf.iter_sections():
            if isinstance(section, NoteSection) and section["sh_type"] == "SHT_NOTE":
                for note in section.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID" and isinstance(note["n_desc"], str):
                        return bytes.fromhex(note["n_desc"])
        return None

    @_guarded
    def debuglink(self) -> tuple[str, int] | None:
        """(file name, CRC-32) from .gnu_debuglink, or None."""
        section = self.elf.get_section_by_name(".gnu_debuglink")
        if section is None or section["sh_type"] == "SHT_NOBITS":
            return None
        data = section.data()
        name, _, _ = data.partition(b"\0")
        if not name or len(data) < 8 or "/" in name.decode("utf-8", "replace"):
            return None
        return name.decode("utf-8", "surrogateescape"), int.from_bytes(data[-4:], "little")

    @_guarded
    def section_names(self) -> set[str]:
        return {section.name for section in self.elf.iter_sections()}

    @functools.cached_property
    def has_dwarf(self) -> bool:
        try:
            section = self.elf.get_section_by_name(".debug_info") or self.elf.get_section_by_name(".zdebug_info")
            return section is not None and section["sh_type"] != "SHT_NOBITS" and section["sh_size"] > 0
        except Exception:  # a corrupted section table: no DWARF to read
            return False

    @functools.cached_property
    def has_symtab(self) -> bool:
        """A full symbol table, not only the dynamic one (what strip takes out)."""
        try:
            section = self.elf.get_section_by_name(".symtab")
            return section is not None and section["sh_type"] == "SHT_SYMTAB"
        except Exception:  # a corrupted section table
            return False

    def first_load_address(self) -> int:
        if self._first_load is None:
            self._first_load = self._read_first_load()
        return self._first_load

    @_guarded
    def _read_first_load(self) -> int:
        return min(seg["p_vaddr"] for seg in self.elf.iter_segments() if seg["p_type"] == "PT_LOAD")

    def byte_at(self, vaddr: int) -> int | None:
        """The file's byte that a loadable segment maps at ``vaddr`` (None: no segment's file bytes hold it)."""
        data = self.bytes_at(vaddr, 1)
        return data[0] if data else None

    def bytes_at(self, vaddr: int, size: int) -> bytes | None:
        """The ``size`` bytes a loadable segment maps from the file at ``vaddr`` (the program's code as it
        was loaded, whatever a debugger wrote since); None when one segment's file bytes do not hold
        them all."""
        try:
            return self._bytes_at(vaddr, size)
        except (BadFile, OSError):
            return None

    @_guarded
    def _bytes_at(self, vaddr: int, size: int) -> bytes | None:
        for seg in self.elf.iter_segments():
            start, end = seg["p_vaddr"], seg["p_vaddr"] + seg["p_filesz"]
            if seg["p_type"] == "PT_LOAD" and start <= vaddr and vaddr + size <= end:
                data = os.pread(self._file.fileno(), size, seg["p_offset"] + vaddr - seg["p_vaddr"])
                return data if len(data) == size else None
        return None

    def writable(self, vaddr: int, size: int) -> bool:
        """A loadable segment the program may write (data, .bss too) holds the ``size`` bytes at ``vaddr``."""
        try:
            return self._writable(vaddr, size)
        except BadFile:
            return False

    @_guarded
    def _writable(self, vaddr: int, size: int) -> bool:
        return any(seg["p_type"] == "PT_LOAD" and seg["p_flags"] & 2 and seg["p_vaddr"] <= vaddr
                   and vaddr + size <= seg["p_vaddr"] + seg["p_memsz"] for seg in self.elf.iter_segments())

    @_guarded
    def is_position_independent(self) -> bool:
        return bool(self.elf["e_type"] == "ET_DYN")

    @_guarded
    def symbols(self) -> dict[str, Symbol]:
        """Functions and objects with an address, from .symtab and .dynsym (.symtab wins)."""
        if self._symbols is None:
            found: dict[str, Symbol] = {}
            for name in (".dynsym", ".symtab"):
                section = self.elf.get_section_by_name(name)
                if not isinstance(section, SymbolTableSection) or section["sh_type"] == "SHT_NOBITS":
                    continue
                strings = self.elf.get_section(section["sh_link"])
                if self.elf.elfclass == 64 and self.elf.little_endian and strings["sh_type"] == "SHT_STRTAB":
                    _read_symbols(section.data(), strings.data(), found, self.shadowed,
                                  self._hidden_versions() if name == ".dynsym" else b"")
                    continue
                for sym in section.iter_symbols():  # other ELF classes: pyelftools' slower parse
                    kind = sym["st_info"]["type"]
                    if kind in ("STT_FUNC", "STT_OBJECT", "STT_LOOS") and sym["st_value"] \
                            and sym["st_shndx"] != "SHN_UNDEF":  # STT_LOOS: STT_GNU_IFUNC's number
                        found[sym.name] = Symbol(sym["st_value"], sym["st_size"], kind != "STT_OBJECT",
                                                 sym["st_info"]["bind"] != "STB_LOCAL", kind == "STT_LOOS")
            if self.elf.get_section_by_name(".symtab") is None:  # stripped Go: its own table
                table = self.go_table()
                for function in table.functions() if table is not None else ():
                    found.setdefault(function.name, Symbol(function.entry, function.end - function.entry, True))
            self._symbols = found
        return self._symbols

    def _hidden_versions(self) -> bytes:
        """.gnu.version: a 16-bit entry per .dynsym symbol, 0x8000 set on a version that is not
        the default (glibc's memcpy@GLIBC_2.2.5 beside memcpy@@GLIBC_2.14); b'' without one."""
        try:
            section = self.elf.get_section_by_name(".gnu.version")
            if section is None or section["sh_type"] == "SHT_NOBITS" or section["sh_size"] > MAX_SECTION:
                return b""
            return bytes(section.data())
        except Exception:  # a hostile file's versions: the symbols without them (every version in)
            return b""

    @_guarded
    def go_table(self) -> PcLineTable | None:
        """Go's function table (.gopclntab), None when the file has none; BadFile when it
        cannot be read."""
        if self._go_table is False:
            section = self.elf.get_section_by_name(".gopclntab")
            text = self.text_section()
            if section is None or section["sh_type"] == "SHT_NOBITS":
                self._go_table = None
            else:
                try:
                    self._go_table = PcLineTable(section.data(), text[0] if text else 0)
                except BadTable as e:
                    raise BadFile(str(e)) from None
        assert self._go_table is not True
        return self._go_table

    @_guarded
    def section_bytes(self, name: str, content: bool = True) -> tuple[int, bytes] | None:
        """(address, bytes) of a section by name (bytes b'' unless ``content``); None when the file
        has none with file bytes."""
        section = self.elf.get_section_by_name(name)
        if section is None or (content and section["sh_type"] == "SHT_NOBITS"):
            return None
        return section["sh_addr"], bytes(section.data()) if content else b""

    @_guarded
    def code_sections(self) -> list[tuple[int, bytes]]:
        """(address, bytes) of each section the program runs (SHF_EXECINSTR, with file bytes)."""
        return [(section["sh_addr"], bytes(section.data())) for section in self.elf.iter_sections()
                if section["sh_flags"] & SHF_EXECINSTR and section["sh_type"] != "SHT_NOBITS"]

    @_guarded
    def text_section(self) -> tuple[int, int] | None:
        """(address, size) of .text, to tell whether two files are builds of the same program."""
        section = self.elf.get_section_by_name(".text")
        return None if section is None else (section["sh_addr"], section["sh_size"])


SHF_EXECINSTR = 0x4
_ELF64_SYM = struct.Struct("<IBBHQQ")
_STT_OBJECT, _STT_FUNC, _STT_GNU_IFUNC = 1, 2, 10
_HIDDEN = 0x8000
"""A .gnu.version entry's bit for a version that is not the symbol's default."""


def _read_symbols(table: bytes, strings: bytes, into: dict[str, Symbol],
                  others: list[tuple[str, Symbol]] | None = None, versions: bytes = b"") -> None:
    """Elf64_Sym entries, read directly (pyelftools takes a second for libc's 10,000).
    ``others``: the symbols a later one of the same name displaced (two static functions
    of one name in two files). ``versions``: .dynsym's .gnu.version; a name's default
    version wins over its old ones, whatever their order."""
    usable = len(table) - len(table) % _ELF64_SYM.size
    hidden: set[str] = set()
    for index, (name, info, _other, section, value, size) in enumerate(_ELF64_SYM.iter_unpack(table[:usable])):
        kind = info & 0xF
        if kind not in (_STT_OBJECT, _STT_FUNC, _STT_GNU_IFUNC) or not value or section == 0 \
                or name >= len(strings):
            continue
        end = strings.find(b"\0", name)
        text = strings[name:end if end >= 0 else len(strings)].decode("utf-8", "replace")
        if text:
            symbol = Symbol(value, size, kind != _STT_OBJECT, info >> 4 != 0, kind == _STT_GNU_IFUNC)
            old = 2 * index + 2 <= len(versions) and versions[2 * index + 1] << 8 & _HIDDEN != 0
            displaced = into.get(text)
            if old and displaced is not None and text not in hidden:  # the default is in already
                continue
            if others is not None and displaced is not None and displaced.address != value \
                    and text not in hidden:  # (an old version displaced is no other function)
                others.append((text, displaced))
            into[text] = symbol
            if old:
                hidden.add(text)
            else:
                hidden.discard(text)


CRC_SECONDS = 5.0
"""How long the CRC of one .gnu_debuglink candidate may take (a 1 GB debug file: under 1 s)."""


def crc32(path: str, seconds: float = CRC_SECONDS) -> int:
    """The CRC-32 .gnu_debuglink records (zlib's); OSError for what files.open_file refuses
    and TimeoutError past ``seconds`` (a hostile debuglink can name a huge file)."""
    value = 0
    deadline = time.monotonic() + seconds
    with os.fdopen(files.open_file(path), "rb") as f:
        while chunk := f.read(1 << 20):
            value = zlib.crc32(chunk, value)
            if time.monotonic() > deadline:
                raise TimeoutError(0, f"its CRC took over {seconds:g} s")
    return value
