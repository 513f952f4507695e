"""The program's ELF file: its symbols, and where it is loaded in the process (load bias)."""

from __future__ import annotations

import os
from typing import BinaryIO

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.sections import SymbolTableSection

from sampler import procfs
from sampler.errors import ProcessNotFound, UnsupportedTarget


class Program:
    """The executable of a running process, opened through /proc/PID/exe
    (which also works for a target in another mount namespace)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.path = procfs.exe_path(pid)
        try:
            self._file: BinaryIO = open(f"/proc/{pid}/exe", "rb")  # noqa: SIM115 (lives with Program)
        except (FileNotFoundError, ProcessLookupError):
            raise ProcessNotFound(f"no process with PID {pid}") from None
        try:
            self.elf = ELFFile(self._file)
        except ELFError:
            self._file.close()
            raise UnsupportedTarget(f"process {pid} does not run an ELF program") from None
        self._symbols: dict[str, int] | None = None
        self.bias = self._load_bias()

    def close(self) -> None:
        self._file.close()

    @property
    def has_symbols(self) -> bool:
        return self.elf.get_section_by_name(".symtab") is not None

    @property
    def has_dwarf(self) -> bool:
        return self.elf.has_dwarf_info() and self.elf.get_section_by_name(".debug_info") is not None

    def symbol(self, name: str) -> int | None:
        """Run-time address of a function or object symbol, or None."""
        if self._symbols is None:
            self._symbols = {}
            for section_name in (".dynsym", ".symtab"):
                section = self.elf.get_section_by_name(section_name)
                if not isinstance(section, SymbolTableSection):
                    continue
                for sym in section.iter_symbols():
                    if sym["st_info"]["type"] in ("STT_FUNC", "STT_OBJECT") and sym["st_value"]:
                        self._symbols[sym.name] = sym["st_value"]
        value = self._symbols.get(name)
        return None if value is None else value + self.bias

    def library_symbol(self, name: str) -> tuple[int, str] | None:
        """(run-time address, library path) of a function in a shared library the process
        has mapped, from its dynamic symbol table; None when no library has it."""
        for path, start in self._libraries():
            try:
                with open(procfs.in_root(self.pid, path), "rb") as f:
                    elf = ELFFile(f)
                    section = elf.get_section_by_name(".dynsym")
                    if not isinstance(section, SymbolTableSection):
                        continue
                    symbols = section.get_symbol_by_name(name) or []
                    for sym in symbols:
                        if sym["st_info"]["type"] == "STT_FUNC" and sym["st_value"]:
                            first = min(seg["p_vaddr"] for seg in elf.iter_segments()
                                        if seg["p_type"] == "PT_LOAD")
                            return sym["st_value"] + start - (first & ~0xFFF), path
            except (OSError, ELFError):
                continue
        return None

    def _libraries(self) -> list[tuple[str, int]]:
        """Shared objects mapped by the process (not the program itself): path, start."""
        found: list[tuple[str, int]] = []
        seen = {self.path}
        for mapping in procfs.maps(self.pid):
            path = mapping.path
            if mapping.offset == 0 and path.startswith("/") and path not in seen and ".so" in path:
                seen.add(path)
                found.append((path, mapping.start))
        return found

    def _load_bias(self) -> int:
        """0 for a fixed-address executable; for a PIE, where the kernel put it."""
        if self.elf["e_type"] != "ET_DYN":
            return 0
        first_vaddr = min(seg["p_vaddr"] for seg in self.elf.iter_segments() if seg["p_type"] == "PT_LOAD")
        inode = os.stat(f"/proc/{self.pid}/exe").st_ino
        for mapping in procfs.maps(self.pid):
            if mapping.inode == inode and mapping.offset == 0:
                return mapping.start - (first_vaddr & ~0xFFF)
        raise UnsupportedTarget(f"cannot find where {self.path} is mapped in process {self.pid}")
