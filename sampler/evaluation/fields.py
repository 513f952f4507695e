"""The short form: ``--expr 'w-r'`` where w and r are fields of a global, not names of
their own. A name that is neither a local, a parameter nor a global is looked up as a
field of the program's globals, through pointers, one or two fields deep; a single match
is used (and said once), several are listed for the user to pick."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable

from sampler.config import SessionConfig
from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.dwarf import Debug
from sampler.debuginfo.types import Pointer, Struct, Type
from sampler.errors import ExpressionError, SamplerError
from sampler.language import casts, expr
from sampler.language.expr import Expression

DEPTH = 2
"""Fields deep: ring.w (1) and app.ring.w (2)."""
POINTERS = 2
"""Pointers followed to reach a struct: a *Ring global, a **Ring."""
_GO_STANDARD = re.compile(r"^[a-z0-9_]+(/[a-z0-9_]+)*\.")
"""A Go global of the standard library or the runtime (runtime.x, internal/abi.y): not the program's."""


def field_paths(debug: Debug, name: str, is_go: bool) -> list[str]:
    """Every global.field (or global.a.field) path that ends in ``name``."""
    found: list[str] = []
    try:
        for global_name in debug.global_names():
            if is_go and (not global_name.startswith("main.") and _GO_STANDARD.match(global_name)):
                continue
            variable = debug.global_variable(global_name)
            if variable is not None:
                found += _paths(global_name, variable.type, name, DEPTH)
    except Malformed:
        return found
    return found


def _paths(prefix: str, t: Type | None, name: str, depth: int) -> list[str]:
    for _ in range(POINTERS):
        if isinstance(t, Pointer):
            t = t.target
    if not isinstance(t, Struct):
        return []
    if t.member(name) is not None:
        return [f"{prefix}.{name}"]
    if depth <= 1:
        return []
    found: list[str] = []
    for member in t.members.values():
        if member.name and not member.name.startswith("_"):
            found += _paths(f"{prefix}.{member.name}", member.type, name, depth - 1)
    return found


def expand(expression: Expression, paths: dict[str, list[str]]) -> tuple[Expression, str]:
    """The expression with each name of ``paths`` replaced by its single path, and the line
    that says so; ExpressionError when a name has none or several."""
    chosen: dict[str, str] = {}
    for name, found in paths.items():
        if len(found) > 1:
            raise ExpressionError(f"{expression.text}: {name} is a field of several globals: {', '.join(found)}",
                                  "write the one you mean, e.g. --expr " f"'{found[0]}'")
        chosen[name] = found[0]
    text = rewrite(expression.text, chosen)
    said = f"{expression.text}: " + ", ".join(f"{name} is {path}" for name, path in chosen.items())
    return Expression(expression.name, text, expr.parse(text)), said


def rewrite(text: str, chosen: dict[str, str]) -> str:
    """Each free name of ``chosen`` (not a field after '.' or '->') replaced by its path."""
    pieces: list[str] = []
    pos, previous = 0, ""
    for match in expr.TOKEN.finditer(text):
        if match.start() != pos and text[pos:match.start()].strip():
            break  # not a token: the parser says what is wrong
        kind = match.lastgroup or ""
        token = match.group(kind)
        start = match.start(kind)
        pieces.append(text[pos:start])
        pieces.append(chosen[token] if kind == "name" and token in chosen and previous not in (".", "->")
                      else token)
        pos, previous = match.end(), token
    pieces.append(text[pos:])
    return "".join(pieces)


def short_form(expressions: tuple[Expression, ...], unknown: dict[int, list[str]], debug: Debug | None,
               is_go: bool, say: Callable[[str], None],
               none_found: Callable[[str], SamplerError] | None = None) -> tuple[Expression, ...]:
    """The expressions with each name of ``unknown`` (per expression's index) replaced by the one
    global.field path that ends in it, each rewrite said; a name with no path raises
    ``none_found(name)``, or (None) leaves its expression as it is. The one way both drives take
    the short form: the ptrace scope at its place, Delve's before dlv starts (expand_config)."""
    rewritten = list(expressions)
    for index, names in unknown.items():
        paths = {name: field_paths(debug, name, is_go) if debug is not None else [] for name in names}
        missing = [name for name, found in paths.items() if not found]
        if missing:
            if none_found is not None:
                raise none_found(missing[0])
            continue  # dlv says what it makes of it
        rewritten[index], said = expand(rewritten[index], paths)
        say(said)
    return tuple(rewritten)


def free_names(expression: Expression) -> list[str]:
    """The names an expression uses on their own (not fields, registers, casts or built-ins)."""
    names: list[str] = []
    called = expr.called(expression.tree)
    for node in ast.walk(expression.tree):
        if isinstance(node, ast.Name) and id(node) not in called \
                and not node.id.startswith((expr.REGISTER_PREFIX, casts.PREFIX)):
            name = expr.source_name(node.id)
            if name not in names:
                names.append(name)
    return names


def expand_config(config: SessionConfig, is_go: bool, say: Callable[[str], None]) -> SessionConfig:
    """For the backends that hand expressions to dlv: the short form worked out from the
    program's DWARF before dlv starts (dlv would take ``w`` for a local of whatever frame the
    target stopped in). Names dlv may know and the DWARF does not are left to dlv."""
    from sampler.debuginfo.debugfiles import DebugFinder
    from sampler.debuginfo.locate import defines_package, find_global, resolve
    from sampler.debuginfo.modules import Modules

    wanted = [free_names(e) for e in config.expressions]
    if not any(wanted):
        return config
    modules = Modules(config.pid, DebugFinder(config.pid, config.debug_dirs, lambda _: None, lambda _: None),
                      config.symbols_file)
    try:
        debug = modules.main.debug()
        if debug is None:
            return config
        scope: set[str] = set()
        if config.location is not None:
            place = resolve(modules, config.location)
            found = place.module.debug() if place.module is not None else None
            if place.function is not None and found is not None and place.module is not None:
                scope = set(found.variables(place.function, place.address - place.module.bias))
        unknown = {index: left for index, names in enumerate(wanted)
                   if (left := [n for n in names if n not in scope and not defines_package(modules, n)
                                and find_global(modules, n, None) is None])}  # a package first: answered at once
        expressions = short_form(config.expressions, unknown, debug, is_go, say)
    except (SamplerError, Malformed):
        return config  # dlv reports the location or the name its own way
    finally:
        modules.close()
    return dataclasses.replace(config, expressions=expressions)
