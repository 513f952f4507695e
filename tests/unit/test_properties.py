"""Property tests: whatever a user types and whatever the target's memory holds, the parser and the
ptrace evaluator end in a value or in one of sampler's own errors with a message, never in a crash."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sampler.errors import SamplerError
from sampler.evaluation.evaluate import SampleError
from sampler.language import expr
from tests.unit.evaluator_world import FIELDS, NAMES, evaluator, standard_memory

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

LITERALS = st.one_of(st.integers(-(2**70), 2**70).map(str), st.sampled_from(
    ["0", "1", "-1", "0x10", "0xffffffffffffffff", "1e308", "2.5", ".5", "1e-300", "64", "1000000000000"]))
NAMES_OR_JUNK = st.one_of(st.sampled_from(NAMES), st.sampled_from(["nope", "from", "x1", "_"]))
NUMBERS = st.sampled_from(["ring->w", "ring->n", "ring->r", "ring->f", "ring->c", "small", "flag", "half", "arr[1]",
                           "s[0]", "inreg", "konst", "main.ring.w", "ring->next", "wide", "v"])
BINARY = ["+", "-", "*", "/", "%", "<<", ">>", "&", "|", "^", "==", "!=", "<", "<=", ">", ">=", "&&", "||"]
UNARY = ["-", "~", "!", "*", "+"]


def expressions() -> st.SearchStrategy[str]:
    leaf = st.one_of(LITERALS, NUMBERS, NUMBERS, NAMES_OR_JUNK)

    def grow(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(BINARY), inner).map(lambda t: f"{t[0]} {t[1]} {t[2]}"),
            st.tuples(st.sampled_from(UNARY), inner).map(lambda t: f"{t[0]}{t[1]}"),
            inner.map(lambda e: f"({e})"),
            st.tuples(inner, st.sampled_from(["->", "."]), st.sampled_from([*FIELDS, "nope", "len"]))
              .map(lambda t: f"{t[0]}{t[1]}{t[2]}"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
        )

    return st.recursive(leaf, grow, max_leaves=12)


def memories() -> st.SearchStrategy[dict[int, int]]:
    """The standard layout with some of its bytes replaced at random (pointers included)."""
    base = standard_memory()
    addresses = sorted(base)
    return st.dictionaries(st.sampled_from(addresses), st.integers(0, 255), max_size=40).map(
        lambda changes: {**base, **changes})


@SETTINGS
@given(st.text(max_size=200))
def test_any_text_parses_or_is_refused_with_a_message(text: str) -> None:
    try:
        parsed = expr.parse_option(text)
    except SamplerError as e:
        assert str(e).strip()
        return
    assert parsed.tree is not None


@SETTINGS
@given(st.text(alphabet="()[]*-!~+<>&|^.abring0123456789xe ", max_size=300))
def test_operator_soup_parses_or_is_refused_with_a_message(text: str) -> None:
    test_any_text_parses_or_is_refused_with_a_message.hypothesis.inner_test(text)  # type: ignore[attr-defined]


@SETTINGS
@given(expressions(), memories(), st.integers(-(2**64), 2**64))
def test_evaluation_ends_in_a_value_or_a_sampler_error(text: str, memory: dict[int, int], register: int) -> None:
    try:
        tree = expr.parse(text)
    except SamplerError as e:
        assert str(e).strip()
        return
    try:
        result = evaluator(memory, {"rdi": register}).value(tree)
    except (SampleError, SamplerError) as e:
        assert str(e).strip(), type(e)
        return
    assert result is None or isinstance(result, (int, float, str))
