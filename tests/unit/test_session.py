"""The Session (the controller loop) against a fake backend and a fake clock: what it writes, when
it stops, and that it detaches on every way out. No process, no debugger: what is tested here is
the loop, not a backend (tests/integration drive the real ones)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from sampler.backends.base import Note, Stopping
from sampler.config import SessionConfig
from sampler.errors import TargetExited
from sampler.language import expr
from sampler.language.condition import Condition
from sampler.output import RowByRow
from sampler.sample import Reading, Sample
from sampler.session import Session
from sampler.stop import StopFlag


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeBackend(Stopping):
    """Gives ``values`` one reading at a time, each taking ``pause_s`` of the fake clock."""

    def __init__(self, clock: Clock, values: Sequence[int], columns: Sequence[str] = ("x",), per_tick: int = 1,
                 pause_s: float = 0.001, fail: Callable[[int], BaseException | None] = lambda n: None) -> None:
        self.clock, self.values, self.columns, self.per_tick = clock, list(values), list(columns), per_tick
        self.pause_s, self.fail = pause_s, fail
        self.calls: list[str] = []
        self.taken = 0

    def begin_tick(self) -> int:
        self.calls.append("tick")
        return self.per_tick

    def attach(self) -> None:
        self.calls.append("attach")
        failed = self.fail(0)
        if failed is not None:
            raise failed

    def _next(self) -> Reading:
        self.taken += 1
        failed = self.fail(self.taken)
        if failed is not None:
            raise failed
        self.clock.now += self.pause_s
        value = self.values.pop(0) if self.values else 0
        return Reading((value,) * len(self.columns), pause_us=self.pause_s * 1e6)

    def sample(self, stop: StopFlag) -> Reading:
        self.calls.append("sample")
        return self._next()

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if not self.values:
            self.clock.now = max(self.clock.now, until)
            return None
        return self._next()

    def idle(self, seconds: float, stop: StopFlag) -> None:
        self.clock.now += seconds

    def detach(self) -> None:
        self.calls.append("detach")

    def notes(self) -> list[Note]:
        return []

    @property
    def pids(self) -> list[int]:
        return [1]


class Rows(RowByRow):
    def __init__(self) -> None:
        self.begun = 0
        self.samples: list[Sample] = []
        self.closed = 0

    def begin(self) -> None:
        self.begun += 1

    def write(self, sample: Sample) -> None:
        assert self.begun == 1, "a row before the header"
        self.samples.append(sample)

    def close(self) -> None:
        self.closed += 1


def config(**given: object) -> SessionConfig:
    return SessionConfig(pid=4242, expressions=(expr.parse_option("x"),), **given)  # type: ignore[arg-type]


def run(backend: FakeBackend, clock: Clock, **given: object) -> tuple[Rows, Session]:
    rows = Rows()
    session = Session(config(**given), backend, [rows], clock=clock)
    session.run()
    return rows, session


def test_a_row_per_tick_on_the_grid_until_the_count() -> None:
    clock = Clock()
    backend = FakeBackend(clock, [5, 6, 7], pause_s=0.25)
    rows, session = run(backend, clock, interval_s=1.0, count=3)
    assert [s.seq for s in rows.samples] == [1, 2, 3]
    assert [s.reading.values for s in rows.samples] == [(5,), (6,), (7,)]
    # each tick on its deadline, 1 s apart, whatever the sample before took
    assert [round(s.elapsed_s, 6) for s in rows.samples] == [0.0, 1.0, 2.0]
    assert [s.pid for s in rows.samples] == [4242] * 3
    assert backend.calls.count("attach") == 1 and backend.calls[-1] == "detach"
    assert session.summary.samples == 3 and session.summary.misses == 0
    assert session.summary.pause_us.median() == pytest.approx(250_000, rel=0.05)


def test_the_duration_ends_the_ticks() -> None:
    clock = Clock()
    rows, _ = run(FakeBackend(clock, list(range(100))), clock, interval_s=1.0, duration_s=2.5)
    assert [round(s.elapsed_s) for s in rows.samples] == [0, 1, 2]


def test_a_sample_longer_than_the_interval_skips_ticks_and_says_so() -> None:
    clock = Clock()
    rows, session = run(FakeBackend(clock, [1, 2], pause_s=2.5), clock, interval_s=1.0, count=2)
    assert len(rows.samples) == 2
    # at 2.5 s tick 1 is a whole interval behind: passed over; tick 2 is taken 0.5 s late
    assert session.summary.skipped_ticks == 1
    assert round(rows.samples[1].elapsed_s, 3) == 2.5 and round(rows.samples[1].late_us) == 500_000


def test_every_probe_is_a_row_of_the_tick_and_the_count_cuts_a_tick_short() -> None:
    clock = Clock()
    backend = FakeBackend(clock, list(range(10)), columns=("probe", "x"), per_tick=2)
    rows, session = run(backend, clock, interval_s=1.0, count=3)
    assert [round(s.elapsed_s) for s in rows.samples] == [0, 0, 1]
    assert session.names == ["probe", "x"]  # the backend's columns, as it said them
    assert backend.calls.count("sample") == 3 and backend.calls.count("tick") == 2


def test_stop_when_ends_the_run_after_the_row_where_it_holds() -> None:
    clock = Clock()
    rows, session = run(FakeBackend(clock, [1, 9, 3, 4]), clock, interval_s=0.5,
                        stop_when=Condition("x > 5", ["x"]))
    assert [s.reading.values for s in rows.samples] == [(1,), (9,)]
    assert session.summary.stopped_by == "--stop-when"


def test_an_error_that_ends_the_run_keeps_the_rows_taken_and_detaches() -> None:
    clock = Clock()
    backend = FakeBackend(clock, [1, 2, 3], fail=lambda n: TargetExited("target process 4242 exited") if n == 3
                          else None)
    rows = Rows()
    session = Session(config(interval_s=1.0, count=5), backend, [rows], clock=clock)
    with pytest.raises(TargetExited):
        session.run()
    assert [s.reading.values for s in rows.samples] == [(1,), (2,)]
    assert backend.calls[-1] == "detach" and backend.calls.count("detach") == 1


def test_a_failed_attach_is_detached_and_writes_no_header() -> None:
    clock = Clock()
    backend = FakeBackend(clock, [1], fail=lambda n: TargetExited("gone") if n == 0 else None)
    rows = Rows()
    with pytest.raises(TargetExited):
        Session(config(), backend, [rows], clock=clock).run()
    assert backend.calls == ["attach", "detach"] and rows.begun == 0 and rows.samples == []


def test_tracing_writes_a_row_per_hit_until_the_count() -> None:
    clock = Clock()
    rows, session = run(FakeBackend(clock, [4, 5, 6, 7]), clock, every_hit=True, count=3, location="f")
    assert [s.reading.values for s in rows.samples] == [(4,), (5,), (6,)]
    assert session.summary.samples == 3


def test_tracing_ends_at_its_duration_with_no_hit() -> None:
    clock = Clock()
    start = clock.now
    rows, _ = run(FakeBackend(clock, []), clock, every_hit=True, duration_s=3.0, location="f")
    assert rows.samples == [] and clock.now - start == pytest.approx(3.0)


def test_a_trace_with_no_hit_says_every_10_s_that_it_is_alive(capsys: pytest.CaptureFixture[str]) -> None:
    # (the line's wait is the Session's own: a fake clock takes it in no time, where a real run took 11 s)
    clock = Clock()
    rows, _ = run(FakeBackend(clock, []), clock, every_hit=True, duration_s=25.0, location="never")
    said = [line for line in capsys.readouterr().err.splitlines() if "no hit" in line]
    assert rows.samples == []
    assert said == ["sampler: no hit in the last 10 s (0 in 10 s): the breakpoints are in at never",
                    "sampler: no hit in the last 10 s (0 in 20 s): the breakpoints are in at never"]
