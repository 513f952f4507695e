"""Rust's v0 symbol names (``_RNvNtCs1234_3std6thread5sleep``), demangled as rustc-demangle writes
them without their hashes: ``std::thread::sleep``, ``<std::sys::unix::Thread>::new::thread_start``,
``main::main::{closure#0}``. rustc's own standard library has used them since Rust 1.7x; the legacy
names (``_ZN...17h0123456789abcdefE``) go through the C++ demangler (demangle.py).

The name is the target's: it is read within bounds (MAX_NAME bytes, MAX_DEPTH nested paths and
types, MAX_OUTPUT characters written: back-references could otherwise multiply a short name), and
anything not understood gives None, never an exception.
"""

from __future__ import annotations

MAX_NAME = 4096
MAX_DEPTH = 64
MAX_OUTPUT = 2048
MAX_STEPS = 10_000
"""Paths, types and constants one name may make the reader read (a back-reference inside an impl
path, whose text is not written, would otherwise multiply the work without bound)."""

_BASIC = {"a": "i8", "b": "bool", "c": "char", "d": "f64", "e": "str", "f": "f32", "h": "u8", "i": "isize",
          "j": "usize", "l": "i32", "m": "u32", "n": "i128", "o": "u128", "s": "i16", "t": "u16", "u": "()",
          "v": "...", "x": "i64", "y": "u64", "z": "!", "p": "_"}


class _Invalid(Exception):
    pass


def demangle_v0(name: str) -> str | None:
    """The demangled name, or None when ``name`` is no v0 name this reader understands."""
    if not name.startswith("_R") or len(name) > MAX_NAME:
        return None
    text = name[2:]
    at = 0
    while at < len(text) and text[at].isdigit():  # an encoding version
        at += 1
    try:
        parser = _Parser(text, at)
        parser.path(in_value=True)
        return "".join(parser.out)
    except (_Invalid, IndexError, ValueError, RecursionError):
        return None


