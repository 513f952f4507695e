"""What a run needs of its backend (probes/needs.py), decided once: each need a backend named with
--backend lacks is refused by the config builder, in one line, before anything is touched; the same
options pass with the ptrace backend and with auto; and the columns and the timing are one decision."""

from __future__ import annotations

import pytest

from sampler.errors import UsageError
from sampler.language.expr import parse_option
from sampler.probes.columns import LATENCY, value_columns
from sampler.probes.needs import CAN, Need, can, timing
from tests.unit.test_configure import made

NEEDS: dict[Need, tuple[str, dict[str, object]]] = {
    Need.PLACES: ("trace", {"locations": ("f", "g")}),
    Need.TIMED: ("trace", {"locations": ("f",), "latency": True}),
    Need.PYTHON: ("trace", {"locations": ("py:app.handle",)}),
    Need.PROCESSES: ("attach", {"pids": (1, 2)}),
    Need.INPROCESS: ("trace", {"locations": ("f",), "probe": "inprocess"}),
    Need.PTRACE_PLACES: ("trace", {"locations": ("usdt:app:hit",)}),
}
"""Options that need each need the config builder decides (OWN_FUNCTIONS and REST are decided at the
backend's choice, with the program known: select.py and run.py)."""


def test_the_table_says_what_each_backend_can() -> None:
    assert CAN["ptrace"] == frozenset(Need)
    assert CAN["delve"] == CAN["delve-rpc"] == frozenset()
    assert all(can(None, need) and can("auto", need) for need in Need)  # not chosen yet: the chooser picks one
    assert not can("delve", Need.TIMED) and can("ptrace", Need.TIMED)


@pytest.mark.parametrize("need", list(NEEDS), ids=[need.name for need in NEEDS])
@pytest.mark.parametrize("backend", ["delve", "delve-rpc"])
def test_a_need_the_named_backend_lacks_is_refused_before_anything_is_touched(need: Need, backend: str) -> None:
    command, given = NEEDS[need]
    with pytest.raises(UsageError) as refused:
        made(command, backend=backend, **given)
    assert "ptrace" in refused.value.message and "\n" not in refused.value.message, refused.value.message
    assert refused.value.hint, refused.value  # what to do


@pytest.mark.parametrize("need", list(NEEDS), ids=[need.name for need in NEEDS])
@pytest.mark.parametrize("backend", ["ptrace", "auto"])
def test_the_same_options_pass_where_the_backend_can(need: Need, backend: str) -> None:
    command, given = NEEDS[need]
    run = made(command, backend=backend, **given)
    assert run.config.backend == backend


def test_the_timing_and_the_columns_are_decided_once() -> None:
    assert timing(False, None) is None and timing(True, None) == "--latency" and timing(False, "g") == "--to"
    assert made("trace", locations=("f",), latency=True).config.timing == "--latency"
    assert made("trace", locations=("f",), to="g").config.timing == "--to"
    assert made("trace", locations=("f",)).config.timing is None
    x, y = parse_option("x=a"), parse_option("y=b")
    assert value_columns([x, y], probe_column=False, timed=False) == ["x", "y"]
    assert value_columns([x, y], probe_column=True, timed=True) == ["probe", "x", "y", LATENCY]
