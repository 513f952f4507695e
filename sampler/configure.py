"""From the command line's values to one run: the SessionConfig, the probes, the Output and the
words for the schedule, built and checked in one place (py-spy's config.rs), with unit tests of
its own (tests/unit/test_configure.py). No click here: cli.py parses and prints, this decides.

Finding the targets (--pid, --pgrep, --container, --exe, and --wait-target's wait for them) is
a ``Finder``, so that a test can give the processes instead of /proc.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

from sampler.config import Probe, SessionConfig, Switches
from sampler.durations import format_duration
from sampler.errors import ExpressionError, ProcessNotFound, UsageError
from sampler.language import expr
from sampler.language.condition import NUMERIC_COLUMNS, Condition
from sampler.output import Output
from sampler.places import is_python, ptrace_only
from sampler.probes.columns import LATENCY, value_columns
from sampler.probes.needs import Need, can, timing
from sampler.sample import PROBE, RESERVED
from sampler.target import pgrep

T = TypeVar("T")
GROUPED_BY = ("thread", "pid")
"""Columns --count-by may name besides the values: every row has them."""


@dataclass(frozen=True)
class Options:
    """What attach or trace was given, as click parsed it (click's defaults, nothing decided)."""

    command: str
    """attach or trace (stack: only its targets are read, targets_of)."""
    locations: tuple[str, ...] = ()
    exprs: tuple[str, ...] = ()
    order: tuple[tuple[str | None, tuple[str, ...]], ...] = ()
    """Each --at with the --expr values after it, in the order given; the first with None: the
    --expr values before any --at. Empty: every --expr before every --at."""
    pids: tuple[int, ...] = ()
    pgrep: str | None = None
    every_match: bool = False
    exe: str | None = None
    users: tuple[str, ...] = ()
    follow_forks: bool = False
    wait_target: float | None = None
    container: str | None = None
    duration: float | None = None
    out: str = "-"
    out_format: str | None = None
    backend: str = "auto"
    quiet: bool = False
    live: bool = False
    metrics: str | None = None
    debug_dirs: tuple[str, ...] = ()
    symbols_file: str | None = None
    max_probes: int = 1000
    count_by: tuple[str, ...] = ()
    hists: tuple[str, ...] = ()
    stop_when: str | None = None
    max_overhead: float | None = None
    no_guardian: bool = False
    interval: float | None = None
    rate: float | None = None
    count: int | None = None
    hit_timeout: float = 2.0
    max_events: int | None = None
    probe: str = "auto"
    latency: bool = False
    to: str | None = None


@dataclass(frozen=True)
class Run:
    """One run of attach or trace, ready for run.sample."""

    config: SessionConfig
    output: Output
    how: str
    """How often it samples, for the lines that say so ('every 1s', 'on every hit')."""


class Finder(Protocol):
    """How the targets are found (pgrep.py over /proc; a test's fake)."""

    def matching(self, pattern: str | None, container: str | None, every: bool) -> tuple[int, ...]: ...

    def running(self, exe: str, users: tuple[int, ...]) -> tuple[int, ...]: ...


class ProcFinder:
    """The processes of /proc (pgrep.py)."""

    def matching(self, pattern: str | None, container: str | None, every: bool) -> tuple[int, ...]:
        return tuple(pgrep.find_all(pattern, container)) if every else (pgrep.find(pattern, container),)

    def running(self, exe: str, users: tuple[int, ...]) -> tuple[int, ...]:
        found = tuple(pgrep.running(exe, users=users))
        if not found:
            whose = f" of user {', '.join(map(str, users))}" if users else ""
            raise ProcessNotFound(f"--exe {exe}: no process{whose} runs it",
                                  "start it, or give --wait-target DURATION to wait for the first")
        return found


def build(options: Options, finder: Finder | None = None, environ: Mapping[str, str] = os.environ,
          clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> Run:
    """The run the options ask for; UsageError (one line) for what they cannot mean, and
    ProcessNotFound when the targets are not there (by the end of --wait-target)."""
    finder = finder or ProcFinder()
    options = _implied_stacks(options)
    tracing = options.command == "trace"
    if not tracing:
        if options.interval is not None and options.rate is not None:
            raise UsageError("--interval and --rate exclude each other", "give one of them")
        if not options.exprs:
            raise UsageError("attach needs an --expr", "e.g. --expr 'delta=b.w-b.r'; to count calls, "
                             "sampler trace --at FUNCTION without --expr")
    locations = options.locations
    for location in locations:
        if not location.strip():
            raise UsageError("--at is empty", "give a function or FILE:LINE")
    for option, location in (*(("--at", at) for at in locations), *([("--to", options.to)] if options.to else [])):
        if is_python(location) and (option == "--to" or not can(options.backend, Need.PYTHON) or options.follow_forks
                                    or options.max_overhead is not None):
            raise UsageError(f"{option} {location}: a Python function's probe is read by sampler attach and trace "
                             "(ptrace), without --to, --follow-forks or --max-overhead yet",
                             "e.g. sampler trace --pid P --at py:app.handle --expr 'n=py:n'")
        only = ptrace_only(location)
        if only and not can(options.backend, Need.PTRACE_PLACES):
            raise UsageError(f"{option} {location}: {only} is read by the ptrace backend (--backend "
                             f"{options.backend})", "give --backend ptrace")
    probes: tuple[Probe, ...] = ()
    if len(locations) > 1:
        probes, expressions = _probes(options.order or ((None, options.exprs),), locations)
        if not can(options.backend, Need.PLACES):
            raise UsageError(f"several --at need the ptrace backend (--backend {options.backend} breaks at one "
                             "place)", "give --backend ptrace, or one --at")
    else:
        expressions = _expressions(options.exprs)
    stacks = [e.text for e in expressions if expr.ustack_depth(e.tree) is not None]
    if stacks and not locations:
        raise UsageError(f"--expr {stacks[0]}: the stack of a thread stopped at a breakpoint: give --at",
                         "e.g. --at FUNCTION --expr ustack; for every thread's stack now, sampler stack")
    exe = _program(options.exe) if options.exe is not None else None
    wait = options.wait_target or 0.0
    if exe is not None:
        if options.pids or options.pgrep is not None or options.container is not None:
            raise UsageError("--exe excludes --pid, --pgrep and --container", "give the target one way")
        users = _users(options.users)
        pids = _waiting(lambda: finder.running(exe, users), wait, clock, sleep)
    else:
        if options.users:
            raise UsageError("--user goes with --exe", "give --exe PATH, or name the process by --pid or --pgrep")
        users = ()
        pids = _targets(options, finder, clock, sleep)
    many = len(pids) > 1 or options.follow_forks or exe is not None
    if options.follow_forks and not locations:
        raise UsageError("--follow-forks needs --at (reading globals without a breakpoint traces nothing, so no "
                         "fork is seen)", "give --at FUNCTION, or sample the children by --exe or --pgrep --all")
    if many and not can(options.backend, Need.PROCESSES):
        what = "--follow-forks needs" if len(pids) == 1 else "several processes need"
        raise UsageError(f"{what} the ptrace backend (--backend {options.backend}: one dlv follows one process)",
                         "give --backend ptrace, or one process")
    _check_latency(options, expressions)
    probe_kind = _probe_kind(options, expressions, probes, many)
    columns = value_columns(expressions, bool(locations), timing(options.latency, options.to) is not None)
    """The columns the options may name: the backend says once built whether the probe column is there."""
    if tracing:
        specific: dict[str, object] = {"count": options.max_events, "every_hit": True}
        how = "on every hit"
    else:
        interval = options.interval or (1.0 / options.rate if options.rate else 1.0)
        specific = {"interval_s": interval, "count": options.count, "hit_timeout_s": options.hit_timeout}
        how = f"every {format_duration(interval)}"
    config = SessionConfig(pid=pids[0], pids=pids if many else (), follow_forks=options.follow_forks, exe=exe,
                           users=users, expressions=expressions, location=locations[0] if locations else None,
                           probes=probes, duration_s=options.duration, backend=options.backend,
                           guardian=not options.no_guardian, debug_dirs=_debug_dirs(options.debug_dirs),
                           symbols_file=options.symbols_file, quiet=options.quiet, max_probes=options.max_probes,
                           stop_when=_condition(options.stop_when, columns), max_overhead=options.max_overhead,
                           switches=Switches.from_environment(environ), probe_kind=probe_kind,
                           latency=options.latency, latency_to=options.to,
                           **specific)  # type: ignore[arg-type]
    for option, names, extra in (("--count-by", options.count_by, list(GROUPED_BY)), ("--hist", options.hists, [])):
        for name in names:
            if name not in (*columns, *extra):
                raise UsageError(f"{option} {name}: no such column", f"name an expression (--expr {name}=EXPR) "
                                 f"and give that name; the columns are {', '.join([*columns, *extra]) or 'none'}")
    output = Output(options.out, options.out_format, options.quiet, options.live, options.metrics,
                    options.count_by, options.hists)
    return Run(config, output, how)


PROBE_KINDS = ("auto", "inprocess", "int3")


def _check_latency(options: Options, expressions: Sequence[expr.Expression]) -> None:
    """--latency and --to: what they cannot mean, refused before attaching."""
    names_retval = [e.text for e in expressions if "retval" in expr.names(e.tree)]
    what = timing(options.latency, options.to)
    if names_retval and not options.latency:
        raise UsageError(f"--expr {names_retval[0]}: retval is the value a function returned, read at its return",
                         "add --latency (a row per call, written when it returns)")
    if what is None:
        return
    if options.latency and options.to is not None:
        raise UsageError("--latency and --to exclude each other", "--latency times each call of the --at "
                         "function to its return; --to times from a hit of --at to the next hit of --to")
    if options.command != "trace":
        raise UsageError(f"{what} goes with sampler trace (a row per call)", "give sampler trace --at F --latency")
    if not can(options.backend, Need.TIMED):
        raise UsageError(f"{what} needs the ptrace backend (--backend {options.backend})", "give --backend ptrace")
    if options.probe == "inprocess" and options.to is not None:
        raise UsageError("--to: its places are int3s (in-process --to is not built yet)",
                         "give --probe auto or --probe int3")
    if any(e.name == LATENCY for e in expressions):
        raise UsageError(f"--expr {LATENCY}: that name is the column {what} adds", "name the expression otherwise")
    if options.to is not None and not options.to.strip():
        raise UsageError("--to is empty", "give the place that ends the time: a function, FILE:LINE or *ADDR")



def _probe_kind(options: Options, expressions: Sequence[expr.Expression], probes: Sequence[Probe],
                many: bool) -> str:
    """The kind of probe the run puts: --probe inprocess refuses before attaching what in-process
    probes do not do yet; auto (the default) is int3 where no site could have one (Delve's backends,
    several processes), else each site's own choice."""
    if options.probe not in PROBE_KINDS:
        raise UsageError(f"--probe {options.probe}: no such kind", f"give one of {', '.join(PROBE_KINDS)}")
    python = options.command == "attach" and any(is_python(location) for location in options.locations)
    if options.probe == "int3" or (options.command != "trace" and not python) or options.to is not None:
        return "int3"  # (attach: a Python probe's places take the in-process test; every other place an int3)
    if options.probe == "auto":
        fits = not many and can(options.backend, Need.INPROCESS)
        return "auto" if fits else "int3"
    if not can(options.backend, Need.INPROCESS):
        raise UsageError(f"--probe {options.probe} needs the ptrace backend (--backend {options.backend} puts "
                         "Delve's breakpoints)", "give --backend ptrace, or --probe int3")
    if many:
        raise UsageError("--probe inprocess traces one process (not --follow-forks, --exe or several)",
                         "give --probe auto (an int3 where in-process cannot go), or --probe int3")
    return "inprocess"


def _implied_stacks(options: Options) -> Options:
    """--count-by ustack (or ustack(N)) with no --expr of that name: the expression too, read at every
    --at, as bpftrace's @[ustack] = count() needs nothing more."""
    given = set()
    for text in options.exprs:
        try:
            given.add(expr.parse_option(text).name)
        except ExpressionError:
            pass  # said where the expressions are parsed
    implied = tuple(name for name in options.count_by if name not in given and _is_stack(name))
    if not implied:
        return options
    order = options.order
    if order and order[0][0] is None:
        order = ((None, (*implied, *order[0][1])), *order[1:])
    else:
        order = ((None, implied), *order)
    return dataclasses.replace(options, exprs=(*implied, *options.exprs), order=order)


def _is_stack(text: str) -> bool:
    try:
        return expr.ustack_depth(expr.parse(text)) is not None
    except ExpressionError:
        return False


def targets_of(options: Options, finder: Finder | None = None) -> tuple[int, ...]:
    """The processes --pid, --pgrep and --all, or --exe, name (for commands that read them, as
    `sampler stack`: one that is not there is said where it is read, procfs.tasks)."""
    finder = finder or ProcFinder()
    if options.exe is not None:
        if options.pids or options.pgrep is not None:
            raise UsageError("--exe excludes --pid and --pgrep", "give the target one way")
        try:
            return finder.running(_program(options.exe), ())
        except ProcessNotFound as e:
            raise ProcessNotFound(e.message, "start it, or name a process by --pid or --pgrep") from None
    if not options.pids and options.pgrep is None:
        raise UsageError("give the target with --pid PID, --pgrep PATTERN or --exe PATH",
                         "e.g. --pid 4242, --pgrep ringbuf, or --pgrep nginx --all for every match")
    return _targets(options, finder, time.monotonic, time.sleep)


def check_columns(config: SessionConfig, output: Output, columns: Sequence[str]) -> None:
    """Once the backend said its columns (a run with one place has no probe column): what the
    options name of the probe column must be there."""
    if PROBE in columns:
        return
    if PROBE in (*output.count_by, *output.hists):
        raise UsageError(f"--count-by {PROBE}: this run has one breakpoint, so no {PROBE} column",
                         "give several --at, or count by another column")
    if config.stop_when is not None and PROBE in config.stop_when.columns:
        known = (*columns, *NUMERIC_COLUMNS)
        raise UsageError(f"--stop-when {config.stop_when.text!r}: no column {PROBE!r}",
                         f"it can use the columns {', '.join(known)}; name an expression with --expr NAME=EXPR "
                         "to use it")


def _probes(order: Sequence[tuple[str | None, Sequence[str]]], locations: Sequence[str]
            ) -> tuple[tuple[Probe, ...], tuple[expr.Expression, ...]]:
    """Each --at with the --expr after it (and those before the first --at, for all), and every
    column: a name two probes share is one column."""
    shared = _expressions(order[0][1]) if order and order[0][0] is None else ()
    groups = [(location, texts) for location, texts in order if location is not None]
    if [location for location, _ in groups] != list(locations):  # no order given: every --expr to every --at
        groups = [(location, ()) for location in locations]
        shared = _expressions([text for _, texts in order for text in texts])
    probes = tuple(Probe(location, shared + _expressions(texts, taken=[e.name for e in shared]))
                   for location, texts in groups if location is not None)
    columns: dict[str, expr.Expression] = {}
    for probe in probes:
        for expression in probe.expressions:
            columns.setdefault(expression.name, expression)
    return probes, tuple(columns.values())


def _expressions(texts: Sequence[str], taken: Sequence[str] = ()) -> tuple[expr.Expression, ...]:
    expressions = tuple(expr.parse_option(text) for text in texts)
    names = [*taken, *(e.name for e in expressions)]
    for name in names:
        if name in RESERVED or names.count(name) > 1:
            raise UsageError(f"column name {name!r} is used twice or is a fixed column",
                             "name the expression: --expr NAME=EXPR")
    return expressions


def _targets(options: Options, finder: Finder, clock: Callable[[], float],
             sleep: Callable[[float], None]) -> tuple[int, ...]:
    """The processes of the run: --pid, each once, or what --pgrep/--container find (--all: every match)."""
    pattern, container = options.pgrep, options.container
    if options.pids and (pattern is not None or container is not None or options.wait_target is not None):
        raise UsageError("--pid excludes --pgrep, --container and --wait-target", "give the target one way")
    if not options.pids and pattern is None and container is None:
        raise UsageError("give the target with --pid PID, --pgrep PATTERN, --container ID or --exe PATH",
                         "e.g. --pid 4242, --pgrep ringbuf, or --pgrep nginx --all for every match")
    if options.every_match and pattern is None and container is None:
        raise UsageError("--all goes with --pgrep or --container", "e.g. --pgrep nginx --all, or --pid again")
    if options.pids:
        return tuple(dict.fromkeys(options.pids))
    return _waiting(lambda: finder.matching(pattern, container, options.every_match), options.wait_target or 0.0,
                    clock, sleep)


def _waiting(find: Callable[[], T], wait_s: float, clock: Callable[[], float], sleep: Callable[[float], None]) -> T:
    """``find()``, tried again every 0.1 s for ``wait_s`` while it finds nothing (--wait-target)."""
    deadline = clock() + wait_s
    while True:
        try:
            return find()
        except ProcessNotFound:
            if clock() >= deadline:
                raise
            sleep(0.1)


def _program(given: str) -> str:
    """--exe: the program file, by its path or (no slash) a name on PATH."""
    path = given if "/" in given else shutil.which(given)
    if path is None or not os.path.exists(path):
        raise UsageError(f"--exe {given}: no such program file", "give its path, e.g. --exe /usr/sbin/nginx")
    if not os.path.isfile(path):
        raise UsageError(f"--exe {given}: not a program file", "give its path, e.g. --exe /usr/sbin/nginx")
    return os.path.abspath(path)  # matched by the file it names (a symbolic link's target)


def _users(given: Sequence[str]) -> tuple[int, ...]:
    """--user: each a name from the password file or a UID."""
    uids = []
    for user in given:
        if user.isdigit():
            uids.append(int(user))
            continue
        try:
            uids.append(pwd.getpwnam(user).pw_uid)
        except KeyError:
            raise UsageError(f"--user {user}: no such user", "give a user name from /etc/passwd or a UID") from None
    return tuple(uids)


def _condition(text: str | None, columns: Sequence[str]) -> Condition | None:
    if text is None:
        return None
    try:
        return Condition(text, list(columns))
    except ExpressionError as e:
        raise UsageError(f"--stop-when: {e.message}", "e.g. --stop-when 'delta > 20000'") from None


def _debug_dirs(folders: Sequence[str]) -> tuple[str, ...]:
    for folder in folders:
        if not os.path.isdir(folder):
            raise UsageError(f"--debug-dir {folder}: no such directory",
                             "give a folder of debug files, e.g. /usr/lib/debug")
    return tuple(os.path.abspath(folder) for folder in folders)
