"""The USDT argument specs (a parser's unit test: the values are checked on real processes in
tests/integration/test_usdt.py)."""

from __future__ import annotations

import pytest

from sampler.debuginfo import usdt
from sampler.language import expr


@pytest.mark.parametrize("spec, expression", [
    ("-4@%edi", "((int32_t)($rdi & 0xffffffff))"),
    ("8@%rax", "((uint64_t)$rax)"),
    ("1@%ah", "((uint8_t)(($rax >> 8) & 0xff))"),
    ("1@%sil", "((uint8_t)($rsi & 0xff))"),
    ("-2@%r9w", "((int16_t)($r9 & 0xffff))"),
    ("-4@$-7", "((int32_t)-7)"),
    ("8@-16(%rbp)", "(*(uint64_t *)($rbp + -16))"),
    ("8@0x10(%rsp)", "(*(uint64_t *)($rsp + 16))"),
    ("4@(%r12)", "(*(uint32_t *)($r12))"),
    ("-8@(%rax,%rdx,8)", "(*(int64_t *)($rax + $rdx * 8))"),
    ("8@(,%rdx,8)", "(*(uint64_t *)($rdx * 8))"),
    ("-4@40+CheckpointStats(%rip)", "(*(int32_t *)({symbol:CheckpointStats} + 40))"),
    ("-8@calls(%rip)", "(*(int64_t *)({symbol:calls}))"),
])
def test_each_form_becomes_an_expression_sampler_parses(spec: str, expression: str) -> None:
    argument = usdt.parse_argument(spec)
    assert argument.expression == expression
    expr.parse(usdt.resolved(argument, {"CheckpointStats": 0x1000, "calls": 0x2000}))


@pytest.mark.parametrize("spec", ["3@%rax", "8@%xmm0", "8@%fs:8", "4@foo", "8@", "@%rax", "8@%eax(%rbx)",
                                  "8@sym(%rbx)", "8@(%eax)", "8@-sym(%rip)", "8@a+b(%rip)"])
def test_what_cannot_be_read_is_a_bad_spec(spec: str) -> None:
    with pytest.raises(usdt.BadSpec):
        usdt.parse_argument(spec)


def test_a_symbol_the_module_lacks_is_a_bad_spec() -> None:
    with pytest.raises(usdt.BadSpec, match="no symbol 'missing'"):
        usdt.resolved(usdt.parse_argument("8@missing(%rip)"), {})


def test_more_than_twelve_arguments_is_a_bad_spec() -> None:
    with pytest.raises(usdt.BadSpec, match="over the 12"):
        usdt.parse_arguments(" ".join(["8@%rax"] * 13))


class _File:
    """A stand-in for the ELF file: every address is in a segment."""

    def bytes_at(self, vaddr: int, size: int) -> bytes:
        return b"\x90" * size

    def writable(self, vaddr: int, size: int) -> bool:
        return True


def _note(desc: bytes, owner: bytes = b"stapsdt\0", kind: int = 3) -> bytes:
    pad = lambda b: b + b"\0" * (-len(b) % 4)  # noqa: E731
    return len(owner).to_bytes(4, "little") + len(desc).to_bytes(4, "little") + kind.to_bytes(4, "little") \
        + pad(owner) + pad(desc)


def test_hostile_notes_are_read_bounded_and_never_raise() -> None:
    import random

    good = _note((0x1000).to_bytes(8, "little") * 2 + bytes(8) + b"p\0n\0-4@%edi\0")
    bad_spec = _note((0x1000).to_bytes(8, "little") * 2 + bytes(8) + b"p\0m\0-4@%zzz\0")
    claims_too_much = good[:4] + (1 << 30).to_bytes(4, "little") + good[8:]
    found = usdt._notes(good + bad_spec + claims_too_much, None, _File())  # type: ignore[arg-type]
    assert [(p.name, bool(p.problem)) for p in found] == [("n", False), ("m", True)]
    rng = random.Random(38)
    for _ in range(2000):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(200)))
        usdt._notes(good + data, None, _File())  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["4@$010", "8@08(%rbp)", "8@$" + "9" * 5000, "8@$0x" + "f" * 100,
                                  "8@" + "1+" * 80 + "1(%rbp)"])
def test_numbers_python_will_not_take_are_a_bad_spec_not_a_crash(spec: str) -> None:
    with pytest.raises(usdt.BadSpec):
        usdt.parse_argument(spec)
