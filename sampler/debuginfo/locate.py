"""Names to places: where a breakpoint goes (``--at``), and which module holds a global.

``--at FUNCTION`` looks in the executable first, then in each library in the order they
are mapped; in each module the symbol table gives the address and the DWARF at that
address gives the function (its parameters and where its prologue ends); a name only
the DWARF knows is found by walking the executable's DWARF. ``--at LIBRARY:FUNCTION``
(and ``LIBRARY:FILE:LINE``) picks one library. Libraries loaded since the last look
(dlopen) are found when a name is not.
"""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
from dataclasses import dataclass

from sampler import places as syntax
from sampler.debuginfo import ifunc, prologue, usdtsites
from sampler.debuginfo.clones import clones_of
from sampler.debuginfo.dies import Malformed, origin, same_file
from sampler.debuginfo.dwarf import Function, InlineWalkTooLarge, Variable
from sampler.debuginfo.elffile import BadFile
from sampler.debuginfo.gopclntab import BadTable
from sampler.debuginfo.modules import Module, Modules
from sampler.debuginfo.usdt import Probe
from sampler.errors import LocationNotFound
from sampler.target import procfs

MAX_PROLOGUE_BYTES = 4096
"""A place further than this from its function's entry is no prologue's end: the entry is used."""
MAX_FUNCTION_BYTES = 1 << 18
"""How much of a function is decoded for branches back into its prologue."""
_ADDRESS, _FILE_LINE, _IN_LIBRARY = syntax.ADDRESS, syntax.FILE_LINE, syntax.IN_LIBRARY
_FILE_ADDRESS, _OFFSET = syntax.FILE_ADDRESS, syntax.OFFSET
is_pattern, ptrace_only = syntax.is_pattern, syntax.ptrace_only


@dataclass(frozen=True)
class Place:
    address: int
    """Run-time address of the breakpoint."""
    module: Module | None
    function: Function | None
    """The DWARF function there, when its module has DWARF."""
    symbol: str = ""
    """A compiler clone's symbol (``f.isra.0``) when the place is in one, a USDT probe's name; else ''."""
    usdt: Probe | None = None
    """The USDT probe whose site this is (its arguments are arg0..argN there)."""



def names_function(location: str) -> bool:
    """The location is a function by name (``f``, ``lib:f``), not FILE:LINE, *ADDR, a USDT probe,
    FUNCTION+OFFSET nor MODULE:0xADDR (a pattern: each match is one)."""
    text = location.strip()
    if syntax.is_usdt(text) or _FILE_ADDRESS.match(text) or _OFFSET.match(text):
        return False
    library = _IN_LIBRARY.match(text)
    rest = library.group("rest") if library and not _FILE_LINE.match(text) else text
    return not _ADDRESS.match(text) and not _FILE_LINE.match(rest)


def resolve(modules: Modules, location: str) -> Place:
    text = location.strip()
    match = _ADDRESS.match(text)
    if match:
        address = int(match.group(1), 0)
        module = modules.containing(address)
        return Place(address, module, _function_at(module, address) if module else None)
    match = _FILE_ADDRESS.match(text)
    if match:
        return _file_address(modules, match.group("library"), int(match.group("address"), 16))
    match = _OFFSET.match(text)
    if match:
        return _plus_offset(modules, match.group("function"), int(match.group("offset"), 0))
    library = _IN_LIBRARY.match(text)
    if library and not _FILE_LINE.match(text):
        module = modules.library(library.group("library"))
        place = _in_module(modules, module, library.group("rest"), everywhere=True)
        if place is None:
            rest = library.group("rest")
            near = [] if _FILE_LINE.match(rest) else nearest(rest, module.function_names())
            raise LocationNotFound(f"no function or line {rest!r} in {module.path}{_without(module)}",
                                   f"did you mean {' or '.join(repr(n) for n in near)}?" if near else
                                   _hint(module, "check the spelling"))
        return place
    for attempt in range(2):
        modules_now = modules.everything() if attempt == 0 else modules.refresh()
        # FILE:LINE: first the modules whose line tables surely name the file, then the others
        for sure in (True, False) if _FILE_LINE.match(text) else (False,):
            for module in modules_now:
                place = _in_module(modules, module, text, everywhere=module.is_main, sure=sure)
                if place is not None:
                    if module.is_main and place.function is not None and _is_bare(text):
                        _say_if_libraries_have(modules, text)
                    return place
    near = [] if _FILE_LINE.match(text) else nearest(text, modules.main.function_names())
    raise LocationNotFound(f"no function or line {text!r} in {_program(modules)} or the "
                           f"{len(modules.libraries)} libraries it has loaded (looked in their symbol "
                           f"tables and the program's DWARF and line table){_without(modules.main)}",
                           f"did you mean {' or '.join(repr(n) for n in near)}?" if near else
                           _hint(modules.main, "check the spelling; LIBRARY:FUNCTION picks a library "
                                               "(e.g. libc.so.6:malloc)"))


