"""The config builder (configure.py): from the command line's values to one run, with the
targets given by a fake Finder and a fake clock (no /proc, no process)."""

from __future__ import annotations

import sys

import pytest

from sampler import configure
from sampler.config import Switches
from sampler.configure import Options, build, check_columns
from sampler.errors import ProcessNotFound, UsageError
from sampler.output import Output


class Finder:
    """Finds nothing ``misses`` times, then ``found``."""

    def __init__(self, found: tuple[int, ...] = (4242,), misses: int = 0) -> None:
        self.found, self.misses = found, misses
        self.asked: list[tuple[object, ...]] = []

    def matching(self, pattern: str | None, container: str | None, every: bool) -> tuple[int, ...]:
        self.asked.append((pattern, container, every))
        return self._one()

    def running(self, exe: str, users: tuple[int, ...]) -> tuple[int, ...]:
        self.asked.append((exe, users))
        return self._one()

    def _one(self) -> tuple[int, ...]:
        if self.misses:
            self.misses -= 1
            raise ProcessNotFound("not yet")
        return self.found


def made(command: str = "attach", finder: Finder | None = None, **given: object) -> configure.Run:
    given.setdefault("pids", (4242,))
    if command == "attach":
        given.setdefault("exprs", ("x",))
    return build(Options(command, **given), finder or Finder(), environ={})  # type: ignore[arg-type]


def refused(command: str = "attach", **given: object) -> str:
    with pytest.raises(UsageError) as e:
        made(command, **given)
    return e.value.message


def test_attach_samples_every_second_unless_told_and_trace_every_hit() -> None:
    run = made()
    assert run.config.interval_s == 1.0 and not run.config.every_hit and run.how == "every 1s"
    assert made(rate=20.0).config.interval_s == pytest.approx(0.05)
    assert made(interval=0.25, count=7).config.count == 7
    traced = made("trace", locations=("f",), max_events=5)
    assert traced.config.every_hit and traced.config.count == 5 and traced.how == "on every hit"
    assert traced.config.location == "f" and traced.config.probes == ()


def test_what_the_options_cannot_mean_is_one_line() -> None:
    assert "exclude each other" in refused(interval=1.0, rate=5.0)
    assert "attach needs an --expr" in refused(exprs=())
    assert "--at is empty" in refused(locations=(" ",))
    assert "several --at need the ptrace backend" in refused("trace", locations=("f", "g"), backend="delve")
    assert "--user goes with --exe" in refused(users=("root",))
    assert "--all goes with --pgrep" in refused(every_match=True)
    assert "--pid excludes --pgrep" in refused(pgrep="x")
    assert "give the target" in refused(pids=())
    assert "--follow-forks needs --at" in refused(follow_forks=True)
    assert "several processes need the ptrace backend" in refused(pids=(1, 2), backend="delve-rpc")
    assert "--exe excludes --pid" in refused(exe=sys.executable)
    assert "no such program file" in refused(pids=(), exe="/nonexistent/program")
    assert "no such directory" in refused(debug_dirs=("/nonexistent",))
    assert "fixed column" in refused(exprs=("seq=x",))


def test_count_by_hist_and_stop_when_may_name_only_columns() -> None:
    assert "--count-by nope: no such column" in refused(count_by=("nope",))
    assert "--hist thread: no such column" in refused(hists=("thread",))
    assert "no column 'y'" in refused(stop_when="y > 1")
    assert made(count_by=("thread", "x"), hists=("x",)).output.count_by == ("thread", "x")
    # the probe column may be named once there is an --at: the backend says at build if it is there
    run = made("trace", locations=("f",), count_by=("probe",), stop_when='probe == "f"')
    assert run.config.stop_when is not None and run.config.stop_when.columns == {"probe"}
    with pytest.raises(UsageError, match="one breakpoint"):
        check_columns(run.config, run.output, ["x"])
    check_columns(run.config, run.output, ["probe", "x"])  # several places: fine
    plain = made()
    check_columns(plain.config, Output(), ["x"])


def test_each_expr_belongs_to_the_at_before_it_and_a_name_is_one_column() -> None:
    run = made("trace", locations=("f", "g"), exprs=("c=calls", "n=x", "n=y", "m=z"),
               order=((None, ("c=calls",)), ("f", ("n=x",)), ("g", ("n=y", "m=z"))))
    assert [(p.location, [e.name for e in p.expressions]) for p in run.config.probes] == \
        [("f", ["c", "n"]), ("g", ["c", "n", "m"])]
    assert [e.name for e in run.config.expressions] == ["c", "n", "m"]


def test_the_targets_are_found_and_waited_for() -> None:
    assert made(pids=(7, 7, 8)).config.pids == (7, 8)  # each once, a run of many
    assert made(pids=(7,)).config.pids == ()  # one process: not a run of many
    finder = Finder(found=(11, 12))
    run = made(pids=(), pgrep="srv", every_match=True, finder=finder)
    assert run.config.pid == 11 and run.config.pids == (11, 12) and finder.asked == [("srv", None, True)]
    # --wait-target: looked for again every 0.1 s until found, on the clock given
    now = [0.0]
    waiting = Finder(misses=3)
    built = build(Options("attach", exprs=("x",), pgrep="srv", wait_target=1.0), waiting, environ={},
                  clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s))
    assert built.config.pid == 4242 and len(waiting.asked) == 4 and now[0] == pytest.approx(0.3)
    with pytest.raises(ProcessNotFound):
        build(Options("attach", exprs=("x",), pgrep="srv"), Finder(misses=1), environ={})
    run = made(pids=(), exe=sys.executable, users=("0",), finder=Finder(found=(5,)))
    assert run.config.exe is not None and run.config.users == (0,) and run.config.pids == (5,)


def test_the_switches_come_from_the_environment_given() -> None:
    assert made().config.switches == Switches()
    switched = build(Options("attach", exprs=("x",), pids=(1,)), Finder(),
                     environ={"SAMPLER_EMULATE": "0", "SAMPLER_LET_RUN": "0", "SAMPLER_CHECK_EMULATION": "1"})
    # (a check of the emulation runs each emulated hit on the CPU too: no hit goes to an out-of-line copy then)
    assert switched.config.switches == Switches(let_run_s=0.0, emulate=False, check_emulation=True, outofline=False)
    copies_off = build(Options("attach", exprs=("x",), pids=(1,)), Finder(), environ={"SAMPLER_OUTOFLINE": "0"})
    assert copies_off.config.switches == Switches(outofline=False)
