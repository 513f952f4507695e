"""Expressions users sample: parsed and checked once, the same way for every backend.

The syntax is the common ground of C and Go read-only expressions: names,
``.`` and ``->`` field access, ``[i]``, unary ``*`` (dereference), unary ``-``,
``~``, ``!``, arithmetic, shifts, bitwise operators, comparisons, ``&&`` and
``||``, parentheses, integer and float literals; string literals in ``==``, ``!=``
and ``startswith(EXPR, "text")``; and as bpftrace has them, ``str(p)``, ``str(p, n)``
(a string of at most n bytes), ``buf(p, n)`` (n bytes as hex) and ``ustack``/``ustack(n)`` (the
stack at the breakpoint, folded). A few tokens are rewritten
into Python's spelling and the result is parsed with :mod:`ast`: there is no
hand-written parser. Anything that could change the target is refused before
sampler attaches: calls, assignment, increments, several statements.
"""

from __future__ import annotations

import ast
import keyword
import re
from dataclasses import dataclass

from sampler.errors import ExpressionError
from sampler.language import casts, pyexpr
from sampler.language.pyexpr import PyPath

ARITY = {"len": (1, 1), "cap": (1, 1), "str": (1, 2), "buf": (2, 2), "startswith": (2, 2), "ustack": (0, 1)}
"""The built-ins and how many arguments each takes: Go's len() and cap(), bpftrace's str()
and buf(), and a prefix test. They read; they call nothing in the target."""
BUILTINS = frozenset(ARITY)
SAMPLER_ONLY = frozenset({"str", "buf", "startswith", "ustack"})
"""Built-ins only sampler's own evaluator (the ptrace backend) knows; Delve has none of them."""
USTACK = "ustack"
"""bpftrace's ustack: the stack of the thread at the breakpoint, folded (``main;f;g``, innermost
last); ``ustack(N)`` its innermost N frames. An expression of its own, not part of another."""
MAX_USTACK = 4096
"""Frames ustack(N) may ask for."""
MAX_BYTES = 4096
"""The most bytes str(p, n) and buf(p, n) read."""
REGISTER_PREFIX = "__reg_"
"""``$rdi`` (gdb's spelling of a register) is the name ``__reg_rdi__`` in the parsed tree."""
DEREF = "__deref__"
"""Name of the pseudo-call that stands for unary ``*`` in the parsed tree."""
ADDRESS_OF = "__address__"
"""Name of the pseudo-call that stands for unary ``&`` (take an address: it reads nothing)."""
KEYWORD_PREFIX = "__kw_"
"""Prefix given to names that are Python keywords (a C field called ``from``)."""

_NAME_PREFIX = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=(?!=)")
TOKEN = re.compile(
    r"\s*(?:(?P<str>\"(?:[^\"\\\n]|\\.)*\")|(?P<num>0[xX][0-9a-fA-F]+|\d+\.\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|\d+(?:[eE][-+]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<reg>\$[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>->|&&|\|\||==|!=|<=|>=|<<|>>|[-+*/%&|^~!<>()\[\].,]))"
)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_ASSIGNMENT = re.compile(r"(?<![=!<>])=(?!=)|\+\+|--|:=|<<=|>>=")
_UNARY_BEFORE = {None, "(", "[", ",", "-", "+", "*", "/", "%", "&", "|", "^", "~", "!",
                 "<", ">", "==", "!=", "<=", ">=", "<<", ">>", "&&", "||"}
_ALLOWED = (
    ast.Expression, ast.Name, ast.Attribute, ast.Subscript, ast.BinOp, ast.UnaryOp,
    ast.Compare, ast.BoolOp, ast.Constant, ast.Load,
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Mod, ast.LShift, ast.RShift,
    ast.BitOr, ast.BitXor, ast.BitAnd, ast.USub, ast.UAdd, ast.Invert, ast.Not,
    ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.And, ast.Or, ast.MatMult,
)


