"""What a process has mapped, as modules: the executable and each shared library, with
its load bias, build-id, symbols and DWARF (found and parsed only when first needed).
gdb calls these objfiles, Delve images.
"""

from __future__ import annotations

import bisect
import errno
import os
import posixpath

from sampler.debuginfo import usdt
from sampler.debuginfo.branches import Branches
from sampler.debuginfo.cfi import CallFrames
from sampler.debuginfo.debugfiles import DebugFinder, Source
from sampler.debuginfo.demangle import demangle, last_component, qualified, signature
from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.elffile import BadFile, ElfFile, Symbol, open_shared
from sampler.debuginfo.locations import REGISTERS
from sampler.errors import LocationNotFound, ProcessNotFound, UnsupportedTarget
from sampler.target import procfs


class Module:
    def __init__(self, file: ElfFile, path: str, start: int, is_main: bool, finder: DebugFinder,
                 symbols_file: str | None = None) -> None:
        self.file = file
        self.path = path
        """As the process maps it."""
        self.name = posixpath.basename(path)
        self.is_main = is_main
        self.finder = finder
        self.symbols_file = symbols_file
        """--symbols FILE, for the executable."""
        try:
            self.bias = start - (file.first_load_address() & ~0xFFF) if file.is_position_independent() else 0
        except (BadFile, ValueError):
            raise UnsupportedTarget(f"{path}: cannot read its program headers") from None
        self._source: Source | None = None
        self._looked_local = False
        self._looked_remote = False
        self._debug: Debug | None = None
        self._debug_failed = False
        self.notes: list[str] = []
        """What was tried and not used for its debug info, for the error line that may follow."""
        self._functions: tuple[list[int], list[int]] | None = None
        self._mangled: list[tuple[str, str, int]] | None = None
        self._frames: CallFrames | None = None
        self._usdt: list[usdt.Probe] | None = None
        self._branches: Branches | None = None

    def __repr__(self) -> str:
        return f"Module({self.path!r}, bias={self.bias:#x})"

    # -- where its debug info is --------------------------------------------

    def _local(self) -> Source | None:
        if not self._looked_local:
            self._looked_local = True
            if self.is_main and self.symbols_file is not None:
                self._source = self.finder.symbols_file(self.symbols_file, self.file)
            else:
                self._source = self.finder.local(self.file, self.path, self.notes)
        return self._source

    @property
    def has_debug_file(self) -> bool:
        """Debug information found on disk (nothing parsed yet)."""
        return self._local() is not None

    def debug(self, remote: bool = True) -> Debug | None:
        """This module's DWARF, or None. ``remote``: ask debuginfod when no file on disk has it."""
        if self._debug is not None or self._debug_failed:
            return self._debug
        source = self._local()
        if source is None and remote and not self._looked_remote:
            self._looked_remote = True
            source = self._source = self.finder.remote(self.file, self.name, self.notes)
        if source is None:
            return None
        cfi = None if source.file is self.file else self.file.elf
        try:
            self._debug = Debug(source.file.elf, self.bias, cfi)
        except Exception as e:  # a corrupted file: the module goes on without DWARF
            self.drop_debug(Malformed(f"{type(e).__name__}: {e}"[:200]))
            return None
        self.finder.say(f"{self.name}: debug info {source.how}")
        return self._debug

    def drop_debug(self, error: Malformed) -> None:
        """Corrupted DWARF: go on with the symbols only (an error line that follows says why)."""
        if not self._debug_failed:
            self.notes.append(f"its debug info cannot be read ({error})")
        self._debug, self._debug_failed = None, True

    def lacking_debug(self) -> str | None:
        """Why this module has no DWARF, for an error line; None when it has (or was not asked)."""
        if self._debug is not None or not (self._looked_local or self._looked_remote):
            return None
        tried = f" ({'; '.join(self.notes)})" if self.notes else ""
        if self._debug_failed:
            return f"the debug info of {self.name} cannot be read{tried}"
        return f"no debug info was found for {self.name}{tried}"

    # -- symbols ---------------------------------------------------------------

    def _files(self) -> list[ElfFile]:
        """The loaded file, then its debug file when one was found (it may add .symtab)."""
        source = self._local() if not self._looked_remote else self._source
        return [self.file] if source is None or source.file is self.file else [self.file, source.file]

    def symbol_files(self) -> list[ElfFile]:
        """The files its symbols come from: the loaded one, then its debug file's when one was found."""
        return self._files()

    def symbol(self, name: str) -> Symbol | None:
        """A function or object by name (file address): the file's own symbols first, then
        its debug file's (read only when the first have no such name)."""
        for file in self._files():
            try:
                found = file.symbols().get(name)
            except BadFile as e:
                self.notes.append(f"its symbol table cannot be read ({e})")
                continue
            if found is not None:
                return found
        return None

    def has_symtab(self) -> bool:
        """A full symbol table in the file or its debug file (a stripped file has none)."""
        return any(file.has_symtab for file in self._files())

    def _symbols_of(self, file: ElfFile) -> dict[str, Symbol]:
        try:
            return file.symbols()
        except BadFile:
            return {}

    def function_symbols(self) -> list[tuple[str, Symbol]]:
        """Every function symbol of its symbol tables, by name (file addresses)."""
        found = []
        for file in self._files():
            found += [(name, symbol) for name, symbol in self._symbols_of(file).items() if symbol.is_function]
            found += [(name, symbol) for name, symbol in file.shadowed if symbol.is_function]
        return found

    def function_symbol(self, name: str) -> int | None:
        symbol = self.symbol(name)
        return symbol.address if symbol is not None and symbol.is_function else None

    def object_symbol(self, name: str) -> Symbol | None:
        symbol = self.symbol(name)
        return symbol if symbol is not None and not symbol.is_function else None

    def mangled_functions(self) -> list[tuple[str, str, int]]:
        """C++ and Rust functions: (qualified name, signature, file address), demangled once."""
        if self._mangled is None:
            found = []
            for file in self._files():
                for name, symbol in self._symbols_of(file).items():  # (a clone, f.isra.0: clones.py)
                    if symbol.is_function and name.startswith("_Z") and "." not in name:
                        text = demangle(name)
                        if text is not None:
                            found.append((qualified(text), signature(text), symbol.address))
            self._mangled = found
        return self._mangled

    def function_names(self) -> set[str]:
        """Every function name its symbol tables give, C++ and Rust ones demangled (qualified)."""
        names = {name for file in self._files() for name, symbol in self._symbols_of(file).items()
                 if symbol.is_function and not name.startswith("_Z")}
        return names | {name for name, _, _ in self.mangled_functions()}

    def functions_matching(self, query: str, bare: bool) -> dict[int, str]:
        """C++/Rust functions a user's name means, by file address -> signature: a full
        signature (``rb::Ring::read(unsigned long*)``), a qualified name (``rb::Ring::read``),
        or with ``bare`` a last component (``read``)."""
        wanted = " ".join(query.split())
        found: dict[int, str] = {}
        for name, full, address in self.mangled_functions():
            if "(" in wanted:
                hit = full.replace(" ", "") == wanted.replace(" ", "")
            elif bare and "::" not in wanted:
                hit = last_component(name) == wanted
            else:
                hit = name == wanted
            if hit:
                found.setdefault(address, full)
        return found

    def usdt(self) -> list[usdt.Probe]:
        """Its USDT probe sites (.note.stapsdt), read once; [] when its notes cannot be read (said)."""
        if self._usdt is None:
            try:
                self._usdt = usdt.probes(self.file)
                if len(self._usdt) >= usdt.MAX_PROBES:
                    self.finder.warn(f"{self.name}: only its first {usdt.MAX_PROBES} USDT notes are read")
            except BadFile as e:
                self.finder.warn(f"{self.name}: its USDT notes cannot be read ({e})")
                self._usdt = []
        return self._usdt

    def function_start(self, address: int) -> int | None:
        """File address where the function holding ADDRESS (a file address) starts: from a
        function symbol that covers it, else from the unwind entry (.eh_frame) that does."""
        span = self.function_span(address)
        return span[0] if span is not None else None

    def function_span(self, address: int) -> tuple[int, int] | None:
        """(start, size) in file addresses of the function holding ADDRESS: a function symbol's
        that covers it, else the unwind entry's (.eh_frame); size 0 when a symbol gives none."""
        if self._functions is None:
            spans = sorted({(symbol.address, symbol.size) for file in self._files()
                            for symbol in self._symbols_of(file).values() if symbol.is_function})
            self._functions = [start for start, _ in spans], [size for _, size in spans]
        starts, sizes = self._functions
        at = bisect.bisect_right(starts, address) - 1  # of aliases at one address, the largest
        if at >= 0 and address < starts[at] + max(sizes[at], 1):
            return starts[at], sizes[at]
        if self._frames is None:
            self._frames = CallFrames(self.file.elf, None)
        try:
            span = self._frames.function_range(address)
        except Exception:  # corrupted unwind tables: no start known
            span = None
        return (span[0], span[1] - span[0]) if span is not None else None

    def branch_into(self, start: int, end: int) -> int | None:
        """Where a direct branch of the module's code lands strictly between ``start`` and ``end`` (file
        addresses: the bytes a jump would take past its first), the first; None when none does. BadFile
        when its code cannot be read (the module's sweep, made once: branches.py)."""
        if self._branches is None:
            sections = self.file.code_sections()
            if not sections:  # (no section headers: what branches where is not known)
                raise BadFile("it has no section of code to look at")
            self._branches = Branches(sections, self.function_span)
        return self._branches.inside(start, end)

    def cfa_rule(self, address: int) -> tuple[str, int] | None:
        """(register, offset) of the canonical frame address at ADDRESS (a file address): from the
        loaded file's .eh_frame, else its DWARF's .debug_frame (Go writes only that); None when
        neither covers it, or the rule is not a register plus an offset."""
        if self._frames is None:
            self._frames = CallFrames(self.file.elf, None)
        try:
            rule = self._frames.rule(address)
            if rule is None:
                debug = self.debug(remote=False)
                rule = debug.cfa_rule(address) if debug is not None else None
            if rule is None:
                return self._go_cfa_rule(address)
        except Exception:  # corrupted unwind tables (the target's): no rule
            return None
        if not 0 <= rule[0] < len(REGISTERS):
            return None
        return REGISTERS[rule[0]], rule[1]

    def _go_cfa_rule(self, address: int) -> tuple[str, int] | None:
        """A Go program with no .debug_frame (stripped: Debian's prometheus-node-exporter): the frame from Go's
        own table (pcsp: the return address at rsp + the delta, the frame's address 8 above it); None when the
        file has no such table or it does not cover ADDRESS."""
        table = self.file.go_table()
        function = table.function_at(address) if table is not None else None
        delta = table.sp_delta(function, address) if table is not None and function is not None else None
        if delta is None or not 0 <= delta < 1 << 30:
            return None
        return "rsp", delta + 8

    def close(self) -> None:
        if self._source is not None and self._source.file is not self.file:
            self._source.file.close()
        self.file.close()


