"""USDT probes: the static probes a program's authors left in it (``<sys/sdt.h>``'s DTRACE_PROBE,
SystemTap's notes), as bpftrace's ``usdt:`` and BCC's tplist read them.

Each probe site is one note in ``.note.stapsdt`` (owner "stapsdt", type 3). Its descriptor holds
three addresses (the site, the link-time address of ``.stapsdt.base``, the semaphore or 0), then
three strings: the provider, the name and the arguments, e.g. ``-4@%edi 8@-16(%rbp)``. When a
prelink or a strip moved ``.stapsdt.base``, the site moves by as much. A site is a ``nop``: a
probe there costs nothing until someone puts a breakpoint on it. A probe with a semaphore (a
16-bit counter in ``.probes``) runs its argument set-up only while the counter is non-zero:
whoever reads it counts itself in (sampler/backends/ptrace/semaphores.py).

The notes are the target's input: bounded (``MAX_PROBES``, each string within its note), and a
note that cannot be read (a bad argument spec, a site outside every loadable segment) is that
probe's ``problem``, said when that probe is asked for, never the run's end.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

from sampler.debuginfo.elffile import ElfFile

NOTE_TYPE = 3
OWNER = b"stapsdt\0"
MAX_PROBES = 100_000
"""Notes read from one file (PostgreSQL 15 has 71, python3.11 8, libstdc++ 3)."""
MAX_ARGUMENTS = 12
"""sys/sdt.h takes at most 12 arguments."""

_SIZES = {1: "int8_t", 2: "int16_t", 4: "int32_t", 8: "int64_t"}
_REGISTERS = {
    **{f"r{n}": (f"r{n}", 64, 0) for n in range(8, 16)},
    **{f"r{n}d": (f"r{n}", 32, 0) for n in range(8, 16)},
    **{f"r{n}w": (f"r{n}", 16, 0) for n in range(8, 16)},
    **{f"r{n}b": (f"r{n}", 8, 0) for n in range(8, 16)},
    **{f"r{n}l": (f"r{n}", 8, 0) for n in range(8, 16)},
}
for _full, _short in (("rax", "a"), ("rbx", "b"), ("rcx", "c"), ("rdx", "d")):
    _REGISTERS.update({_full: (_full, 64, 0), f"e{_short}x": (_full, 32, 0), f"{_short}x": (_full, 16, 0),
                       f"{_short}l": (_full, 8, 0), f"{_short}h": (_full, 8, 8)})
for _full, _short in (("rsi", "si"), ("rdi", "di"), ("rbp", "bp"), ("rsp", "sp")):
    _REGISTERS.update({_full: (_full, 64, 0), f"e{_short}": (_full, 32, 0), _short: (_full, 16, 0),
                       f"{_short}l": (_full, 8, 0)})
_REGISTERS["rip"] = ("rip", 64, 0)
"""AT&T register name -> (the 64-bit register holding it, its width in bits, its shift)."""

_NUMBER = r"[-+]?(?:0[xX][0-9a-fA-F]+|\d+)"
_SPEC = re.compile(r"^(?P<size>[-+]?\d+)@(?P<operand>.+)$")
_REGISTER = re.compile(r"^%(?P<name>[a-z0-9]+)$")
_CONSTANT = re.compile(rf"^\$(?P<value>{_NUMBER})$")
_TERM = r"(?:0[xX][0-9a-fA-F]+|\d+|[A-Za-z_.$][\w.$@]*)"
_MEMORY = re.compile(rf"^(?P<displacement>[-+]?{_TERM}(?:[-+]{_TERM})*)?"
                     r"\((?P<base>%[a-z0-9]+)?(?:,(?P<index>%[a-z0-9]+)(?:,(?P<scale>[1248]))?)?\)$")
_TERMS = re.compile(rf"([-+]?)({_TERM})")


class BadSpec(ValueError):
    """An argument spec sampler cannot read (said for that probe)."""


@dataclass(frozen=True)
class Argument:
    """One argument of a probe: where the probe site has it, as one of sampler's expressions."""

    spec: str
    """As the note has it: ``-4@%edi``."""
    size: int
    signed: bool
    expression: str
    """Its value in sampler's expression language: ``(int32_t)$rdi``, ``*(int64_t *)($rbp + -16)``;
    a symbol's address (``8@counter(%rip)``) needs the module's bias: ``{symbol:counter}`` stands
    for it until the probe is placed (``resolved``)."""


