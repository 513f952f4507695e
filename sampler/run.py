"""One sampling run, between the command line and the session.

In the worker process (safety/supervisor.py): inspect the target, put back what an
earlier run's journal says it left, pick and build the backend (backends/select.py),
assemble the writers (output/), run the Session, print the summary line and what the
backend has to say about what the rows mean. The CLI parses; the Session loops; this
module puts them together.
"""

from __future__ import annotations

import functools
import os
import signal
from collections.abc import Sequence
from typing import TypeVar

import click

from sampler import configure, notice
from sampler.backends.base import Backend
from sampler.backends.select import build, build_many, pick
from sampler.backends.select import repair as repair  # (sampler repair's, with the threads held for a jump)
from sampler.config import SessionConfig
from sampler.debuginfo import program
from sampler.errors import OutputLost, SamplerError, UsageError
from sampler.output import Output, Writer, outlet
from sampler.output.aggregate import Aggregate
from sampler.output.console import ConsoleWriter
from sampler.output.csv import OutFile, writer_for
from sampler.output.live import LiveView
from sampler.output.metrics import MetricsWriter, is_loopback
from sampler.probes.needs import Need, can
from sampler.safety import supervisor
from sampler.session import STOP_SIGNALS, Session
from sampler.target import procfs
from sampler.target.process import TargetProcess

T = TypeVar("T")


def sample(config: SessionConfig, output: Output, how: str) -> int:
    """Check the target, repair what an earlier run left, pick the backend, open the
    writers, run the session, print the summary and the backend's notes."""
    out, quiet = output.out, output.quiet
    target = program.inspect(config.pid) if not config.pids else None  # refuses a traced target
    stopped_before = {pid for pid in (config.pids or (config.pid,)) if procfs.state(pid) == "T"}
    # a bad --out is refused before any work; counting in sampler writes rows only to a file named
    rows = OutFile(out) if out != "-" or not output.aggregating else None
    writers: list[Writer] = []
    lost: SamplerError | None = None
    try:
        # built, not attached: nothing has touched the target yet
        backend: Backend = _fleet(config, quiet, how) if target is None else _one(config, target, quiet, how)
        try:
            names = backend.columns
            configure.check_columns(config, output, names)
            if rows is not None:
                writers.append(writer_for(rows, names, output.format))
                rows = None  # the writer's now
            writers += _more_writers(output, names, f"{len(config.pids)} processes" if config.pids else config.pid)
        except BaseException:
            backend.detach()
            raise
        session = Session(config, backend, writers, on_ready=None if quiet else functools.partial(
            _say_ready, config, backend, how))  # run() detaches it
        try:
            summary = procfs.gone_is_exit(config.pid, session.run)
        except SamplerError as e:
            if session.summary.samples:
                e.message += f" ({session.summary.samples} samples kept in {_where(out, output)})"
            raise
    finally:
        if rows is not None:  # the run ended before its writer was made
            rows.close()
        # a late Ctrl-C must not cut the output short (--count-by prints its tables here)
        previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
        try:
            for writer in writers:
                writer.close()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        try:
            outlet.settle()  # every row written (a stop signal cuts the wait to a second)
        except (SamplerError, OSError) as e:
            lost = e if isinstance(e, SamplerError) else OutputLost(f"cannot write the output: {e.strerror or e}")
    if lost is not None:
        raise lost
    for name, count in outlet.dropped():  # under --quiet too: rows are missing
        what = "per-sample lines" if name == "stderr" else "rows"
        notice.say(f"{count} {what} to {name} were dropped: its reader fell behind (sampler never waits for "
                   "its output while the target may be held; the seq column shows where)")
    if not quiet:
        median = summary.pause_us.median() / 1000
        ended = f", stopped by {summary.stopped_by}" if summary.stopped_by else ""
        click.echo(f"sampler: {summary.samples} samples ({summary.misses} with errors) to "
                   f"{_where(out, output)}; median pause {median:.2f}ms{ended}; "
                   f"{_left(config, stopped_before)}", err=True)
    if summary.overhead:  # said under --quiet too: it changes what the rows mean
        notice.say(summary.overhead)
    notes = backend.notes()
    seen = sum(note.seen for note in notes)
    where = " or ".join(probe.location for probe in config.probe_list())
    if config.every_hit and summary.samples == 0 and where and seen:  # under --quiet too: no row says it
        notice.say(f"no row of {where}: its probes saw {seen} call(s), none of which could make one (below)")
    elif config.every_hit and summary.samples == 0 and where:
        children = sum(note.let_go for note in notes)
        notice.say(f"no call of {where} was seen: the breakpoint was in, never hit "
                   + ("(the target was stopped by a signal, SIGSTOP or a terminal's, before the run began: "
                      "it runs no code until a SIGCONT)" if stopped_before == set(config.pids or (config.pid,))
                      and all(procfs.state(pid) == "T" for pid in stopped_before) else
                      f"in the target itself; {children} child process(es) it forked were let go untraced: "
                      "--follow-forks traces them" if children else
                      "(does the program call it? a program can have its own copy, e.g. jemalloc's malloc, "
                      "not libc's)"))
    for note in notes:  # under --quiet only what changes what the rows mean, or harms, and in-process counts
        if not quiet or note.matters:
            notice.say(note.text)
    return 0