MAX_PROBES = 1000
"""Breakpoints one --at may mean by default (a pattern, a USDT probe's sites): --max-probes."""


def resolve_all(modules: Modules, location: str, limit: int = MAX_PROBES) -> list[Place]:
    """Every breakpoint a location means: a function name means the function and each of its
    compiler clones that calls enter (clones.py), or only its clones when the compiler left no
    code under its own name; FILE:LINE and *ADDR mean one place; a USDT probe each of its sites."""
    text = location.strip()
    if syntax.is_usdt(text):
        return [Place(probe.address + module.bias, module, _function_at(module, probe.address + module.bias),
                      label, probe) for module, probe, label in usdtsites.sites(modules, text, limit)]
    if is_pattern(text):
        if "operator" in text or "[" in text:
            try:  # a name of its own first (C++'s operator*, a name with brackets)
                return [resolve(modules, text)]
            except LocationNotFound:
                pass
        return _matching(modules, text, limit)
    if _FILE_ADDRESS.match(text) or _OFFSET.match(text):
        return [resolve(modules, text)]
    library = _IN_LIBRARY.match(text)
    if _ADDRESS.match(text) or _FILE_LINE.match(text) or (library and _FILE_LINE.match(library.group("rest"))):
        return [resolve(modules, location)]
    name = library.group("rest") if library else text
    try:
        first = resolve(modules, location)
    except LocationNotFound:
        module = modules.named(library.group("library")) if library else modules.main
        found = _clones(modules, module, name, exclude=None) if module is not None else []
        copies = _inlined(modules, module, name) if module is not None else []
        if not found and not copies:
            raise
        _within_limit(name, len(found) + len(copies))
        shown = [p.symbol for p in found] + ([f"{len(copies)} inlined copies"] if copies else [])
        modules.finder.say(f"--at {name}: the compiler left no code under that name, only "
                           f"{', '.join(shown)}: breaking there (the probe column says which)")
        return [*found, *copies]
    if first.module is None:
        return [first]
    extra = _clones(modules, first.module, name, exclude=first.address - first.module.bias)
    copies = _inlined(modules, first.module, name, first.function) if _was_inlined(first.function) else []
    # a copy inside the function's own code (or a clone's) is part of the same call: a breakpoint
    # there would count each call twice (glibc's write has its own body inlined in it)
    spans = [(p.function.low + p.module.bias, p.function.high + p.module.bias) for p in (first, *extra)
             if p.function is not None and p.module is not None and p.function.high > p.function.low]
    copies = [c for c in copies if not any(low <= c.address < high for low, high in spans)]
    _within_limit(name, 1 + len(extra) + len(copies))
    if extra or copies:
        shown = [p.symbol for p in extra] + ([f"{len(copies)} inlined copies"] if copies else [])
        modules.finder.say(f"--at {name}: also {', '.join(shown)}: {1 + len(extra) + len(copies)} breakpoints "
                           "(the probe column says which)")
    return [first, *extra, *copies]


