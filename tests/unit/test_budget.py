"""--max-overhead's arithmetic (sampler/budget.py) and the schedule's change of interval."""

from __future__ import annotations

import pytest

from sampler.budget import Budget, parse_share
from sampler.ticks import Schedule


def test_a_budget_is_a_percentage() -> None:
    assert parse_share("1%") == pytest.approx(0.01)
    assert parse_share(" 0.5% ") == pytest.approx(0.005)
    for bad in ("1", "0%", "101%", "x%", "-1%"):
        with pytest.raises(ValueError):
            parse_share(bad)


def test_a_sample_costs_its_pause_and_two_wake_ups_and_a_miss_costs_nothing() -> None:
    budget = Budget(0.01, wake_s=50e-6)
    assert budget.cost_s(20.0) == pytest.approx(120e-6)
    assert budget.cost_s(0.0) == 0.0


def test_the_interval_stretches_to_keep_the_budget_and_comes_back() -> None:
    budget = Budget(0.01, wake_s=50e-6)
    # ticks of 200 us at 1 kHz would stop the target 20 % of the time: every 20 ms keeps 1 %
    interval = 0.001
    for _ in range(20):
        interval = budget.interval_for(200e-6, 0.001, interval)
    assert interval == pytest.approx(0.02, rel=0.01)
    assert budget.stretched_to_s == pytest.approx(0.02, rel=0.01)
    # the stall falls to 5 us: the asked interval again, never shorter
    for _ in range(60):
        interval = budget.interval_for(5e-6, 0.001, interval)
    assert interval == pytest.approx(0.001)


def test_within_the_budget_the_interval_is_left_as_asked() -> None:
    budget = Budget(0.01, wake_s=50e-6)
    assert budget.interval_for(500e-6, 0.1, 0.1) == 0.1  # 0.5 % at 10 Hz
    assert budget.stretched_to_s == 0.0


def test_trace_rests_until_the_run_is_back_within_its_budget() -> None:
    budget = Budget(0.01, wake_s=50e-6)
    assert budget.rest_after(200e-6, 0.0) == pytest.approx(0.02)  # 200 us is 1 % of 20 ms
    assert budget.rest_after(200e-6, 0.05) == 0.0  # 400 us in 50 ms: within
    assert budget.reached(0.05) == pytest.approx(0.008)


def test_a_schedule_goes_on_at_a_new_interval_from_its_last_tick() -> None:
    now = [100.0]
    schedule = Schedule(0.001, lambda: now[0], duration_s=1.0)
    first = schedule.next_tick()
    assert first is not None and first.deadline == 100.0
    second = schedule.next_tick()
    assert second is not None and second.deadline == pytest.approx(100.001)
    schedule.retime(0.02)
    third = schedule.next_tick()
    assert third is not None and third.deadline == pytest.approx(100.021)
    assert schedule.origin == 100.0
    now[0] = 101.5  # the duration counts from the origin, whatever the interval
    assert schedule.next_tick() is None