MAX_LIBRARIES = 512
"""Shared objects sampler opens per process (a large C++ service maps under 300; each holds a
file descriptor for the life of the run, and a hostile process can map thousands)."""


class Modules:
    """The executable and the libraries of one process; ``refresh()`` finds those loaded since."""

    def __init__(self, pid: int, finder: DebugFinder, symbols_file: str | None = None) -> None:
        self.pid = pid
        self.finder = finder
        path = procfs.exe_path(pid)
        try:
            program = open_shared(f"/proc/{pid}/exe", shown_as=path)
        except BadFile as e:
            if not os.path.exists(f"/proc/{pid}"):
                raise ProcessNotFound(f"no process with PID {pid}") from None
            raise UnsupportedTarget(f"process {pid} runs a program sampler does not read as ELF ({e})") from None
        self._mapped: dict[str, Module] = {}
        self._capped = False
        """Said that libraries past MAX_LIBRARIES were passed over."""
        self._skipped: set[str] = set()
        try:
            inode = os.fstat(program.fileno()).st_ino
            start = min((m.start for m in procfs.maps(pid) if m.inode == inode and m.offset == 0),
                        default=None)
            if start is None:
                raise UnsupportedTarget(f"cannot find where {path} is mapped in process {pid}")
            self.main = Module(program, path, start, True, finder, symbols_file)
            if symbols_file is not None:
                self.main.has_debug_file  # noqa: B018 (checks --symbols now: a clear error before anything)
        except BaseException:
            program.close()
            raise
        try:
            self.refresh()
        except BaseException:
            self.close()
            raise

    def move_to(self, pid: int) -> None:
        """Another process of the same program, mapped at the same addresses (a fork's sibling),
        holds these modules now: the one they were read from ended. What is looked up from now on
        (a library loaded since, a debug file) is looked up in ``pid``."""
        self.pid = pid
        self.finder.move_to(pid)

    def mapped_alike(self, pid: int) -> bool:
        """Process ``pid`` maps the same files at the same addresses as the one these modules were
        read from (processes forked from one parent do): they serve it as they are."""
        return _layout(pid) == _layout(self.pid)

    @property
    def libraries(self) -> list[Module]:
        return list(self._mapped.values())

    def everything(self) -> list[Module]:
        return [self.main, *self._mapped.values()]

    def refresh(self) -> list[Module]:
        """Open the libraries mapped since the last look (dlopen); returns the new ones."""
        first: dict[str, procfs.Mapping] = {}
        executable: set[str] = set()
        for mapping in procfs.maps(self.pid):
            path = mapping.path
            if not path.startswith("/") or path == self.main.path:
                continue
            if mapping.offset == 0 and path not in first:
                first[path] = mapping
            if mapping.executable:
                executable.add(path)
        new = []
        candidates = [path for path in first if path not in self._mapped and path not in self._skipped
                      and path in executable]
        room = max(MAX_LIBRARIES - len(self._mapped), 0)
        # the highest addresses were mapped first (mmap goes down): the loader's libraries (libc,
        # ld.so) are kept before whatever a process mapped in the thousands since
        kept = set(sorted(candidates, key=lambda path: -first[path].start)[:room])
        for path in candidates:
            mapping = first[path]
            if path not in kept:  # each module holds a file open: thousands would run sampler out
                self._skipped.add(path)
                if not self._capped:
                    self._capped = True
                    self.finder.warn(f"the process maps over {MAX_LIBRARIES} executable files: sampler reads the "
                                     f"{MAX_LIBRARIES} mapped first, the others' symbols are not used")
                continue
            module = self._open(path, mapping)
            if module is None:
                self._skipped.add(path)
            else:
                self._mapped[path] = module
                new.append(module)
        return new

    def _open(self, path: str, mapping: procfs.Mapping) -> Module | None:
        file = None
        problems: list[str] = []
        for candidate in (procfs.in_root(self.pid, path),
                          f"/proc/{self.pid}/map_files/{mapping.start:x}-{mapping.end:x}"):
            try:
                opened = open_shared(candidate, shown_as=path)
            except BadFile as e:
                problems.append(str(e))
                continue
            if os.fstat(opened.fileno()).st_ino == mapping.inode:
                file = opened
                break
            opened.close()
        if file is None:
            if any(os.strerror(errno.EMFILE) in problem for problem in problems):
                self.finder.warn(f"{posixpath.basename(path)}: not read, sampler has too many files open "
                                 "(raise ulimit -n); its symbols are not used")
            elif path.endswith(" (deleted)") or os.path.exists(procfs.in_root(self.pid, path)):
                self.finder.warn(f"{posixpath.basename(path)}: the file on disk is not the one loaded "
                                 "(replaced or deleted since); its symbols are not used")
            return None
        try:
            return Module(file, path, mapping.start, False, self.finder)
        except UnsupportedTarget:
            file.close()
            return None

    def named(self, library: str) -> Module | None:
        """The library a user means by LIBRARY in LIBRARY:FUNCTION (library_matches)."""
        return next((module for module in self.everything() if library_matches(module.path, library)), None)

    def library(self, library: str) -> Module:
        """``named``, looked for again among the libraries loaded since (dlopen); LocationNotFound when
        no module of the process is that library."""
        module = self.named(library)
        if module is None:
            self.refresh()
            module = self.named(library)
        if module is None:
            raise LocationNotFound(f"no library {library!r} is loaded in process {self.pid}",
                                   "see its libraries in /proc/PID/maps")
        return module

    def code(self, address: int, size: int) -> bytes | None:
        """``size`` bytes of the process's memory at ``address`` (its code, for decoding), or
        None when they cannot all be read."""
        try:
            fd = procfs.open_mem(self.pid)
        except OSError:
            return None
        try:
            data = os.pread(fd, size, address)
        except (OSError, OverflowError):
            return None
        finally:
            os.close(fd)
        return data if len(data) == size else None

    def containing(self, address: int) -> Module | None:
        """The module mapped at a run-time address."""
        for mapping in procfs.maps(self.pid):
            if mapping.start <= address < mapping.end:
                if mapping.path == self.main.path:
                    return self.main
                return self._mapped.get(mapping.path)
        return None

    def close(self) -> None:
        for module in self.everything():
            module.close()


def library_matches(path: str, library: str) -> bool:
    """The file at ``path`` is what a user means by LIBRARY in LIBRARY:FUNCTION: a path, a file name,
    or a file name without its version suffix (libc, libc.so, libc.so.6)."""
    base = posixpath.basename(path)
    return library in (path, base) or base.startswith((library + ".", library + "-"))


def _layout(pid: int) -> tuple[tuple[int, int, int, int, str], ...] | None:
    """The executable file mappings of a process (start, end, offset, inode, path); None when it is gone."""
    try:
        return tuple((m.start, m.end, m.offset, m.inode, m.path) for m in procfs.maps(pid)
                     if m.executable and m.path.startswith("/"))
    except ProcessNotFound:
        return None
