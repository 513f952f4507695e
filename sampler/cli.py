"""The command line: parse the options, hand a run to the worker (run.py), print one line, return an exit code."""

from __future__ import annotations

import os
import pwd
import resource
import shutil
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from sampler import notice, run
from sampler.backends.select import CHOICES
from sampler.budget import parse_share
from sampler.config import Probe, SessionConfig
from sampler.durations import format_duration, parse_duration
from sampler.errors import (
    AlreadyTraced,
    ExpressionError,
    ProcessNotFound,
    SamplerError,
    UsageError,
)
from sampler.language import expr
from sampler.language.condition import Condition
from sampler.output import Output, outlet
from sampler.output.csv import FORMATS
from sampler.safety import supervisor
from sampler.safety.repair import repair as repair_journal
from sampler.safety.repair import restore_code
from sampler.sample import PROBE, RESERVED
from sampler.target import pgrep, procfs


class Duration(click.ParamType):  # type: ignore[type-arg]
    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_duration(str(value))
        except ValueError as e:
            self.fail(str(e), param, ctx)


DURATION = Duration()


class Share(click.ParamType):  # type: ignore[type-arg]
    name = "percent"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_share(str(value))
        except ValueError as e:
            self.fail(f"{value!r}: {e}", param, ctx)


SHARE = Share()


def _show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        from sampler import doctor  # (ctypes, platform: loaded, and the commit looked up, only when asked for)

        click.echo(doctor.version())
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_show_version,
              help="Show the version (and the commit of a checkout) and exit.")
def cli() -> None:
    """Sample expressions from a running process with a debugger, into CSV."""


F = TypeVar("F", bound=Callable[..., Any])

SECTIONS = {
    "What to sample": ("--pid", "--pgrep", "--all", "--container", "--exe", "--user", "--follow-forks",
                       "--wait-target", "--expr"),
    "Where": ("--at", "--backend", "--debug-dir", "--symbols"),
    "When": ("--interval", "--rate", "--count", "--max-events", "--duration", "--hit-timeout", "--stop-when",
             "--max-overhead"),
    "Output": ("--out", "--format", "--quiet", "--live", "--metrics", "--count-by", "--hist"),
}


