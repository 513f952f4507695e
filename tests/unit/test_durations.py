import pytest

from sampler.durations import format_duration, parse_duration


@pytest.mark.parametrize("text, seconds", [
    ("250ms", 0.25), ("1s", 1.0), ("2m", 120.0), ("1h", 3600.0), ("1.5", 1.5), (".5s", 0.5),
    ("100us", 1e-4), (" 3 s ", 3.0),
])
def test_parses(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "-1s", "0", "0ms", "1d", "1 s 2", "soon", "1e3"])
def test_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_formats() -> None:
    assert format_duration(0.1) == "100ms"
    assert format_duration(1.5) == "1.5s"
