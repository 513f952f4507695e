"""The ptrace evaluator over a made-up program: values, C/Go arithmetic, per-sample errors."""

from __future__ import annotations

import pytest

from sampler.errors import ExpressionError
from sampler.evaluation.evaluate import SampleError
from sampler.language import expr
from tests.unit.evaluator_world import evaluator, standard_memory


def value(text: str, memory: dict[int, int] | None = None) -> object:
    return evaluator(standard_memory() if memory is None else memory).value(expr.parse(text))


@pytest.mark.parametrize("text, expected", [
    ("ring->w - ring->r", 7),
    ("ring.w - ring.r", 7),  # '.' on a pointer dereferences it
    ("main.ring.w - main.ring.r", 7),  # a package-qualified global
    ("(*ring).w", 12),
    ("ring->r - ring->w", 2**64 - 7),  # unsigned wraps at 64 bits
    ("ring->n", -3),
    ("ring->n * 2", -6),
    ("-7 / 2", -3),  # C truncates toward zero
    ("-7 % 2", -1),
    ("ring->n / 2", -1),
    ("ring->c", "GREEN"),  # enums by name
    ("ring->next", "0x0"),  # pointers in hex
    ("ring->f * 2", 5.0),
    ("arr[2]", 3),
    ("s[1]", 101),
    ("small - 1", 127),  # int8 wraps
    ("flag", "true"),
    ("!flag", "false"),
    ("ring->w > ring->r && ring->n < 0", "true"),
    ("half", 0.5),
    ("inreg + 1", 42),
    ("konst", -7),
    ("1 << 3", 8),
    ("ring->w >> 2", 3),
    ("ring->w << 64", 0),  # shifted out, as in Go
    ("ring->w << 1000000000000", 0),
    ("ring->n >> 100", -1),  # a negative value shifted right fills with ones
    ("1 << 1000000000000", 0),
    ("v", "0x1234"),
    ("*(uint64_t *)(0x2000 + 8)", 12),  # casts: reads only
    ("((int32_t *)0x2000)[4]", -3),
    ("((uint64_t *)ring)[1] - ((uint64_t *)ring)[0]", 7),
    ("(uint8_t)ring->n", 253),
    ("(int8_t)255", -1),
    ("(double)ring->w / 8", 1.5),
    ("ring->w * (int32_t)2", 24),
    ("(char *)0x7000", "ring"),  # a NUL-terminated string
    ("$rdi + 1", 42),
    ("w_atomic + 1", 13),  # std::atomic<T> is its T
    ("w_atomic", 12),
    ("rust_name", "ring"),  # String and &str are their text
    ("tag", "rin"),
    ("len(s)", 3),  # Go's len() and cap()
    ("cap(s) + 1", 4),
    ("len(arr)", 4),
])
def test_values(text: str, expected: object) -> None:
    assert value(text) == expected