@dataclass(frozen=True)
class Expression:
    name: str
    """The CSV column: the NAME of NAME=EXPR, or the expression text."""
    text: str
    """The expression as the user wrote it; what text-driven debuggers are sent."""
    tree: ast.Expression
    """The checked tree; unary ``*`` appears as a call to ``__deref__``. A py: expression's is the
    name PYTHON, which no evaluator but the Python one knows (nothing reads it as 0 by mistake)."""
    python: PyPath | None = None
    """A py: expression's path (language/pyexpr.py): read by evaluation/pyvalues.py."""


PYTHON = "__python__"


def parse_option(option: str) -> Expression:
    """Parse one ``--expr`` value: ``[NAME=]EXPR``."""
    match = _NAME_PREFIX.match(option)
    name, text = (match.group(1), option[match.end():]) if match else (None, option)
    text = text.strip()
    if pyexpr.is_python(text):
        return Expression(name=name or text, text=text, tree=ast.Expression(body=ast.Name(id=PYTHON, ctx=ast.Load())),
                          python=pyexpr.parse(text))
    tree = parse(text)
    return Expression(name=name or text, text=text, tree=tree)


MAX_LENGTH = 1000
"""Characters in one expression."""
MAX_DEPTH = 64
"""Nesting of one expression's tree (parentheses, operators, fields)."""


def parse(text: str) -> ast.Expression:
    """Check ``text`` and return its tree; raise ExpressionError saying what is wrong."""
    if not text:
        raise ExpressionError("empty expression")
    if len(text) > MAX_LENGTH:
        raise ExpressionError(f"an expression of {len(text)} characters is too long (at most {MAX_LENGTH})")
    bare = _STRING.sub('""', text)  # what string literals hold is no operator
    if "\n" in text or "\r" in text or ";" in bare:
        raise ExpressionError(f"{text!r}: one expression only (no newline, no ';')")
    if _ASSIGNMENT.search(bare):
        raise ExpressionError(f"{text!r}: assignment and increments are not allowed")
    tree = _python_tree(_to_python(text), text)
    if _depth(tree) > MAX_DEPTH:
        raise ExpressionError(f"{text!r} is nested too deeply (at most {MAX_DEPTH} levels)")
    _check_ustack(tree, text)
    texts = _literal_places(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
                least, most = ARITY[node.func.id]
                if not least <= len(node.args) <= most or node.keywords:
                    wanted = "one argument" if most == 1 else "two arguments" if least == 2 else "one or two arguments"
                    raise ExpressionError(f"{text!r}: {node.func.id}() takes {wanted}")
                continue
            if not (isinstance(node.func, ast.Name) and node.func.id in (DEREF, ADDRESS_OF)):
                raise ExpressionError(f"{text!r}: function calls are not allowed "
                                      f"(only the built-ins {', '.join(sorted(BUILTINS))})")
            continue
        if isinstance(node, ast.Name) and node.id in BUILTINS:
            continue
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in texts:
                raise ExpressionError(f"{text!r}: a string literal goes in ==, !=, startswith(EXPR, \"text\") "
                                      "or a map's [\"key\"]",
                                      'e.g. --expr \'get=cmd == "GET"\'')
            continue
        if isinstance(node, ast.Constant) and (
                isinstance(node.value, bool) or not isinstance(node.value, (int, float))):
            raise ExpressionError(f"{text!r}: only integer, float and string literals are allowed")
        if isinstance(node, ast.Name) and node.id in (DEREF, ADDRESS_OF):
            continue
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and not (
                isinstance(node.left, ast.Name) and casts.decode(node.left.id) is not None):
            raise ExpressionError(f"{text!r} is not a valid expression")
        if not isinstance(node, _ALLOWED):
            raise ExpressionError(f"{text!r}: {type(node).__name__.lower()} is not supported")
    return tree


def ustack_depth(tree: ast.Expression) -> int | None:
    """For ``ustack`` (0: every frame) and ``ustack(N)`` (N), how many frames; None for any other
    expression."""
    body = tree.body
    if isinstance(body, ast.Name) and body.id == USTACK:
        return 0
    if isinstance(body, ast.Call) and isinstance(body.func, ast.Name) and body.func.id == USTACK:
        depth = body.args[0].value if body.args and isinstance(body.args[0], ast.Constant) else 0
        return depth if isinstance(depth, int) else 0
    return None


def _check_ustack(tree: ast.Expression, text: str) -> None:
    """ustack is a whole expression: ``ustack`` or ``ustack(N)`` with N a number of frames."""
    mentions = [node for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == USTACK]
    if not mentions:
        return
    body = tree.body
    whole = body is mentions[0] or (isinstance(body, ast.Call) and body.func is mentions[0])
    if not whole or len(mentions) > 1:
        raise ExpressionError(f"{text!r}: ustack is a value of its own (the stack, folded), not part of another",
                              "--expr ustack, or --expr 'where=ustack(5)'")
    if isinstance(body, ast.Call) and body.args:
        depth = body.args[0]
        if not (isinstance(depth, ast.Constant) and isinstance(depth.value, int) and not isinstance(depth.value, bool)
                and 1 <= depth.value <= MAX_USTACK):
            raise ExpressionError(f"{text!r}: ustack(N) takes a number of frames, 1 to {MAX_USTACK}",
                                  "e.g. --expr 'ustack(5)'")


def _literal_places(tree: ast.Expression) -> set[int]:
    """The string literals in a place that takes one: a side of == or != (a chain of them),
    startswith()'s second argument."""
    places: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Eq, ast.NotEq)) for op in node.ops):
            places.update(id(side) for side in (node.left, *node.comparators))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "startswith" \
                and len(node.args) == 2:
            places.add(id(node.args[1]))
        elif isinstance(node, ast.Subscript):  # m["key"]: a Go map
            places.add(id(node.slice))
    return places