class _Parser:
    def __init__(self, text: str, at: int) -> None:
        self.text = text
        self.at = at
        self.out: list[str] = []
        self.size = 0
        self.depth = 0
        self.steps = 0
        """Paths, types and constants read (back-references read theirs again): bounded."""

    # -- reading --------------------------------------------------------------------

    def peek(self) -> str:
        return self.text[self.at] if self.at < len(self.text) else ""

    def next(self) -> str:
        if self.at >= len(self.text):
            raise _Invalid()
        c = self.text[self.at]
        self.at += 1
        return c

    def eat(self, c: str) -> bool:
        if self.peek() == c:
            self.at += 1
            return True
        return False

    def base62(self) -> int:
        if self.eat("_"):
            return 0
        value = 0
        while True:
            c = self.next()
            if c == "_":
                return value + 1
            if c.isdigit():
                digit = ord(c) - 48
            elif "a" <= c <= "z":
                digit = ord(c) - 97 + 10
            elif "A" <= c <= "Z":
                digit = ord(c) - 65 + 36
            else:
                raise _Invalid()
            value = value * 62 + digit
            if value > 1 << 64:
                raise _Invalid()

    def optional(self, tag: str) -> int:
        """``tag base62``, as a number one higher (0: absent)."""
        return self.base62() + 1 if self.eat(tag) else 0

    def decimal(self) -> int:
        """A decimal number: ``0`` alone, or digits not starting with 0."""
        start = self.at
        if self.eat("0"):
            return 0
        while self.peek().isdigit():
            self.at += 1
        if start == self.at:
            raise _Invalid()
        return int(self.text[start:self.at])

    def identifier(self) -> tuple[str, int]:
        """(name, disambiguator)."""
        disambiguator = self.optional("s")
        punycode = self.eat("u")
        length = self.decimal()
        self.eat("_")
        if self.at + length > len(self.text):
            raise _Invalid()
        name = self.text[self.at:self.at + length]
        self.at += length
        if punycode:
            name = "punycode{" + name + "}"
        return name, disambiguator

    # -- writing ------------------------------------------------------------------------

    def write(self, text: str) -> None:
        self.size += len(text)
        if self.size > MAX_OUTPUT:
            raise _Invalid()
        self.out.append(text)

    def nested(self) -> _Depth:
        return _Depth(self)

    def backref(self, then: str, in_value: bool = False) -> None:
        start = self.at - 1
        target = self.base62()
        if target >= start:
            raise _Invalid()
        saved = self.at
        self.at = target
        with self.nested():
            if then == "path":
                self.path(in_value)
            elif then == "type":
                self.type()
            else:
                self.const()
        self.at = saved

    # -- the grammar ----------------------------------------------------------------------

    def path(self, in_value: bool = False) -> None:
        with self.nested():
            tag = self.next()
            if tag == "C":
                self.write(self.identifier()[0])
            elif tag == "M":
                self.impl_path()
                self.write("<")
                self.type()
                self.write(">")
            elif tag == "X":
                self.impl_path()
                self.write("<")
                self.type()
                self.write(" as ")
                self.path()
                self.write(">")
            elif tag == "Y":
                self.write("<")
                self.type()
                self.write(" as ")
                self.path()
                self.write(">")
            elif tag == "N":
                namespace = self.next()
                if not namespace.isalpha():
                    raise _Invalid()
                self.path(in_value)
                name, disambiguator = self.identifier()
                if namespace.isupper():
                    kind = {"C": "closure", "S": "shim"}.get(namespace, namespace)
                    self.write("::{" + kind + (":" + name if name else "") + f"#{disambiguator}" + "}")
                else:
                    self.write("::" + name)
            elif tag == "I":
                self.path(in_value)
                self.write("::<" if in_value else "<")
                self.generic_args()
                self.write(">")
            elif tag == "B":
                self.backref("path", in_value)
            else:
                raise _Invalid()

    def impl_path(self) -> None:
        self.optional("s")
        saved = len(self.out), self.size
        self.path()
        del self.out[saved[0]:]  # rustc-demangle does not write the impl's own path
        self.size = saved[1]

    def generic_args(self) -> None:
        first = True
        while not self.eat("E"):
            if not first:
                self.write(", ")
            first = False
            if self.eat("L"):
                self.base62()
                self.write("'_")
            elif self.eat("K"):
                self.const()
            else:
                self.type()

    def type(self) -> None:
        with self.nested():
            c = self.next()
            if c in _BASIC:
                self.write(_BASIC[c])
            elif c in "RQ":
                self.write("&mut " if c == "Q" else "&")
                if self.eat("L"):
                    self.base62()
                self.type()
            elif c in "PO":
                self.write("*mut " if c == "O" else "*const ")
                self.type()
            elif c == "A":
                self.write("[")
                self.type()
                self.write("; ")
                self.const()
                self.write("]")
            elif c == "S":
                self.write("[")
                self.type()
                self.write("]")
            elif c == "T":
                self.write("(")
                count = 0
                while not self.eat("E"):
                    if count:
                        self.write(", ")
                    self.type()
                    count += 1
                self.write(",)" if count == 1 else ")")
            elif c == "F":
                self.fn_signature()
            elif c == "D":
                self.dyn_bounds()
            elif c == "B":
                self.backref("type")
            else:
                self.at -= 1
                self.path()

    def fn_signature(self) -> None:
        self.optional("G")
        unsafe = self.eat("U")
        abi = ""
        if self.eat("K"):
            abi = 'extern "C" ' if self.eat("C") else f'extern "{self.identifier()[0].replace("_", "-")}" '
        self.write(("unsafe " if unsafe else "") + abi + "fn(")
        first = True
        while not self.eat("E"):
            if not first:
                self.write(", ")
            first = False
            self.type()
        self.write(")")
        if self.peek() == "u":
            self.next()
        else:
            self.write(" -> ")
            self.type()

    def dyn_bounds(self) -> None:
        self.optional("G")
        self.write("dyn ")
        first = True
        while not self.eat("E"):
            if not first:
                self.write(" + ")
            first = False
            start = len(self.out)
            self.path()
            bindings = 0
            while self.eat("p"):
                name = self.identifier()[0]
                opened = "".join(self.out[start:])
                if bindings == 0 and opened.endswith(">"):  # Output = T goes inside the trait's <...>
                    self.out[start:] = [opened[:-1], ", "]
                else:
                    self.write(", " if bindings else "<")
                self.write(f"{name} = ")
                self.type()
                bindings += 1
            if bindings:
                self.write(">")
        if self.eat("L"):
            self.base62()

    def const(self) -> None:
        with self.nested():
            if self.eat("B"):
                self.backref("const")
                return
            if self.eat("p"):
                self.write("_")
                return
            self.type_of_const()

    def type_of_const(self) -> None:
        kind = self.next()
        negative = self.eat("n")
        start = self.at
        while self.peek() != "_":
            if self.next() not in "0123456789abcdef":
                raise _Invalid()
        digits = self.text[start:self.at]
        self.next()
        if kind == "b":
            self.write("true" if digits == "1" else "false")
        elif kind == "c":
            self.write(repr(chr(int(digits or "0", 16))) if int(digits or "0", 16) < 0x110000 else "'?'")
        else:
            value = int(digits, 16) if digits else 0
            self.write(("-" if negative else "") + str(value))


class _Depth:
    def __init__(self, parser: _Parser) -> None:
        self.parser = parser

    def __enter__(self) -> None:
        self.parser.depth += 1
        self.parser.steps += 1
        if self.parser.depth > MAX_DEPTH or self.parser.steps > MAX_STEPS:
            raise _Invalid()

    def __exit__(self, *_: object) -> None:
        self.parser.depth -= 1