@pytest.mark.parametrize("text, message", [
    ("ring->next->w", "null pointer"),
    ("arr[4]", "index 4 out of range"),
    ("s[3]", "index 3 out of range [0, 3)"),
    ("1 / (ring->w - 12)", "division by zero"),
    ("ring->w << -1", "negative shift count -1"),
    ("1 << -1", "negative shift count -1"),
    ("ring->w << (ring->n)", "negative shift count -3"),
    ("ring->f + 1e308 * 1e308 * (1 << 63) * (1 << 63)", ""),  # inf is a value, not an error
])
def test_problems_of_one_sample(text: str, message: str) -> None:
    if not message:
        assert value(text) == float("inf")
        return
    with pytest.raises(SampleError, match=message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        value(text)


def test_unreadable_memory_is_a_problem_of_one_sample() -> None:
    broken = {a: b for a, b in standard_memory().items() if not 0x2000 <= a < 0x2010}
    with pytest.raises(SampleError, match="cannot read 8 bytes at 0x2008"):
        value("ring->w", broken)


def test_a_huge_pointer_is_unreadable_not_a_crash() -> None:
    memory = standard_memory()
    for i, byte in enumerate((2**64 - 8).to_bytes(8, "little")):
        memory[0x2018 + i] = byte  # ring->next near the top of the address space
    with pytest.raises(SampleError):
        value("ring->next->w", memory)


@pytest.mark.parametrize("text, message", [
    ("nope", "no variable 'nope' among the globals"),
    ("ring->nope", "ring has no field 'nope'"),
    ("arr.x", "has no field 'x'"),
    ("*small", "cannot dereference int8_t"),
    ("small[1]", "cannot index int8_t"),
    ("r0 + 1", "ring is not a number"),
    ("ring->f % 2", "does not apply to floats"),
    ("ring->f[0]", "cannot index double"),
    ("wide", "16-byte floats are not supported"),
    ("*v", "cannot dereference void*"),
])
def test_errors_in_the_expression_itself(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message.replace("*", r"\*").replace("[", r"\[")):
        value(text)


# -- strings: literals, comparisons, str(), buf(), startswith() ---------------------------
# 0x7000 holds "ring\0" then '?'s; rust_name is String "ring" (len 4), tag is &str "rin" (len 3)

@pytest.mark.parametrize("text, expected", [
    ("str(0x7000)", "ring"),  # up to the NUL
    ("str(0x7000, 2)", "ri"),  # at most n bytes
    ("str(0x7000, 6)", "ring"),  # a NUL within n ends it
    ("str(0x7005, 3)", "???"),  # no NUL: n bytes
    ("str(rust_name)", "ring"),  # a string with a length: its text
    ("str(tag, 2)", "ri"),
    ("buf(0x7000, 5)", "72696e6700"),
    ("buf(r0, 2)", "0500"),  # the bytes of a struct itself
    ("buf(0x7000, 0)", ""),
    ('rust_name == "ring"', "true"),
    ('tag == "ring"', "false"),
    ('tag != "ring"', "true"),
    ('str(0x7000) == "ring"', "true"),
    ('"ring" == str(0x7000, 4)', "true"),
    ('startswith(rust_name, "ri")', "true"),
    ('startswith(rust_name, "rx")', "false"),
    ('startswith(str(0x7000), "ring\\x00")', "false"),
    ('rust_name == "ring" && ring->n < 0', "true"),
    ('(char *)0x7000 == "ring"', "true"),
])
def test_strings(text: str, expected: object) -> None:
    assert value(text) == expected


@pytest.mark.parametrize("text, message", [
    ("str(0)", "null pointer"),
    ("str(0xa000, 4)", "cannot read"),
    ("buf(0x7000, 5000)", "between 0 and 4096"),
])
def test_string_problems_of_one_sample(text: str, message: str) -> None:
    with pytest.raises(SampleError, match=message):
        value(text)


@pytest.mark.parametrize("text, message", [
    ('ring->n == "x"', "not a string"),
    ('"a" + 1', "string literal goes in"),
    ('str("a")', "string literal goes in"),
    ("buf(0x7000)", "takes two arguments"),
    ('startswith(ring->n)', "takes two arguments"),
    ('ring->w < "x"', "string literal goes in"),
])
def test_string_mistakes(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        value(text)


# -- data symbols without a type, and & ---------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("&sym", "0x2000"),
    ("&sym + 8", "0x2008"),  # bytes, not elements: a data symbol has no element size
    ("*(uint64_t *)&sym", 5),
    ("*(uint64_t *)(&sym + 8)", 12),
    ("*(int32_t *)(&sym + 16)", -3),
    ("buf(&sym, 4)", "05000000"),
    ("buf(sym, 2)", "0500"),
    ("&r0.w", "0x2008"),
    ("*(uint64_t *)&r0.w - r0.r", 7),
    ("&sym - &r0", 0),  # two addresses: a number
])
def test_data_symbols_and_addresses(text: str, expected: object) -> None:
    assert value(text) == expected


@pytest.mark.parametrize("text", ["sym", "sym.x", "sym + 1"])
def test_a_data_symbol_alone_says_it_needs_a_cast(text: str) -> None:
    with pytest.raises(ExpressionError, match=r"'sym' has no type in the debug info .*\*\(uint64_t \*\)&sym"):
        value(text)


# -- Go maps by key ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ('m["ring"]', 41),
    ('m["ri"]', 42),
    ('m["rin"]', 43),  # in the overflow bucket; the moved "ring" there is skipped
    ('m["ring"] + m["rin"]', 84),
])
def test_go_map_by_key(text: str, expected: object) -> None:
    assert value(text) == expected


@pytest.mark.parametrize("text, message", [
    ('m["x"]', "key not found"),
    ('loop["x"]', "over 65536 cells"),  # an overflow chain that loops ends, bounded
])
def test_go_map_problems_of_one_sample(text: str, message: str) -> None:
    with pytest.raises(SampleError, match=message):
        value(text)


def test_go_map_keyed_by_strings_refuses_a_number() -> None:
    with pytest.raises(ExpressionError, match="keys are strings"):
        value("m[1]")