def called(tree: ast.AST) -> set[int]:
    """The ids of the nodes a tree calls (``str`` of ``str(p)``): names of built-ins, not
    variables (a C program's ``buf`` stays a variable)."""
    return {id(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}


def names(tree: ast.AST) -> set[str]:
    """The variables a tree names, as the user wrote them (not the built-ins it calls)."""
    calls = called(tree)
    return {source_name(node.id) for node in ast.walk(tree) if isinstance(node, ast.Name) and id(node) not in calls}


def uses(tree: ast.AST, names: frozenset[str]) -> set[str]:
    """Which of the built-ins ``names`` the tree calls (or names: ``ustack`` alone)."""
    return {node.func.id for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names} | \
        {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == USTACK and USTACK in names}


def _python_tree(source: str, text: str) -> ast.Expression:
    try:
        return ast.parse(source, mode="eval")
    except (SyntaxError, ValueError):  # ValueError: e.g. an integer literal of thousands of digits
        raise ExpressionError(f"{text!r} is not a valid expression") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(f"{text!r} is nested too deeply") from None


def _depth(tree: ast.AST) -> int:
    """The tree's depth, without recursion."""
    deepest = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def _tokens(text: str) -> list[tuple[str, str]]:
    tokens: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        match = TOKEN.match(text, pos)
        if not match or match.end() == pos:
            bad = text[pos:].lstrip()[:1]
            raise ExpressionError(f"{text!r}: unexpected {bad!r}")
        kind = match.lastgroup or ""
        tokens.append((kind, match.group(kind)))
        pos = match.end()
    return tokens


def _to_python(text: str) -> str:
    """Rewrite C/Go spellings into Python's; unary ``*X`` becomes ``__deref__(X)``."""
    out: list[str] = []
    tokens = _tokens(text)
    closers: list[int] = []  # per open deref: paren depth at which its operand ends
    depth = 0
    previous: str | None = None
    i = 0
    while i < len(tokens):
        kind, tok = tokens[i]
        if kind == "op" and tok in ("*", "&") and previous in _UNARY_BEFORE:
            out.append(f"{DEREF if tok == '*' else ADDRESS_OF}(")
            closers.append(depth)
            previous = tok
            i += 1
            continue
        if kind == "op" and tok == "(" and previous in _UNARY_BEFORE:
            cast = _cast_at(tokens, i, text)
            if cast is not None:  # (T *) X -> __cast_T_1__ @ X
                name, i = cast
                out.append(f"({name} @")  # closed after its operand, as a dereference is
                closers.append(depth)
                previous = "("
                continue
        if kind == "reg":
            tok = f"{REGISTER_PREFIX}{tok[1:]}__"
            kind = "name"
        if kind == "str":
            tok = _python_string(tok, text)
        if kind == "op" and tok in ("(", "["):
            depth += 1
        elif kind == "op" and tok in (")", "]"):
            depth -= 1
        if kind == "name" and (keyword.iskeyword(tok) or tok.startswith(KEYWORD_PREFIX)):
            tok = KEYWORD_PREFIX + tok
        out.append({"->": ".", "&&": "and", "||": "or", "!": "not"}.get(tok, tok))
        previous = tok
        i += 1
        # a dereference's operand ends after a primary and its trailers
        while closers and closers[-1] == depth and _operand_ends(tokens, i, kind, tok):
            out.append(")")
            closers.pop()
    if closers:
        raise ExpressionError(f"{text!r}: '*', '&' or a cast needs an operand")
    return " ".join(out)


def _cast_at(tokens: list[tuple[str, str]], i: int, text: str) -> tuple[str, int] | None:
    """At a '(': ``(TYPE *...)`` followed by an operand is a cast: its encoded name and the
    index after its ')'. An unknown type with a '*' is an error; without one it is taken as
    a parenthesized expression."""
    words: list[str] = []
    stars = 0
    j = i + 1
    while j < len(tokens) and tokens[j][0] == "name" and not stars:
        words.append(tokens[j][1])
        j += 1
    while j < len(tokens) and tokens[j] == ("op", "*"):
        stars += 1
        j += 1
    if not words or j >= len(tokens) or tokens[j] != ("op", ")"):
        return None
    follows = tokens[j + 1] if j + 1 < len(tokens) else None
    starts_operand = ("(", "-", "~", "!", "*", "+", "&")
    if follows is None or not (follows[0] in ("name", "num", "reg") or follows[1] in starts_operand):
        return None
    cast = casts.lookup(words, stars)
    if cast is None:
        if stars or all(casts.known_word(w) for w in words) or len(words) > 1:
            raise ExpressionError(f"{text!r}: unknown type {' '.join(words)!r} in a cast",
                                  f"casts know {', '.join(casts.KNOWN)} (and pointers to them)")
        return None  # (x) -y: a parenthesized name
    return casts.encode(cast), j + 1


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "a": "\a",
            "b": "\b", "f": "\f", "v": "\v"}


