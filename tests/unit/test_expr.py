import ast

import pytest

from sampler.errors import ExpressionError
from sampler.language import expr


def python(text: str) -> str:
    return ast.unparse(expr.parse(text))


@pytest.mark.parametrize("text, tree", [
    ("b.w-b.r", "b.w - b.r"),
    ("b->w - b->r", "b.w - b.r"),
    ("main.ring.w-main.ring.r", "main.ring.w - main.ring.r"),
    ("*p", "__deref__(p)"),
    ("*p.x+1", "__deref__(p.x) + 1"),
    ("a * *p", "a * __deref__(p)"),
    ("(*p).x", "__deref__(p).x"),
    ("**pp", "__deref__(__deref__(pp))"),
    ("-*p[2]", "-__deref__(p[2])"),
    ("b.buf[b.r % 20000]", "b.buf[b.r % 20000]"),
    ("!x && y || z", "not x and y or z"),
    ("x != 1", "x != 1"),
    ("a <= b", "a <= b"),
    ("0x10 >> 2 & 3", "16 >> 2 & 3"),
    ("s.from", "s.__kw_from"),
    ("*(uint64_t *)(arg0 + 16)", "__deref__(__cast_uint64_t_1__ @ (arg0 + 16))"),
    ("((int32_t *)$rsi)[2]", "(__cast_int32_t_1__ @ __reg_rsi__)[2]"),
    ("x * (int)y", "x * (__cast_int_0__ @ y)"),
    ("(unsigned long)-x + 1", "__cast_unsigned_long_0__ @ -x + 1"),  # (cast @ -x) + 1
    ("(const char *)p", "__cast_char_1__ @ p"),
    ("(x) - y", "x - y"),
    ("len(b.buf) - cap(b.buf)", "len(b.buf) - cap(b.buf)"),
])
def test_accepted(text: str, tree: str) -> None:
    assert python(text) == tree


@pytest.mark.parametrize("text, message", [
    ("", "empty"),
    ("a;b", "one expression only"),
    ("a\nb", "one expression only"),
    ("a=b", "assignment"),
    ("a+=1", "assignment"),
    ("x++", "increments"),
    ("--x", "increments"),
    ("f(x)", "function calls"),
    ("&", "needs an operand"),
    ('"s"', "a string literal goes in"),
    ("1.5j", "not a valid expression"),
    ("x if y else z", "not a valid expression"),
    ("x[1:2]", "unexpected"),
    ("*", "needs an operand"),
    ("a.(T)", "not a valid expression"),
    ("b.w-", "not a valid expression"),
    ("(foo_t *)p", "unknown type 'foo_t' in a cast"),
    ("(uint64_t *)", "not a valid expression"),
    ("len(a, b)", "takes one argument"),
    ("print(x)", "only the built-ins buf, cap, len, startswith, str"),
])
def test_refused(text: str, message: str) -> None:
    with pytest.raises(ExpressionError, match=message):
        expr.parse(text)


def test_names() -> None:
    assert expr.parse_option("delta=b.w-b.r").name == "delta"
    assert expr.parse_option("delta=b.w-b.r").text == "b.w-b.r"
    assert expr.parse_option("b.w==b.r").name == "b.w==b.r"
    assert expr.parse_option(" x = y ").name == "x"
    assert expr.source_name("__kw_from") == "from"


def test_a_string_literals_hex_escapes_are_bytes_read_as_utf8() -> None:
    import ast as python_ast

    tree = expr.parse('name == "caf\\xc3\\xa9\\t\\"x\\""')
    assert python_ast.unparse(tree) == "name == 'café\\t\"x\"'"