def _file_address(modules: Modules, library: str, address: int) -> Place:
    """MODULE:0xADDR: the module's file address (as objdump and nm print it) at run time."""
    module = modules.library(library)
    if module.file.byte_at(address) is None:
        raise LocationNotFound(f"--at {library}:{address:#x}: no loadable segment of {module.path} holds that "
                               "address", "give an address as objdump -d or nm prints it for that file")
    return Place(address + module.bias, module, _function_at(module, address + module.bias))


def _plus_offset(modules: Modules, function: str, offset: int) -> Place:
    """FUNCTION+OFFSET: bytes past the function's first instruction (its entry, not its prologue's
    end); within the function (its instruction boundary is checked when the probe goes in)."""
    library = _IN_LIBRARY.match(function)
    module = modules.library(library.group("library")) if library else None
    name = library.group("rest") if library else function
    start = None
    for candidate in [module] if module is not None else modules.everything():
        symbol = candidate.symbol(name)
        if symbol is not None and symbol.is_function:
            module, start = candidate, symbol
            break
    if module is None or start is None:
        raise LocationNotFound(f"--at {function}+{offset:#x}: no function symbol {name!r}"
                               + (f" in {module.name}" if module is not None else " in the program or its libraries"),
                               "FUNCTION+OFFSET counts from a function's symbol: check the spelling (nm)")
    if start.size and offset >= start.size:
        raise LocationNotFound(f"--at {function}+{offset:#x}: past the end of {name} ({start.size:#x} bytes)",
                               "give an offset inside the function (objdump -d)")
    address = start.address + offset + module.bias
    return Place(address, module, _function_at(module, address), f"{name}+{offset:#x}")


def _matching(modules: Modules, pattern: str, limit: int) -> list[Place]:
    """Every function whose name matches the pattern: the program's, or (LIBRARY:PATTERN) one
    library's; each one breakpoint (the first name of those at one address), up to ``limit``."""
    library = _IN_LIBRARY.match(pattern)
    module = modules.library(library.group("library")) if library else modules.main
    wanted = library.group("rest") if library else pattern
    names = sorted(n for n in module.function_names() if fnmatch.fnmatchcase(n, wanted))
    if not names:
        raise LocationNotFound(f"--at {pattern}: no function of {module.name} matches"
                               + ("" if library else " (a library's: LIBRARY:PATTERN)"),
                               "sampler list --pid PID 'PATTERN' shows what there is")
    if len(names) > limit:
        raise LocationNotFound(f"--at {pattern}: {len(names)} functions match, over --max-probes {limit}",
                               f"name fewer (e.g. {names[0]!r}), or raise --max-probes")
    places: dict[int, Place] = {}
    skipped: list[str] = []
    global _gathered
    _gathered = {}
    try:
        found = {name: _one_of_many(modules, module, name) for name in names}
    finally:
        gathered, _gathered = _gathered, None
    for kind, lines in gathered.items():  # (one line a kind, not one a function: 1,295 lines for libc:*)
        said = list(dict(lines).items())  # (a function named by several of the names: once)
        if len(said) == 1:
            modules.finder.say(said[0][1])
            continue
        shown = ", ".join(name for name, _ in said[:3]) + (", ..." if len(said) > 3 else "")
        modules.finder.say(f"--at {pattern}: {len(said)} function(s) " + (
            f"break at their entry, not after their prologue ({shown}): {_PROLOGUE_WHY}" if kind == "prologue" else
            f"are IFUNCs of {module.name} ({shown}): each breaks where this process's calls go, the function "
            "chosen for this CPU"))
    for name in names:
        place = found[name]
        if place is None:
            skipped.append(name)
        elif place.address not in places:
            places[place.address] = dataclasses.replace(place, symbol=name)
    if not places:
        raise LocationNotFound(f"--at {pattern}: {len(names)} names match, none a place to break at "
                               f"({', '.join(names[:3])})", "give a full signature of a C++ overload")
    modules.finder.say(f"--at {pattern}: {len(places)} function(s) of {module.name}"
                       + (f" ({len(skipped)} name(s) left out: {', '.join(skipped[:3])})" if skipped else "")
                       + ": the probe column says which")
    return list(places.values())