def _python_string(token: str, text: str) -> str:
    """A C/Go string literal as a Python one (repr): the escapes C and Go share, and \\xNN as
    a byte (as C and Go mean it: "caf\\xc3\\xa9" is "café"), the bytes read as UTF-8 as the
    target's strings are."""
    body, out, i = token[1:-1], bytearray(), 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out += char.encode()
            i += 1
            continue
        following = body[i + 1:i + 2]
        if following == "x" and re.fullmatch(r"[0-9a-fA-F]{2}", body[i + 2:i + 4]):
            out.append(int(body[i + 2:i + 4], 16))
            i += 4
        elif following in _ESCAPES:
            out += _ESCAPES[following].encode()
            i += 2
        else:
            raise ExpressionError(f"{text!r}: unknown escape \\{following} in a string literal")
    return repr(out.decode("utf-8", "replace"))


def register_name(python_name: str) -> str:
    """``rdi`` from ``__reg_rdi__`` (``$rdi`` as the user wrote it)."""
    return python_name.removeprefix(REGISTER_PREFIX).removesuffix("__")


def source_name(python_name: str) -> str:
    """The program's spelling of a name from the parsed tree."""
    return python_name.removeprefix(KEYWORD_PREFIX)


def _operand_ends(tokens: list[tuple[str, str]], i: int, kind: str, tok: str) -> bool:
    if kind == "op" and tok not in (")", "]"):
        return False  # still inside the operand (a unary op, '.', '->', '(' ...)
    following = tokens[i][1] if i < len(tokens) else None
    return following not in (".", "->", "[")