@dataclass(frozen=True)
class Probe:
    provider: str
    name: str
    address: int
    """The site's link-time address (moved as ``.stapsdt.base`` moved)."""
    semaphore: int
    """The semaphore's link-time address; 0: none."""
    spec: str
    """The arguments as the note writes them."""
    arguments: tuple[Argument, ...]
    problem: str = ""
    """Why this probe cannot be used ('' when it can)."""

    @property
    def full_name(self) -> str:
        return f"{self.provider}:{self.name}"


def probes(file: ElfFile) -> list[Probe]:
    """Every USDT probe site of the file, in the order of its notes ([] without any; BadFile when
    its section table cannot be read)."""
    found = file.section_bytes(".note.stapsdt")
    if found is None:
        return []
    _, data = found
    base = file.section_bytes(".stapsdt.base", content=False)
    return list(_notes(data, base[0] if base is not None else None, file))


def _notes(data: bytes, base_section: int | None, file: ElfFile) -> list[Probe]:
    found: list[Probe] = []
    position = 0
    while position + 12 <= len(data) and len(found) < MAX_PROBES:
        name_size, desc_size, kind = struct.unpack_from("<III", data, position)
        name_at = position + 12
        desc_at = name_at + _aligned(name_size)
        position = desc_at + _aligned(desc_size)
        if position > len(data) or desc_size > len(data):
            break  # a note that claims more than the section holds: the rest is not read
        if kind != NOTE_TYPE or data[name_at:name_at + name_size] != OWNER or desc_size < 24:
            continue
        desc = data[desc_at:desc_at + desc_size]
        site, note_base, semaphore = struct.unpack_from("<QQQ", desc, 0)
        strings = desc[24:].split(b"\0")
        if len(strings) < 3:
            continue
        provider, name, spec = (s.decode("utf-8", "replace") for s in strings[:3])
        if base_section is not None and note_base:  # (prelink or strip moved it: the semaphore with it, as gdb)
            site += base_section - note_base
            semaphore += base_section - note_base if semaphore else 0
        try:
            arguments = parse_arguments(spec)
            problem = ""
        except BadSpec as e:
            arguments, problem = (), f"its argument spec {spec!r} cannot be read ({e})"
        if not problem and file.bytes_at(site, 1) is None:
            problem = f"its site {site:#x} is in none of the file's loadable segments"
        if not problem and semaphore and (semaphore % 2 or not file.writable(semaphore, 2)):
            problem = f"its semaphore {semaphore:#x} is not a counter in the file's writable data"
        found.append(Probe(provider, name, site, semaphore, spec, arguments, problem))
    return found


def _aligned(size: int) -> int:
    return (size + 3) & ~3


def parse_arguments(spec: str) -> tuple[Argument, ...]:
    """The arguments of one note (``-4@%edi 8@-16(%rbp)``), each as an expression."""
    words = spec.split()
    if len(words) > MAX_ARGUMENTS:
        raise BadSpec(f"{len(words)} arguments, over the {MAX_ARGUMENTS} sys/sdt.h allows")
    return tuple(parse_argument(word) for word in words)


MAX_SPEC = 128
"""Characters in one argument's spec (the longest seen: 28)."""


def parse_argument(word: str) -> Argument:
    """One argument spec: SIZE@OPERAND, SIZE 1, 2, 4 or 8 (negative: signed), the operand in
    AT&T syntax: a register, a constant, or memory at disp(base,index,scale) or symbol(%rip)."""
    if len(word) > MAX_SPEC:
        raise BadSpec(f"a spec of {len(word)} characters (at most {MAX_SPEC})")
    try:
        return _argument(word)
    except ValueError as e:  # (a number int() will not take: 010, too many digits)
        raise BadSpec(f"{word!r}: {e}") from None