def _one_of_many(modules: Modules, module: Module, name: str) -> Place | None:
    try:
        return _in_module(modules, module, name, everywhere=False)
    except LocationNotFound:  # an overloaded C++ name: its full signatures are names of their own
        return None


_PROLOGUE_WHY = ("a branch before that place would skip it in some calls; parameters are read from where the "
                 "caller put them")
_gathered: dict[str, list[tuple[str, str]]] | None = None
"""While a pattern's functions are resolved (``_matching``): each kind of line said of one (its kind -> the
function and the line), said once for them all."""


def _say(modules: Modules, kind: str, name: str, line: str) -> None:
    if _gathered is not None:
        _gathered.setdefault(kind, []).append((name, line))
    else:
        modules.finder.say(line)


def _was_inlined(function: Function | None) -> bool:
    """The DWARF says the compiler inlined this function somewhere: its out-of-line code is a
    concrete copy of an abstract DIE marked DW_AT_inline (DW_INL_inlined or
    DW_INL_declared_inlined). Only then is the whole DWARF walked for its inlined copies (a
    walk of libc's took 11 s and 490 MB)."""
    if function is None:
        return False
    try:
        abstract = origin(function.die, "DW_AT_abstract_origin")
        inline = abstract.attributes.get("DW_AT_inline") if abstract is not None else None
    except Exception:  # a reference out of the file: hostile or corrupted DWARF
        return False
    return inline is not None and inline.value in (1, 3)


def _within_limit(name: str, count: int) -> None:
    if count > MAX_CLONES:
        raise LocationNotFound(f"--at {name}: {count} breakpoints (the function, its clones and inlined copies), "
                               f"over the {MAX_CLONES} one name may mean", "give FILE:LINE of the caller you want, "
                               "or one clone by its symbol (e.g. f.isra.0)")


def _inlined(modules: Modules, module: Module, name: str, function: Function | None = None) -> list[Place]:
    """A breakpoint at the entry of each copy of the function inlined into its callers (gdb's
    locations of one breakpoint), when the module has DWARF."""
    debug = module.debug(remote=False)
    if debug is None:
        return []
    try:
        copies = debug.inlined(name, function)
    except InlineWalkTooLarge as e:
        modules.finder.say(f"--at {name}: copies inlined into callers not searched ({e})")
        return []
    except Malformed as e:
        module.drop_debug(e)
        return []
    if len(copies) > MAX_CLONES:
        raise LocationNotFound(f"--at {name}: inlined into its callers {len(copies)} times, over the {MAX_CLONES} "
                               "breakpoints one name may mean", "give FILE:LINE of the caller you want")
    places = []
    for copy in copies:
        caller = _function_at(module, copy.low + module.bias)
        line = copy.die.attributes.get("DW_AT_call_line")
        where = f"inlined in {caller.name if caller else 'a caller'}" + (f", line {line.value}" if line else "")
        places.append(Place(copy.low + module.bias, module, copy, symbol=where))
    return places


MAX_CLONES = 64
"""Breakpoints one name may mean (a template instantiated many times is refused beyond)."""


def _clones(modules: Modules, module: Module, name: str, exclude: int | None) -> list[Place]:
    found = clones_of(module, name, bare=True)
    starts = {address for address in found if address not in (exclude, module.function_symbol(name))}
    if exclude is not None:
        function = _function_at(module, exclude + module.bias)
        starts = {a for a in starts if function is None or not function.low <= a < function.high}
    if len(starts) > MAX_CLONES:
        raise LocationNotFound(f"--at {name}: {len(starts)} compiler clones, over the {MAX_CLONES} one name may "
                               "break at", "give one clone by its symbol (e.g. f.isra.0)")
    return [dataclasses.replace(_at_symbol(modules, module, address), symbol=found[address])
            for address in sorted(starts)]


MAX_CANDIDATES = 200_000
"""Names compared for a suggestion (a large Go program has about 50,000 functions)."""


