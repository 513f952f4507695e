"""``sampler list``: what can be probed in a process or a program file, as bpftrace -l and BCC's
tplist list it: the functions of the program and each library it has loaded (with their module),
the USDT probes with their argument specs and semaphores, and the globals. Each is written as
``--at`` (or ``--expr``, for a global) takes it, so a line can be pasted into the next command.

A PATTERN narrows it as ``--at`` reads one: ``usdt:[LIBRARY:]PROVIDER:NAME`` for USDT probes,
``LIBRARY:NAME`` for one library's functions and globals, else a name; each part may hold ``*``,
``?`` and ``[...]``. ``--exe PATH`` reads one file without a process (a program or a library;
the libraries a program would load are not read: give --pid for those).
"""

from __future__ import annotations

import fnmatch
import json
import posixpath
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass

from sampler.debuginfo import usdt, usdtsites
from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.demangle import demangle, qualified
from sampler.debuginfo.elffile import BadFile, ElfFile, Symbol
from sampler.debuginfo.modules import Modules, library_matches
from sampler.errors import PermissionDenied, UsageError
from sampler.printable import printable

KINDS = ("usdt", "function", "global")


@dataclass(frozen=True)
class Item:
    kind: str
    """usdt, function or global."""
    location: str
    """As --at takes it (a global: as --expr takes it)."""
    module: str
    """The file, as the process maps it."""
    address: int
    """In the file (objdump's and nm's addresses)."""
    size: int = 0
    arguments: str = ""
    """A USDT probe's argument specs, as its note has them."""
    semaphore: bool = False
    """A USDT probe with a semaphore (sampler counts itself in while it reads the probe)."""


@dataclass(frozen=True)
class _Source:
    """One module to list: its files (the loaded one, then a debug file's symbols), its prefix."""

    path: str
    name: str
    is_main: bool
    files: tuple[ElfFile, ...]


def of_process(pid: int, pattern: str | None) -> list[Item]:
    try:
        modules = Modules(pid, DebugFinder(pid, (), lambda _: None, lambda _: None))
    except PermissionError as e:
        raise PermissionDenied(f"cannot read the program of process {pid} ({e.strerror})",
                               "run sampler as root, or as the process's user") from None
    try:
        modules.refresh()
        sources = [_Source(m.path, m.name, m.is_main, tuple(m.symbol_files())) for m in modules.everything()]
        return sorted(_items(sources, pattern), key=_order)
    finally:
        modules.close()


def of_file(path: str, pattern: str | None) -> list[Item]:
    try:
        file = ElfFile(path)
    except BadFile as e:
        raise UsageError(f"--exe {path}: not an ELF file sampler can read ({e})", "give a program or a library") \
            from None
    try:
        source = _Source(path, posixpath.basename(path), _is_program(file), (file,))
        return sorted(_items([source], pattern), key=_order)
    finally:
        file.close()


def _is_program(file: ElfFile) -> bool:
    """A program (it names an interpreter, or is not position-independent), not a library."""
    try:
        return any(segment["p_type"] == "PT_INTERP" for segment in file.elf.iter_segments()) \
            or not file.is_position_independent()
    except Exception:  # a file whose program headers cannot be read: listed as a library
        return False


def _order(item: Item) -> tuple[int, str, str]:
    return KINDS.index(item.kind), item.module, item.location


def _items(sources: Sequence[_Source], pattern: str | None) -> Iterator[Item]:
    text = (pattern or "").strip()
    if usdtsites.is_usdt(text):
        library, provider, name = usdtsites.split(text)
        for source in sources:
            if library is None or library_matches(source.path, library):
                yield from _probes(source, provider, name)
        return
    library, _, name = text.rpartition(":") if ":" in text and "::" not in text else ("", "", text)
    for source in sources:
        if library and not library_matches(source.path, library):
            continue
        if not text:
            yield from _probes(source, "*", "*")
        yield from _symbols(source, name or "*")


def _probes(source: _Source, provider: str, name: str) -> Iterator[Item]:
    prefix = "usdt:" if source.is_main else f"usdt:{source.name}:"
    try:
        found = usdt.probes(source.files[0])
    except BadFile:
        return
    for probe in found:
        if fnmatch.fnmatchcase(probe.provider, provider) and fnmatch.fnmatchcase(probe.name, name):
            yield Item("usdt", prefix + probe.full_name, source.path, probe.address,
                       arguments=probe.spec if not probe.problem else f"{probe.spec} ({probe.problem})",
                       semaphore=bool(probe.semaphore))


def _symbols(source: _Source, pattern: str) -> Iterator[Item]:
    prefix = "" if source.is_main else f"{source.name}:"
    seen: set[str] = set()
    for file in source.files:
        try:
            symbols: dict[str, Symbol] = file.symbols()
        except BadFile:
            continue
        for raw, symbol in symbols.items():
            shown = raw
            if raw.startswith(("_Z", "_R")):
                text = demangle(raw)
                shown = qualified(text) if text is not None else raw
            if shown in seen or not fnmatch.fnmatchcase(shown, pattern):
                continue
            seen.add(shown)
            yield Item("function" if symbol.is_function else "global", prefix + shown if symbol.is_function else shown,
                       source.path, symbol.address, symbol.size)


def as_text(items: Sequence[Item]) -> str:
    if not items:
        return ""
    width = min(max(len(item.location) for item in items), 60)
    lines = []
    for item in items:
        details = f"{item.address:#x}"
        if item.kind == "usdt":
            details += f" args {item.arguments or '(none)'}" + (" semaphore" if item.semaphore else "")
        elif item.size:
            details += f" {item.size} bytes"
        lines.append(printable(f"{item.kind:<8}  {item.location:<{width}}  {item.module} {details}"))
    return "\n".join(lines) + "\n"


def as_json(items: Sequence[Item]) -> str:
    return "".join(json.dumps(asdict(item)) + "\n" for item in items)
