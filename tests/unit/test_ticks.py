import pytest

from sampler.ticks import Schedule


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_ticks_sit_on_a_grid_and_do_not_drift() -> None:
    clock = FakeClock()
    schedule = Schedule(0.5, clock)
    deadlines = []
    for _ in range(5):
        tick = schedule.next_tick()
        assert tick is not None
        deadlines.append(tick.deadline)
        clock.now = tick.deadline + 0.2  # each sample takes 200 ms
    assert deadlines == [100.0, 100.5, 101.0, 101.5, 102.0]


def test_a_late_tick_is_recorded_as_late() -> None:
    clock = FakeClock()
    schedule = Schedule(1.0, clock)
    schedule.next_tick()
    tick = schedule.next_tick()
    assert tick is not None
    clock.now = tick.deadline + 0.3
    assert schedule.lateness(tick) == pytest.approx(0.3)
    clock.now = tick.deadline - 0.1
    assert schedule.lateness(tick) == 0.0


def test_missed_ticks_are_skipped_not_bunched() -> None:
    clock = FakeClock()
    schedule = Schedule(1.0, clock)
    schedule.next_tick()
    clock.now = 103.4  # the first sample took 3.4 s
    tick = schedule.next_tick()
    assert tick is not None
    assert (tick.index, tick.deadline, tick.skipped) == (3, 103.0, 2)
    assert schedule.lateness(tick) == pytest.approx(0.4)


def test_duration_ends_the_schedule() -> None:
    clock = FakeClock()
    schedule = Schedule(1.0, clock, duration_s=3.0)
    ticks = []
    while (tick := schedule.next_tick()) is not None:
        ticks.append(tick.index)
        clock.now = tick.deadline + 1.0
    assert ticks == [0, 1, 2]


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        Schedule(0)