def nearest(name: str, names: set[str], count: int = 3) -> list[str]:
    """The names closest to a misspelt one (difflib's ratio, at least 0.75), best first; a
    name that holds ``name`` whole (a clone ``f.isra.0``, ``ns::f``) counts as close."""
    if not name or len(names) > MAX_CANDIDATES:
        return []
    holding = sorted((n for n in names if name in n and n != name), key=len)[:count]
    scored = []
    for candidate in names:
        if abs(len(candidate) - len(name)) <= 8:
            matcher = difflib.SequenceMatcher(None, name, candidate)
            if matcher.real_quick_ratio() >= 0.75 and matcher.quick_ratio() >= 0.75 and matcher.ratio() >= 0.75:
                scored.append((matcher.ratio(), candidate))
    scored.sort(key=lambda pair: (-pair[0], pair[1]))
    near = [candidate for score, candidate in scored if score >= scored[0][0] - 0.05][:count]
    return list(dict.fromkeys([*near, *holding]))[:count]


def _program(modules: Modules) -> str:
    """The program's file, and the name it runs as when that differs (Debian's redis-server is
    a link to redis-check-rdb: the user knows the first)."""
    called = procfs.comm(modules.pid)
    path = modules.main.path
    return path if called in ("unknown", "") or path.rsplit("/", 1)[-1].startswith(called) else \
        f"{called} ({path})"


def _without(module: Module) -> str:
    if not module.has_symtab() and module.debug(remote=False) is None:  # the cheap test first
        return f" ({module.name} is stripped; {module.lacking_debug() or 'it has no debug info'})"
    return ""


NO_DEBUG_HINT = ("install its debug package (/usr/lib/debug), give --debug-dir or --symbols, "
                 "set DEBUGINFOD_URLS, or rebuild with -g")


def _hint(module: Module, otherwise: str) -> str:
    return NO_DEBUG_HINT if _without(module) else otherwise


def _in_module(modules: Modules, module: Module, name: str, everywhere: bool, sure: bool = False) -> Place | None:
    """FUNCTION or FILE:LINE in one module. ``everywhere``: also walk its DWARF for a name
    its symbol table lacks (done for the executable and a library named by the user).
    ``sure``: FILE:LINE only where the line tables surely name the file (Debug.line_address)."""
    line = _FILE_LINE.match(name)
    if line:
        debug = module.debug(remote=everywhere)
        if debug is None:
            return _go_line(module, line.group("file"), int(line.group("line")))
        try:
            found = debug.line_address(line.group("file"), int(line.group("line")), sure)
        except Malformed as e:
            module.drop_debug(e)
            return None
        if found is None:
            return None
        return Place(found + module.bias, module, _function_at(module, found + module.bias))
    symbol = module.symbol(name)
    if symbol is not None and symbol.is_function:
        if symbol.ifunc:
            choice = ifunc.chosen(modules, module, name, symbol.address)
            also = f" (also {', '.join(choice.also)}'s choice: its calls are counted too)" if choice.also else ""
            _say(modules, "ifunc", name, f"--at {name}: an IFUNC of {module.name}; this process's calls go to "
                 f"{choice.name or hex(choice.address)}, chosen for this CPU: breaking there{also}")
            return _at_symbol(modules, module, choice.address - module.bias)
        return _at_symbol(modules, module, symbol.address)
    matches = module.functions_matching(name, bare=everywhere)
    if len(matches) == 1:
        [(address, _)] = matches.items()
        return _at_symbol(modules, module, address)
    if len(matches) > 1:
        listed = sorted(matches.values())
        raise LocationNotFound(f"{name!r} is {len(listed)} functions in {module.name}: "
                               f"{'; '.join(listed[:8])}{'; ...' if len(listed) > 8 else ''}",
                               "give one of them in full, with its parameter list")
    # a library with a full symbol table names every function with code in it: its DWARF (libc's
    # is 2,000 units, 14 s to walk) would only find the same names again
    if everywhere and (module.is_main or not module.has_symtab()):
        debug = module.debug()
        if debug is not None:
            try:
                function = debug.function_named(name)
            except Malformed as e:
                module.drop_debug(e)
                function = None
            if function is not None:
                return Place(_after_prologue(modules, module, function), module, function)
    return None