def _one(config: SessionConfig, target: TargetProcess, quiet: bool, how: str) -> Backend:
    """The backend for a run of one process: an earlier run's bytes put back, the backend picked."""
    _repair(config.pid)
    choice = pick(config, target)
    if config.every_hit and config.max_overhead is not None and not can(choice.name, Need.REST):
        raise UsageError(f"--max-overhead with trace needs the ptrace backend ({choice.name} cannot take its "
                         "breakpoint out for a while)", "give --backend ptrace, or use attach")
    if choice.name != "ptrace" and (config.debug_dirs or config.symbols_file):
        notice.say(f"--debug-dir and --symbols are used by the ptrace backend only; {choice.name} finds debug "
             "info by its own rules (dlv's debug-info-directories)")
    if not quiet:
        click.echo(f"sampler: {choice.name} backend ({choice.reason}); attaching to PID {config.pid}", err=True)
    return procfs.gone_is_exit(config.pid, lambda: build(choice, config, target))


def _fleet(config: SessionConfig, quiet: bool, how: str) -> Backend:
    """A run of many processes (ptrace): each checked, repaired and built on its own; one that
    cannot be is left out with one line, and the run goes on with the others."""
    notice.once()  # what is true of each process of one program is said once

    def prepare(pid: int) -> TargetProcess:
        target = program.inspect(pid)
        _repair(pid)
        return target

    backend, failed, pids = build_many(config, prepare)
    for pid, why in failed:
        notice.say(f"PID {pid}: {why.message}; not sampled")
    if not quiet:
        shown = ", ".join(str(pid) for pid in pids[:8])
        more = f" and {len(pids) - 8} more" if len(pids) > 8 else ""
        which = f"{len(pids)} processes (PID {shown}{more})" if len(pids) > 1 else f"PID {shown}"
        extra = []
        if config.follow_forks:
            extra.append("the children they fork" if len(pids) > 1 else "the children it forks")
        if config.exe:
            extra.append(f"each process of {config.exe} that starts")
        more = f" (and {' and '.join(extra)})" if extra else ""
        click.echo(f"sampler: ptrace backend (one tracer for every process); attaching to {which}{more}", err=True)
    return backend


def _left(config: SessionConfig, stopped_before: set[int]) -> str:
    """How the targets were left: running, or stopped by a signal that was not sampler's."""
    pids = config.pids or (config.pid,)
    states = {pid: procfs.state(pid) for pid in pids}
    stopped = [pid for pid, state in states.items() if state == "T"]
    if not stopped:
        return "targets left running" if config.pids else "target left running"
    how = "as it was" if all(pid in stopped_before for pid in stopped) else "by a signal not sampler's"
    if not config.pids:
        return f"target left stopped ({how}: sampler does not resume a stop it did not make)"
    return (f"targets left running but {len(stopped)} stopped ({how}: sampler does not resume a stop "
            "it did not make)")


def _say_ready(config: SessionConfig, backend: Backend, how: str) -> None:
    """The line that sampling began: the probes are in (tracing), the first sample is due;
    the time is the whole command's, from the start of its process (the front's, in the worker)."""
    age = procfs.age_s(os.getppid() if supervisor.IN_WORKER else os.getpid())
    what = "breakpoints in" if config.every_hit else "ready"
    pids = list(backend.pids) or [config.pid]  # a run of many: those left
    shown = ", ".join(str(pid) for pid in pids[:8]) + (f" and {len(pids) - 8} more" if len(pids) > 8 else "")
    which = f"PID {pids[0]}" if len(pids) == 1 else f"{len(pids)} processes (PID {shown})"
    after = f" {age:.2f} s after start" if age is not None else ""
    click.echo(f"sampler: {what}{after}: sampling {which} {how}", err=True)


def _repair(pid: int) -> None:
    for fixed in repair(pid):
        if fixed.restored or fixed.problem:
            click.echo(f"sampler: an earlier run left PID {fixed.pid} patched: {fixed.note}", err=True)


def _more_writers(output: Output, names: Sequence[str], pid: int | str) -> list[Writer]:
    """Besides the rows: counts, metrics, and the view on the terminal."""
    writers: list[Writer] = []
    if output.aggregating:
        writers.append(Aggregate(names, output.count_by, output.hists, pid))
    if output.metrics is not None:
        metrics = MetricsWriter(output.metrics, names, pid if isinstance(pid, int) else 0, output.count_by,
                                output.hists)
        writers.append(metrics)
        exposed = "" if is_loopback(metrics.host) else \
            " (beyond loopback: anyone who reaches this port can read the sampled values)"
        notice.say(f"metrics at {metrics.url}{exposed}")
    if output.live:
        writers.append(LiveView(names, pid))
    elif not output.quiet and not output.aggregating:
        writers.append(ConsoleWriter(names, pids=not isinstance(pid, int)))
    return writers


def _where(out: str, output: Output | None = None) -> str:
    if output is not None and output.aggregating and out == "-":
        return "the counts on stdout"
    return "stdout" if out == "-" else out