def _number(text: str, word: str) -> int:
    value = int(text, 0)
    if not -(1 << 63) <= value < 1 << 64:
        raise BadSpec(f"{word!r}: {text} does not fit in 64 bits")
    return value


def _argument(word: str) -> Argument:
    match = _SPEC.match(word)
    if match is None:
        raise BadSpec(f"{word!r} is no SIZE@OPERAND")
    size = int(match.group("size"))
    if abs(size) not in _SIZES:
        raise BadSpec(f"{word!r}: size {size} (1, 2, 4 or 8, negative for signed)")
    signed = size < 0
    kind = _SIZES[abs(size)] if signed else "u" + _SIZES[abs(size)]
    operand = match.group("operand")
    return Argument(word, abs(size), signed, _operand(operand, kind, word))


def _operand(operand: str, kind: str, word: str) -> str:
    constant = _CONSTANT.match(operand)
    if constant:
        return f"(({kind}){_number(constant.group('value'), word)})"
    register = _REGISTER.match(operand)
    if register:
        return f"(({kind}){_register(register.group('name'), word)})"
    memory = _MEMORY.match(operand)
    if memory is None:
        raise BadSpec(f"{word!r}: the operand {operand!r} is no register, constant or memory reference")
    parts: list[str] = []
    base, index = memory.group("base"), memory.group("index")
    symbols, offset = _displacement(memory.group("displacement") or "", word)
    if base == "%rip":
        if index or len(symbols) != 1:
            raise BadSpec(f"{word!r}: only symbol(%rip) is read relative to rip")
        parts.append(f"{{symbol:{symbols[0]}}}" + (f" + {offset}" if offset else ""))
    else:
        if symbols:
            raise BadSpec(f"{word!r}: a symbol's address is read only relative to rip")
        if base:
            parts.append(_register(base[1:], word, address=True))
        if index:
            scale = memory.group("scale") or "1"
            parts.append(_register(index[1:], word, address=True) + (f" * {scale}" if scale != "1" else ""))
        if offset or not parts:
            parts.append(str(offset))
    return f"(*({kind} *)({' + '.join(parts)}))"


def _displacement(text: str, word: str) -> tuple[list[str], int]:
    """The symbols and the sum of the numbers of a displacement (``40+CheckpointStats``, ``-16``)."""
    symbols, offset = [], 0
    for sign, term in _TERMS.findall(text):
        if term[0].isdigit():
            offset += -_number(term, word) if sign == "-" else _number(term, word)
        elif sign == "-":
            raise BadSpec(f"{word!r}: a symbol subtracted")
        else:
            symbols.append(term)
    return symbols, offset


def _register(name: str, word: str, address: bool = False) -> str:
    found = _REGISTERS.get(name)
    if found is None:
        raise BadSpec(f"{word!r}: no x86-64 register %{name}")
    full, bits, shift = found
    if full == "rip":
        raise BadSpec(f"{word!r}: %rip is read only as symbol(%rip)")
    value = f"${full}" if not shift else f"(${full} >> {shift})"
    if address and bits != 64:
        raise BadSpec(f"{word!r}: a {bits}-bit register in an address")
    if bits == 64:
        return value
    return f"({value} & {(1 << bits) - 1:#x})"


def resolved(argument: Argument, symbol_address: dict[str, int]) -> str:
    """The argument's expression with each ``{symbol:NAME}`` replaced by its run-time address;
    BadSpec when the module has no such symbol."""
    def address(match: re.Match[str]) -> str:
        found = symbol_address.get(match.group(1))
        if found is None:
            raise BadSpec(f"{argument.spec!r}: no symbol {match.group(1)!r} in the module")
        return f"{found:#x}"

    return re.sub(r"\{symbol:([^}]+)\}", address, argument.expression)


def symbols_named(argument: Argument) -> list[str]:
    return re.findall(r"\{symbol:([^}]+)\}", argument.expression)