class SectionedCommand(click.Command):
    """--help with the options in sections (what to sample, where, when, output); notes which
    --at each --expr follows (ctx.meta["probes"]), for runs with several --at."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["probes"] = self._probe_order(args)
        return super().parse_args(ctx, args)

    def _probe_order(self, args: list[str]) -> list[tuple[str | None, list[str]]]:
        """[(an --at's value, the --expr values after it)], the first with None: the --expr
        values given before any --at."""
        takes = {opt: 0 if isinstance(p, click.Option) and (p.is_flag or p.count) else p.nargs
                 for p in self.params for opt in (*p.opts, *p.secondary_opts)}
        groups: list[tuple[str | None, list[str]]] = [(None, [])]
        i = 0
        while i < len(args):
            token = args[i]
            if token == "--":
                break
            option, _, attached = token.partition("=")
            if option in ("--at", "--expr"):
                value = attached if "=" in token else (args[i + 1] if i + 1 < len(args) else "")
                i += 1 if "=" in token else 2
                if option == "--at":
                    groups.append((value, []))
                else:
                    groups[-1][1].append(value)
                continue
            i += 1 + (takes.get(token, 0) if token.startswith("-") and "=" not in token else 0)
        return groups

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        records = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                records[param.opts[0] if param.opts else param.name] = record
        for title, names in (*SECTIONS.items(), ("Other", ())):
            wanted = [records.pop(name) for name in names if name in records] if names else list(records.values())
            if wanted:
                with formatter.section(title):
                    formatter.write_dl(wanted)


def target_options(command: F) -> F:
    """The options attach and trace share."""
    for option in reversed([
        click.option("--pid", "pids", type=int, multiple=True,
                     help="The process to sample; repeatable: several processes in one run (ptrace), a row "
                          "per process per tick, each with its pid."),
        click.option("--pgrep", metavar="PATTERN",
                     help="The process to sample by its name, else its command line (a regular expression; "
                          "it must match one process, or give --all): for containers and pods, where PIDs differ."),
        click.option("--all", "every_match", is_flag=True,
                     help="With --pgrep or --container: every process that matches, in one run (ptrace)."),
        click.option("--exe", metavar="PATH",
                     help="Every process running this program file (a path, or a name found on PATH), and each "
                          "that starts during the run: tracing, it is looked at when the kernel tells of its exec (as "
                          "root; else when sampler next looks, every 0.2 s); sampling, at the next tick. "
                          "Unlike a uprobe, calls a new process makes before it joins are missed (each join and "
                          "the summary say how late it was). Every user's processes, so another user can put a "
                          "process of theirs in the run; --user limits it."),
        click.option("--user", "users", metavar="USER", multiple=True,
                     help="With --exe: only the processes of this user (a name or a UID; repeatable), by their "
                          "real user ID."),
        click.option("--follow-forks", "follow_forks", is_flag=True,
                     help="Sample the child processes the targets fork during the run too, from their first "
                          "instruction, as strace -f does; their rows carry their own pid (ptrace). Without it, "
                          "children are let go with sampler's breakpoints taken out."),
        click.option("--wait-target", type=DURATION, metavar="DURATION",
                     help="With --pgrep, --container or --exe: wait this long for the process to appear (a sidecar "
                          "that starts with the program)."),
        click.option("--container", metavar="ID",
                     help="Only the processes of this container (its runtime ID, found in /proc/PID/cgroup); "
                          "without --pgrep, its first process. For a node agent with the host's PIDs."),
        click.option("--expr", "exprs", multiple=True, metavar="[NAME=]EXPR",
                     help="An expression to read at each sample; one column each. Repeatable. A name "
                          "that is no local, parameter or global is looked up as a field of the globals. "
                          "trace without it counts calls: a row per call, the fixed columns only."),
        click.option("--duration", type=DURATION, help="Stop after this long."),
        click.option("--out", default="-", show_default=True, help="File to write, - for stdout."),
        click.option("--format", "out_format", type=click.Choice(sorted(FORMATS)),
                     help="csv or jsonl (JSON Lines); default: from --out's suffix (.jsonl), else csv."),
        click.option("--backend", type=click.Choice(CHOICES), default="auto", show_default=True),
        click.option("--quiet", is_flag=True, help="No per-sample lines on stderr."),
        click.option("--live", is_flag=True,
                     help="A view redrawn in place on stderr: last, min, p50, max and a sparkline per "
                          "expression, the rate and the pause (instead of a line per sample)."),
        click.option("--metrics", metavar="[HOST:]PORT",
                     help="Serve OpenMetrics/Prometheus metrics there (127.0.0.1 unless HOST is given: "
                          "another address lets anyone who reaches it read the values)."),
        click.option("--debug-dir", "debug_dirs", multiple=True, metavar="DIR",
                     help="A folder of separate debug files (DIR/.build-id/ab/cdef.debug, or by "
                          ".gnu_debuglink), searched before /usr/lib/debug; repeatable (ptrace)."),
        click.option("--symbols", "symbols_file", metavar="FILE",
                     help="An unstripped copy of the executable, used for its symbols and DWARF "
                          "when its build-id matches (ptrace)."),
        click.option("--count-by", "count_by", multiple=True, metavar="NAME",
                     help="Count the samples per value of this column in sampler, as bpftrace's @[x] = count(), "
                          "and print the counts at the end instead of a row per sample (rows still go to a "
                          "--out FILE). Repeatable; thread counts per thread."),
        click.option("--hist", "hists", multiple=True, metavar="NAME",
                     help="Keep a power-of-two histogram of this column in sampler, as bpftrace's hist(), "
                          "printed at the end (and exported with --metrics). Repeatable."),
        click.option("--stop-when", "stop_when", metavar="CONDITION",
                     help="End the run after the first row where this holds, over the columns by name: "
                          "--stop-when 'delta > 20000'."),
        click.option("--max-overhead", "max_overhead", type=SHARE, metavar="PERCENT",
                     help="Keep the share of the target's time its samples stop it under this (1%): attach "
                          "samples less often, trace takes the breakpoints out for a while (calls then are not "
                          "traced, and the summary says so). Estimated from each pause and this host's wake-up "
                          "latency."),
        click.option("--no-guardian", "no_guardian", is_flag=True, hidden=True,
                     help="No guardian process (for measuring what it is worth)."),
    ]):
        command = option(command)
    return command


AT_HELP = ("Repeatable (ptrace): several places in one run, each --expr belonging to the --at before it "
           "(one given before the first, to all), a 'probe' column saying which.")


@cli.command(cls=SectionedCommand)
@target_options
@click.option("--at", "locations", multiple=True, metavar="LOCATION",
              help="Where to break: a function (main.(*Ring).Read), FILE:LINE, or *ADDR (ptrace). "
                   "Without it, globals are read (delve halts the target; ptrace does not). " + AT_HELP)
@click.option("--interval", type=DURATION, help="Time between samples (default 1s).")
@click.option("--rate", type=click.FloatRange(min=0, min_open=True), help="Samples per second.")
@click.option("--count", type=click.IntRange(min=1), help="Stop after N samples.")
@click.option("--hit-timeout", type=DURATION, default="2s", show_default=True,
              help="Give up on a breakpoint not hit within this time and record a miss.")
@click.pass_context
def attach(ctx: click.Context, /, locations: tuple[str, ...], interval: float | None, rate: float | None,
           count: int | None, hit_timeout: float, **common: Any) -> int:
    """Attach to a running process and sample expressions on a fixed schedule.

    \b
    Examples:
      sampler attach --pid 4242 --expr 'w-r'
      sampler attach --pid 4242 --at 'main.(*Ring).Read' --expr 'delta=b.w-b.r' \\
          --interval 1s --out samples.csv
      sampler attach --pid 4242 --at ring_push --expr n=len --at ring_pop --expr r=b->r
    """
    if interval is not None and rate is not None:
        raise UsageError("--interval and --rate exclude each other", "give one of them")
    if not common["exprs"]:
        raise UsageError("attach needs an --expr", "e.g. --expr 'delta=b.w-b.r'; to count calls, "
                         "sampler trace --at FUNCTION without --expr")
    config = _config(ctx, common, locations, interval_s=interval or (1.0 / rate if rate else 1.0),
                     count=count, hit_timeout_s=hit_timeout)
    return _run(config, common, f"every {format_duration(config.interval_s)}")


@cli.command(cls=SectionedCommand)
@target_options
@click.option("--at", "locations", metavar="LOCATION", required=True, multiple=True,
              help="Where to break: a function, FILE:LINE, or *ADDR (ptrace). " + AT_HELP)
@click.option("--max-events", type=click.IntRange(min=1), help="Stop after N hits.")
@click.pass_context
def trace(ctx: click.Context, /, locations: tuple[str, ...], max_events: int | None, **common: Any) -> int:
    """Attach and write a row for every hit of the breakpoint (every-hit tracing).

    \b
    Examples:
      sampler trace --pid 4242 --at ring_read --expr 'delta=b->w - b->r' --duration 5s
      sampler trace --pid 4242 --at tick --expr second=arg1 --out ticks.jsonl
      sampler trace --pid 4242 --at ring_read --duration 10s --quiet   # count the calls
      sampler trace --pid 4242 --at ring_push --at ring_pop --duration 5s --count-by probe
    """
    config = _config(ctx, common, locations, count=max_events, every_hit=True)
    return _run(config, common, "on every hit")


def _config(ctx: click.Context, common: dict[str, Any], locations: Sequence[str], **specific: Any) -> SessionConfig:
    """The session's config from the options attach and trace share and their own."""
    for location in locations:
        _location(location)
    probes: tuple[Probe, ...] = ()
    if len(locations) > 1:
        probes, expressions = _probes(ctx.meta.get("probes") or [(None, list(common["exprs"]))], locations)
        if common["backend"] in ("delve", "delve-rpc"):
            raise UsageError(f"several --at need the ptrace backend (--backend {common['backend']} breaks at one "
                             "place)", "give --backend ptrace, or one --at")
    else:
        expressions = _expressions(common["exprs"])
    exe = _program(common["exe"]) if common["exe"] is not None else None
    if exe is not None:
        if common["pids"] or common["pgrep"] is not None or common["container"] is not None:
            raise UsageError("--exe excludes --pid, --pgrep and --container", "give the target one way")
        users = _users(common["users"])
        pids = _running(exe, common["wait_target"], users)
    else:
        if common["users"]:
            raise UsageError("--user goes with --exe", "give --exe PATH, or name the process by --pid or --pgrep")
        users = ()
        pids = _targets(common["pids"], common["pgrep"], common["container"], common["wait_target"],
                        common["every_match"])
    many = len(pids) > 1 or common["follow_forks"] or exe is not None
    if common["follow_forks"] and not locations:
        raise UsageError("--follow-forks needs --at (reading globals without a breakpoint traces nothing, so no "
                         "fork is seen)", "give --at FUNCTION, or sample the children by --exe or --pgrep --all")
    if many and common["backend"] in ("delve", "delve-rpc"):
        what = "--follow-forks needs" if len(pids) == 1 else "several processes need"
        raise UsageError(f"{what} the ptrace backend (--backend {common['backend']}: one dlv follows one process)",
                         "give --backend ptrace, or one process")
    names = [e.name for e in expressions] + ([PROBE] if locations else [])  # checked again once it is known
    return SessionConfig(pid=pids[0], pids=pids if many else (), follow_forks=common["follow_forks"], exe=exe,
                         users=users, expressions=expressions,
                         location=locations[0] if locations else None,
                         probes=probes, duration_s=common["duration"],
                         backend=common["backend"], guardian=not common["no_guardian"],
                         debug_dirs=_debug_dirs(common["debug_dirs"]), symbols_file=common["symbols_file"],
                         quiet=common["quiet"], stop_when=_condition(common["stop_when"], names),
                         max_overhead=common["max_overhead"],
                         **specific)


def _probes(order: list[tuple[str | None, list[str]]], locations: Sequence[str]
            ) -> tuple[tuple[Probe, ...], tuple[expr.Expression, ...]]:
    """Each --at with the --expr after it (and those before the first --at), and every column:
    a name two probes share is one column."""
    shared = _expressions(order[0][1]) if order and order[0][0] is None else ()
    groups = [group for group in order if group[0] is not None]
    if [location for location, _ in groups] != list(locations):  # never: the scan and click disagree
        groups = [(location, []) for location in locations]
        shared = _expressions([text for _, texts in order for text in texts])
    probes = tuple(Probe(location, shared + _expressions(texts, taken=[e.name for e in shared]))
                   for location, texts in groups if location is not None)
    columns: dict[str, expr.Expression] = {}
    for probe in probes:
        for expression in probe.expressions:
            columns.setdefault(expression.name, expression)
    return probes, tuple(columns.values())


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE.csv...")
@click.option("--hist", "hists", multiple=True, metavar="NAME",
              help="A power-of-two histogram of this column, as bpftrace's hist(). Repeatable.")
@click.option("--lhist", "lhists", multiple=True, nargs=4, type=(str, float, float, float),
              metavar="NAME MIN MAX STEP", help="A linear histogram, as bpftrace's lhist(). Repeatable.")
@click.option("--by", "by_s", type=DURATION, metavar="DURATION", help="The statistics per window of this long.")
@click.option("--plot", metavar="FILE.png|.svg", help="A time series of each column (matplotlib).")
@click.option("--count-by", "count_by", multiple=True, metavar="NAME",
              help="The most frequent values of this column (strings too), as bpftrace's @[x] = count(). "
                   "Repeatable.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many values --count-by lists.")
@click.option("--json", "as_json", is_flag=True, help="The statistics as JSON.")
def report(files: Sequence[str], hists: Sequence[str], lhists: Sequence[tuple[str, float, float, float]],
           by_s: float | None, plot: str | None, as_json: bool, count_by: Sequence[str], top: int) -> int:
    """Statistics, histograms and a plot of the CSVs that attach and trace wrote.

    \b
    Examples:
      sampler report samples.csv --hist delta
      sampler report a.csv b.csv --by 10s --plot run.png
      sampler report requests.csv --count-by path --top 5
    """
    from sampler.report import Request, run

    if by_s is not None and by_s <= 0:
        raise UsageError("--by must be longer than 0", "e.g. --by 10s")
    click.echo(run(Request(list(files), tuple(hists), tuple(lhists), by_s, plot, as_json, tuple(count_by), top)),
               nl=False)
    return 0


@cli.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> int:
    """Print the completion script of SHELL for sampler (click's own): commands, options and
    their choices complete at the Tab key.

    \b
      bash:  eval "$(sampler completion bash)"    (in ~/.bashrc)
      zsh:   eval "$(sampler completion zsh)"     (in ~/.zshrc)
      fish:  sampler completion fish > ~/.config/fish/completions/sampler.fish
    """
    from click.shell_completion import get_completion_class

    script = get_completion_class(shell)
    assert script is not None  # the choices are click's own shells
    click.echo(script(cli, {}, "sampler", "_SAMPLER_COMPLETE").source())
    return 0


@cli.command(name="doctor")
def doctor_command() -> int:
    """What this host lets sampler do: ptrace (tried), Yama, capabilities, seccomp, container,
    debuginfod, dlv, and each backend."""
    from sampler import doctor

    click.echo(doctor.report(), nl=False)
    return 0


@cli.command()
@click.option("--pid", type=int, help="Repair this process.")
@click.option("--all", "everything", is_flag=True, help="Repair every process in the journal.")
@click.option("--code-from-file", is_flag=True,
              help="With --pid: also put back every int3 in the program's code that its file does not have "
                   "(what a killed dlv or gdb leaves).")
def repair(pid: int | None, everything: bool, code_from_file: bool) -> int:
    """Put back breakpoint bytes that a killed sampler (or debugger) left in a process."""
    if (pid is None) == (not everything):
        raise UsageError("give --pid PID or --all", "sampler repair --pid 4242")
    if code_from_file and pid is None:
        raise UsageError("--code-from-file needs --pid", "sampler repair --pid 4242 --code-from-file")
    if pid is not None:
        tracer = procfs.tracer_pid(pid)
        if tracer:
            raise AlreadyTraced(f"process {pid} is traced by PID {tracer}: a sampler may still be running",
                                "stop that sampler first; it restores its bytes itself")
    fixed = repair_journal(pid, skip_traced=True)
    for entry in fixed:
        click.echo(f"sampler: PID {entry.pid}: {entry.note}", err=True)
    if code_from_file and pid is not None:
        click.echo(f"sampler: PID {pid}: {restore_code(pid)} int3 byte(s) put back from the program file",
                   err=True)
    elif not fixed:
        click.echo("sampler: nothing to repair", err=True)
    return 0


def _expressions(texts: Sequence[str], taken: Sequence[str] = ()) -> tuple[expr.Expression, ...]:
    expressions = tuple(expr.parse_option(text) for text in texts)
    names = [*taken, *(e.name for e in expressions)]
    for name in names:
        if name in RESERVED or names.count(name) > 1:
            raise UsageError(f"column name {name!r} is used twice or is a fixed column",
                             "name the expression: --expr NAME=EXPR")
    return expressions


def _targets(pids: Sequence[int], pattern: str | None, container: str | None, wait: float | None,
             every: bool) -> tuple[int, ...]:
    """The processes of the run: --pid, each once, or what --pgrep/--container find (--all: every match)."""
    if pids and (pattern is not None or container is not None or wait is not None):
        raise UsageError("--pid excludes --pgrep, --container and --wait-target", "give the target one way")
    if not pids and pattern is None and container is None:
        raise UsageError("give the target with --pid PID, --pgrep PATTERN, --container ID or --exe PATH",
                         "e.g. --pid 4242, --pgrep ringbuf, or --pgrep nginx --all for every match")
    if every and pattern is None and container is None:
        raise UsageError("--all goes with --pgrep or --container", "e.g. --pgrep nginx --all, or --pid again")
    if pids:
        return tuple(dict.fromkeys(pids))
    deadline = time.monotonic() + (wait or 0.0)
    while True:
        try:
            return tuple(pgrep.find_all(pattern, container)) if every else (pgrep.find(pattern, container),)
        except ProcessNotFound:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


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


def _running(exe: str, wait: float | None, users: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The processes running ``exe`` now (of ``users`` only, when given), waiting up to ``wait`` for the first."""
    deadline = time.monotonic() + (wait or 0.0)
    while True:
        found = pgrep.running(exe, users=users)
        if found:
            return tuple(found)
        if time.monotonic() >= deadline:
            whose = f" of user {', '.join(map(str, users))}" if users else ""
            raise ProcessNotFound(f"--exe {exe}: no process{whose} runs it",
                                  "start it, or give --wait-target DURATION to wait for the first")
        time.sleep(0.1)


def _condition(text: str | None, names: Sequence[str]) -> Condition | None:
    if text is None:
        return None
    try:
        return Condition(text, list(names))
    except ExpressionError as e:
        raise UsageError(f"--stop-when: {e.message}", "e.g. --stop-when 'delta > 20000'") from None


def _debug_dirs(folders: Sequence[str]) -> tuple[str, ...]:
    for folder in folders:
        if not os.path.isdir(folder):
            raise UsageError(f"--debug-dir {folder}: no such directory",
                             "give a folder of debug files, e.g. /usr/lib/debug")
    return tuple(os.path.abspath(folder) for folder in folders)


def _location(location: str | None) -> str | None:
    if location is not None and not location.strip():
        raise UsageError("--at is empty", "give a function or FILE:LINE")
    return location


def _run(config: SessionConfig, common: dict[str, Any], how: str) -> int:
    """In a worker process (supervisor.py): check the target, pick the backend, run, report."""
    columns = [e.name for e in config.expressions] + ([PROBE] if config.location is not None else [])
    for option, names, extra in (("--count-by", common["count_by"], ["thread", "pid"]),
                                 ("--hist", common["hists"], [])):
        for name in names:
            if name not in (*columns, *extra):
                raise UsageError(f"{option} {name}: no such column", f"name an expression (--expr {name}=EXPR) "
                                 f"and give that name; the columns are {', '.join([*columns, *extra]) or 'none'}")
    output = Output(common["out"], common["out_format"], common["quiet"], common["live"], common["metrics"],
                    tuple(common["count_by"]), tuple(common["hists"]))

    def guarded() -> int:
        supervisor.release_signals()  # a Ctrl-C since the fork is raised here, inside _exit_code
        return run.sample(config, output, how)

    def in_worker() -> int:
        outlet.install()  # no write of the worker's ever holds its loop (output/outlet.py)
        try:
            return _exit_code(guarded)
        finally:
            outlet.finish()

    return supervisor.run_in_worker(in_worker, config.targets, config.guardian)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the CLI and turn every failure into one line and an exit code."""
    _more_files()
    return _exit_code(lambda: _invoke(list(argv) if argv is not None else sys.argv[1:]))


def _invoke(args: list[str]) -> object:
    """click's main without its handling of a Ctrl-C: it prints a blank line before its Abort
    (two lines where sampler says one). Shell completion (_SAMPLER_COMPLETE) as click's main."""
    cli._main_shell_completion({}, "sampler", None)  # exits when it completes
    try:
        with cli.make_context("sampler", args) as ctx:
            return cli.invoke(ctx)
    except click.exceptions.Exit as e:
        return e.exit_code


def _more_files() -> None:
    """As many open files as the hard limit allows (up to 65,536): a target that maps
    thousands of files must not run sampler out of descriptors (ulimit -n 1024 is common)."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = hard if hard != resource.RLIM_INFINITY else 65536
        if soft < min(wanted, 65536):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, 65536), hard))
    except (OSError, ValueError):
        pass  # as it was


def _exit_code(call: Callable[[], object]) -> int:
    try:
        result = call()
    except SamplerError as e:
        _say(str(e))
        return e.exit_code
    except click.ClickException as e:
        _say(f"{e.format_message()} (see 'sampler --help')")
        return e.exit_code
    except (click.Abort, KeyboardInterrupt):
        if sys.stderr.isatty():
            click.echo(err=True)  # after the terminal's ^C
        _say("interrupted before sampling started; the target was not touched")
        return 130
    except BrokenPipeError:  # stdout's reader left (as click's main takes it)
        sys.stdout = click.utils._PacifyFlushWrapper(sys.stdout)
        return 1
    except Exception as e:  # a bug of ours: one line, traceback only on request
        if os.environ.get("SAMPLER_DEBUG"):
            traceback.print_exc()
        _say(f"internal error: {type(e).__name__}: {e} (set SAMPLER_DEBUG=1 for a traceback, "
             "and please report it)")
        return 70
    return result if isinstance(result, int) else 0


_say = notice.say