def _go_line(module: Module, file: str, line: int) -> Place | None:
    """FILE:LINE in a Go binary without DWARF, from Go's own table (.gopclntab)."""
    try:
        table = module.file.go_table()
        found = table.line_address(file, line, same_file) if table is not None else None
    except (BadFile, BadTable) as e:
        module.notes.append(f"its Go function table cannot be read ({e})")
        return None
    return None if found is None else Place(found + module.bias, module, None)


def _at_symbol(modules: Modules, module: Module, address: int) -> Place:
    """A function symbol's place: after the prologue when the DWARF knows the function;
    without DWARF, the entry (past the stack check in a Go program)."""
    function = _function_at(module, address + module.bias)
    if function is not None and function.low == address:
        return Place(_after_prologue(modules, module, function), module, function)
    entry = address + module.bias
    if function is None and _is_go(module):
        code = modules.code(entry, 128)
        past = prologue.past_stack_check(code, entry) if code else None
        if past is not None:
            return Place(past, module, function)
    return Place(entry, module, function)


def _is_go(module: Module) -> bool:
    try:
        return module.file.go_table() is not None
    except (BadFile, BadTable):
        return False


def _is_bare(name: str) -> bool:
    return name.replace("_", "a").isalnum()


def _say_if_libraries_have(modules: Modules, name: str) -> None:
    """A bare name that the program and a library both have: the program's, and say so."""
    others = [m.name for m in modules.libraries if m.function_symbol(name) is not None]
    if others:
        modules.finder.say(f"--at {name}: the program's function (also in {', '.join(others[:3])}; "
                           f"{others[0]}:{name} picks that one)")


def _function_at(module: Module, address: int) -> Function | None:
    debug = module.debug()
    if debug is None:
        return None
    try:
        return debug.function_at(address - module.bias)
    except Malformed as e:
        module.drop_debug(e)
        return None


def _after_prologue(modules: Modules, module: Module, function: Function) -> int:
    """After the prologue, when every call reaches that place once (prologue.py); else the entry."""
    debug = module.debug()
    entry = function.low + module.bias
    try:
        place = (debug.after_prologue(function) if debug is not None else function.low) + module.bias
    except Malformed as e:  # the line table only: the rest of the DWARF may be fine
        module.finder.warn(f"{module.name}: its line table cannot be read ({e}); breaking at the entry "
                           f"of {function.name}")
        return entry
    if place == entry:
        return entry
    size = min(max(function.high - function.low, place - entry + 16), MAX_FUNCTION_BYTES)
    code = modules.code(entry, size) if 0 < place - entry < MAX_PROLOGUE_BYTES else None
    if code is None or not prologue.reached_once(code, entry, place, go=_is_go(module)):
        _say(modules, "prologue", function.name or "", f"--at {function.name}: the breakpoint goes to the function's "
             f"entry, not after its prologue (+{place - entry:#x}): {_PROLOGUE_WHY}")
        return entry
    return place


def find_global(modules: Modules, name: str, first: Module | None) -> tuple[Module, Variable] | None:
    """A global variable by name: in the breakpoint's module, the executable, then the other
    libraries; a library only when its symbol table defines an object of that name (its DWARF
    is read only then)."""
    order = [modules.main] if first is None or first is modules.main else [first, modules.main]
    for attempt in range(2):
        candidates = order + [m for m in modules.libraries if m not in order] if attempt == 0 \
            else modules.refresh()
        for module in candidates:
            if module is not modules.main and ("." in name or module.object_symbol(name) is None):
                continue  # a dotted name is a Go global: the executable's
            debug = module.debug()
            if debug is None:
                continue
            try:
                variable = debug.global_variable(name)
            except Malformed as e:
                module.drop_debug(e)
                continue
            if variable is not None:
                return module, variable
    return None


def defines_package(modules: Modules, name: str) -> bool:
    """Go: ``main`` in ``main.ring`` names a package of the executable's globals."""
    debug = modules.main.debug()
    if debug is None:
        return False
    try:
        return debug.has_global(name)
    except Malformed as e:
        modules.main.drop_debug(e)
        return False
