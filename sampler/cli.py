"""The command line: parse the options, hand a run to the worker (run.py), print one line, return an exit code."""

from __future__ import annotations

import os
import resource
import signal
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from sampler import configure, notice, run
from sampler.backends.select import CHOICES
from sampler.budget import parse_share
from sampler.durations import parse_duration
from sampler.errors import (
    LocationNotFound,
    SamplerError,
    UsageError,
)
from sampler.output import outlet
from sampler.output.csv import FORMATS
from sampler.printable import printable
from sampler.safety import supervisor
from sampler.safety.repair import refuse_if_traced, restore_code
from sampler.stop import StopFlag


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
    "Where": ("--at", "--latency", "--to", "--backend", "--probe", "--max-probes", "--debug-dir", "--symbols"),
    "When": ("--interval", "--rate", "--count", "--max-events", "--duration", "--hit-timeout", "--stop-when",
             "--max-overhead"),
    "Output": ("--out", "--format", "--quiet", "--live", "--metrics", "--count-by", "--hist"),
}


class SectionedCommand(click.Command):
    """--help with the options in sections (what to sample, where, when, output); notes which
    --at each --expr follows (ctx.meta["order"]), from click's own parse, for runs with several --at."""

    def make_parser(self, ctx: click.Context) -> Any:
        parser = super().make_parser(ctx)
        parse = parser.parse_args

        def parse_args(args: list[str]) -> Any:
            opts, rest, order = parse(args=args)
            ctx.meta["order"] = _order(order, opts)
            return opts, rest, order
        parser.parse_args = parse_args  # type: ignore[method-assign]
        return parser

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


def _order(order: Sequence[click.Parameter], opts: dict[str, Any]
           ) -> tuple[tuple[str | None, tuple[str, ...]], ...]:
    """((an --at's value, the --expr values after it), ...), the first with None: the --expr
    values given before any --at; from the parameters in the order click met them."""
    ats = iter(opts.get("locations") or ())
    exprs = iter(opts.get("exprs") or ())
    groups: list[tuple[str | None, list[str]]] = [(None, [])]
    for param in order:
        if param.name == "locations":
            groups.append((next(ats, ""), []))
        elif param.name == "exprs":
            groups[-1][1].append(next(exprs, ""))
    return tuple((location, tuple(texts)) for location, texts in groups)


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
        click.option("--max-probes", "max_probes", type=click.IntRange(min=1), default=1000, show_default=True,
                     help="The most breakpoints one --at may mean (a pattern's matches, a USDT probe's sites)."),
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


PLACES = ("a pattern of functions (ngx_http_*_handler, libc:str*), FUNCTION+OFFSET, MODULE:0xADDR (an address "
          "as the file has it: objdump, nm), *ADDR (at run time), or a USDT probe: usdt:PROVIDER:NAME, "
          "usdt:LIBRARY:PROVIDER:NAME (sampler list shows them)")
AT_HELP = ("Repeatable (ptrace): several places in one run, each --expr belonging to the --at before it "
           "(one given before the first, to all), a 'probe' column saying which.")


@cli.command(cls=SectionedCommand)
@target_options
@click.option("--at", "locations", multiple=True, metavar="LOCATION",
              help="Where to break: a function (main.(*Ring).Read), FILE:LINE, or (ptrace) " + PLACES + ". "
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
    return _run(ctx, "attach", locations=locations, interval=interval, rate=rate, count=count,
                hit_timeout=hit_timeout, **common)


@cli.command(cls=SectionedCommand)
@target_options
@click.option("--at", "locations", metavar="LOCATION", required=True, multiple=True,
              help="Where to break: a function, FILE:LINE, or (ptrace) " + PLACES + ". " + AT_HELP)
@click.option("--max-events", type=click.IntRange(min=1), help="Stop after N hits.")
@click.option("--probe", type=click.Choice(["auto", "inprocess", "int3"]), default="auto", show_default=True,
              help="inprocess: a jump into code sampler puts in the target counts and records each call, and no "
                   "thread stops (ptrace; an --expr is read in the target once a site's first hits, by an int3, "
                   "showed what it reads); auto: in-process at each site that allows it, an int3 elsewhere (the "
                   "start line says which); int3: a breakpoint at every site.")
@click.option("--latency", is_flag=True,
              help="A row per call of the --at function, written when it returns: latency_us (entry to return, "
                   "sampler's own stops inside taken out) and retval, the value it returned, as a name in --expr "
                   "(the other expressions are read at the entry). Return probes follow --probe (auto: in-process "
                   "where the function allows it).")
@click.option("--to", "to", metavar="LOCATION",
              help="A row at each hit of LOCATION with latency_us since the last hit of the --at place on the "
                   "same thread (goroutine in Go): a request's start and end in two functions. The expressions "
                   "are read at --at.")
@click.pass_context
def trace(ctx: click.Context, /, locations: tuple[str, ...], max_events: int | None, probe: str,
          latency: bool, to: str | None, **common: Any) -> int:
    """Attach and write a row for every hit of the breakpoint (every-hit tracing).

    \b
    Examples:
      sampler trace --pid 4242 --at ring_read --expr 'delta=b->w - b->r' --duration 5s
      sampler trace --pid 4242 --at tick --expr second=arg1 --out ticks.jsonl
      sampler trace --pid 4242 --at ring_read --duration 10s --quiet   # count the calls
      sampler trace --pid 4242 --at ring_push --at ring_pop --duration 5s --count-by probe
      sampler trace --pid 4242 --at ring_read --probe inprocess --duration 10s --count-by thread
      sampler trace --pid 4242 --at ring_read --latency --expr n=arg1 --expr got=retval --hist latency_us
      sampler trace --pid 4242 --at request_start --to request_done --duration 10s --hist latency_us
    """
    return _run(ctx, "trace", locations=locations, max_events=max_events, probe=probe, latency=latency, to=to,
                **common)


@cli.command()
@click.argument("files", nargs=-1, required=True, metavar="FILE.csv...")
@click.option("--hist", "hists", multiple=True, metavar="NAME",
              help="A power-of-two histogram of this column, as bpftrace's hist(). Repeatable.")
@click.option("--lhist", "lhists", multiple=True, nargs=4, type=(str, float, float, float),
              metavar="NAME MIN MAX STEP", help="A linear histogram, as bpftrace's lhist(). Repeatable.")
@click.option("--by", "by_s", type=DURATION, metavar="DURATION", help="The statistics per window of this long.")
@click.option("--plot", metavar="FILE.png|.svg",
              help="A time series of each column (matplotlib); of a .folded file, its flame graph (.svg) or "
                   "speedscope's JSON (.speedscope.json).")
@click.option("--count-by", "count_by", multiple=True, metavar="NAME",
              help="The most frequent values of this column (strings too), as bpftrace's @[x] = count(). "
                   "Repeatable.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many values --count-by lists.")
@click.option("--json", "as_json", is_flag=True, help="The statistics as JSON.")
def report(files: Sequence[str], hists: Sequence[str], lhists: Sequence[tuple[str, float, float, float]],
           by_s: float | None, plot: str | None, as_json: bool, count_by: Sequence[str], top: int) -> int:
    """Statistics, histograms and a plot of the CSVs that attach and trace wrote; the top functions
    of a profile's .folded stacks, and its flame graph.

    \b
    Examples:
      sampler report samples.csv --hist delta
      sampler report a.csv b.csv --by 10s --plot run.png
      sampler report requests.csv --count-by path --top 5
      sampler report cpu.folded --plot cpu.svg
    """
    from sampler.report import Request, run

    others = [path for path in files if path.lower().endswith((".svg", ".png", ".json", ".html"))]
    if others:
        raise UsageError(f"{printable(others[0])}: report reads the CSV or JSON Lines files of attach and trace, "
                         "or a profile's .folded stacks", "sampler report samples.csv, or sampler report cpu.folded")
    folded = [path for path in files if path.endswith(".folded")]
    if folded:  # a profile's stacks: their top functions, and --plot draws the flame graph
        from sampler.profile import render

        if len(folded) != len(files) or len(files) > 1:
            raise UsageError("give one .folded file alone", "sampler report cpu.folded --plot cpu.svg")
        click.echo(render.report_folded(folded[0], plot, top), nl=False)
        return 0
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


def process_options(command: F) -> F:
    """How stack and profile name their processes."""
    for option in reversed([
        click.option("--pid", "pids", type=int, multiple=True, help="The process; repeatable."),
        click.option("--pgrep", metavar="PATTERN", help="The process by its name, else its command line."),
        click.option("--all", "every_match", is_flag=True, help="With --pgrep: every process that matches."),
        click.option("--exe", metavar="PATH",
                     help="Every process running this program file (a path, or a name on PATH)."),
    ]):
        command = option(command)
    return command


@cli.command(name="list")
@click.argument("pattern", required=False)
@click.option("--pid", type=int, help="The process: its program and every library it has loaded.")
@click.option("--pgrep", metavar="PATTERN", help="The process by its name, else its command line.")
@click.option("--exe", metavar="PATH", help="A program or library file, without a process (its own symbols "
                                             "and probes: not the libraries it would load).")
@click.option("--format", "out_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text, or json: one object per line (kind, location, module, address, size, arguments, "
                   "semaphore).")
def list_command(pattern: str | None, pid: int | None, pgrep: str | None, exe: str | None, out_format: str) -> int:
    """What can be probed: functions, USDT probes (with their arguments) and globals, each as --at
    (or --expr) takes it. PATTERN as --at reads one: usdt:[LIBRARY:]PROVIDER:NAME, LIBRARY:NAME or
    NAME, with * ? [...].

    \b
    Examples:
      sampler list --pid 4242 'usdt:*'
      sampler list --pid 4242 'ngx_http_*_handler'
      sampler list --pid 4242 'libc:str*' --format json
      sampler list --exe /usr/lib/postgresql/15/bin/postgres 'usdt:postgresql:query__*'
    """
    from sampler import listing

    if sum(x is not None for x in (pid, pgrep, exe)) != 1:
        raise UsageError("give one of --pid, --pgrep and --exe", "sampler list --pid 4242 'usdt:*'")
    if exe is not None:
        items = listing.of_file(exe, pattern)
    else:
        [target] = configure.targets_of(configure.Options("stack", pids=(pid,) if pid is not None else (),
                                                          pgrep=pgrep))
        items = listing.of_process(target, pattern)
    if not items:
        raise LocationNotFound(f"nothing matches {pattern!r}" if pattern else "nothing to list",
                               "try a wider pattern: 'usdt:*', 'NAME*', 'LIBRARY:*'")
    click.echo((listing.as_json if out_format == "json" else listing.as_text)(items), nl=False)
    return 0


@cli.command()
@process_options
@click.option("--format", "out_format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text (as gdb's thread apply all bt), or json: one object per process.")
@click.option("--consistent", is_flag=True,
              help="Stop every thread at once for one coherent moment (default: one thread at a time, each "
                   "only while its registers and stack are read; a thread asleep in a system call is not stopped).")
@click.option("--max-depth", type=click.IntRange(min=1, max=4096), default=256, show_default=True,
              help="Frames per stack at most.")
@click.option("--interrupt-waits", "interrupt_waits", is_flag=True,
              help="Stop a thread asleep in epoll_wait, semop, sigtimedwait or io_getevents too when its stack "
                   "needs registers only a stop gives (by default it is left alone and its stack ends there): "
                   "the call the stop ends is made again as it goes on, its timeout counted from then.")
@click.option("--native", is_flag=True,
              help="CPython: the native frames too, each _PyEval_EvalFrameDefault replaced by the Python frames it "
                   "runs (default: a Python thread shows its Python frames only).")
@click.option("--nonblocking", is_flag=True,
              help="CPython: stop no thread; a running thread's Python frames are read as it runs (said torn when "
                   "they changed meanwhile) and its native stack is not read (default: the running threads are "
                   "held while the Python frames are read).")
def stack(pids: tuple[int, ...], pgrep: str | None, every_match: bool, exe: str | None, out_format: str,
          consistent: bool, max_depth: int, interrupt_waits: bool, native: bool, nonblocking: bool) -> int:
    """Where every thread of a process is now: its user stack (functions, files and lines, inlined
    calls), state, the system call it waits in, its wait channel and kernel stack.

    \b
    Examples:
      sampler stack --pid 4242
      sampler stack --pgrep nginx --all --format json
      sampler stack --exe /usr/sbin/nginx --consistent
      sampler stack --pgrep gunicorn --native
    """
    from sampler import stacks

    if consistent and nonblocking:
        raise UsageError("--consistent stops every thread at once; --nonblocking stops none", "give one of them")
    targets = configure.targets_of(configure.Options("stack", pids=pids, pgrep=pgrep, every_match=every_match,
                                                     exe=exe))
    click.echo(stacks.report(targets, out_format, consistent, max_depth, interrupt_waits,
                             "nonblocking" if nonblocking else "held", native), nl=False)
    return 0


@cli.command()
@process_options
@click.option("--rate", type=click.FloatRange(min=0, min_open=True, max=10000), default=99, show_default=True,
              help="Samples of every thread a second (99: not in step with a program's own 100 Hz timers).")
@click.option("--duration", type=DURATION, help="Stop after this long (default: at Ctrl-C).")
@click.option("--out", required=True, metavar="FILE.svg|.folded|.speedscope.json",
              help="A flame graph (SVG, drawn by sampler), flamegraph.pl's folded stacks, or speedscope's JSON.")
@click.option("--off-cpu", "off_cpu", is_flag=True,
              help="The sleeping and blocked threads too (read without stopping them), the system call each "
                   "waits in as its innermost frame: where a hung program waits.")
@click.option("--max-overhead", "max_overhead", type=SHARE, metavar="PERCENT",
              help="Sample less often when the threads it stops would lose more than this share of their time "
                   "(e.g. 1%; no limit without it).")
@click.option("--max-depth", type=click.IntRange(min=1, max=4096), default=256, show_default=True,
              help="Frames per stack at most.")
@click.option("--quiet", is_flag=True, help="No progress lines on stderr.")
@click.option("--native", is_flag=True,
              help="CPython: the native frames too, merged with the Python ones (default: Python frames only).")
@click.option("--nonblocking", is_flag=True,
              help="CPython: stop no thread, read the Python frames as they run (default: a running thread is held "
                   "while its Python frames are read).")
def profile(pids: tuple[int, ...], pgrep: str | None, every_match: bool, exe: str | None, rate: float,
            duration: float | None, out: str, off_cpu: bool, max_overhead: float | None, max_depth: int,
            quiet: bool, native: bool, nonblocking: bool) -> int:
    """Where the time goes: every thread's stack sampled at a rate, as a flame graph. A running
    thread is stopped only while its registers and stack are read; nothing is written into it.

    \b
    Examples:
      sampler profile --pid 4242 --duration 30s --out cpu.svg
      sampler profile --pgrep nginx --all --rate 49 --duration 1m --out nginx.folded
      sampler profile --pid 4242 --off-cpu --duration 10s --out waits.speedscope.json
    """
    from sampler.profile import render
    from sampler.stacks import sampling

    render.format_of(out)  # a bad suffix, or a path that cannot be written, is said before anything is read
    render.check_writable(out)
    targets = configure.targets_of(configure.Options("profile", pids=pids, pgrep=pgrep, every_match=every_match,
                                                     exe=exe))
    say = (lambda line: None) if quiet else notice.say
    stop = StopFlag()
    previous = {signum: signal.signal(signum, lambda *_: stop.set()) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        result = sampling.profile(targets, rate, duration, stop, off_cpu, max_overhead, max_depth, say,
                                  python_way="nonblocking" if nonblocking else "held", native=native)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    for pid in result.gone:
        notice.say(f"PID {pid} ended during the profile: its samples until then are counted")
    summary = result.summary(rate, off_cpu)
    names = ", ".join(f"{printable(name)} ({pid})" for pid, name in result.names.items())
    written = render.to_file(result.stacks, out, f"sampler profile of {names}", summary, checked=True)
    notice.say(f"{written}; {summary}" + ("; interrupted: the samples so far are written" if stop.is_set() else ""))
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
        refuse_if_traced(pid)
    fixed = run.repair(pid, skip_traced=True)
    for entry in fixed:
        click.echo(f"sampler: PID {entry.pid}: {entry.note}", err=True)
    if code_from_file and pid is not None:
        click.echo(f"sampler: PID {pid}: {restore_code(pid)} int3 byte(s) put back from the program file",
                   err=True)
    elif not fixed:
        click.echo("sampler: nothing to repair", err=True)
    return 0


def _run(ctx: click.Context, command: str, **values: Any) -> int:
    """The run the options ask for (configure.py), in a worker process (supervisor.py): check the
    target, pick the backend, run, report."""
    planned = configure.build(configure.Options(command, order=ctx.meta.get("order", ()), **values))

    def guarded() -> int:
        if planned.config.backend not in ("delve", "delve-rpc"):
            import sampler.debuginfo.x86  # noqa: F401  # its decoders are built before a Ctrl-C can land (x86.py)
        supervisor.release_signals()  # a Ctrl-C since the fork is raised here, inside _exit_code
        return run.sample(planned.config, planned.output, planned.how)

    def in_worker() -> int:
        outlet.install()  # no write of the worker's ever holds its loop (output/outlet.py)
        try:
            return _exit_code(guarded)
        finally:
            outlet.finish()

    return supervisor.run_in_worker(in_worker, planned.config.targets, planned.config.guardian)


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
        return _interrupted()
    except BrokenPipeError:  # stdout's reader left (as click's main takes it)
        sys.stdout = click.utils._PacifyFlushWrapper(sys.stdout)
        return 1
    except Exception as e:  # a bug of ours: one line, traceback only on request
        if isinstance(e.__cause__, KeyboardInterrupt):  # (a Ctrl-C while a module's class was made: Python
            return _interrupted()                        # says RuntimeError, "Error calling __set_name__")
        if os.environ.get("SAMPLER_DEBUG"):
            traceback.print_exc()
        _say(f"internal error: {type(e).__name__}: {e} (set SAMPLER_DEBUG=1 for a traceback, "
             "and please report it)")
        return 70
    return result if isinstance(result, int) else 0


def _interrupted() -> int:
    if sys.stderr.isatty():
        click.echo(err=True)  # after the terminal's ^C
    _say("interrupted before sampling started; the target was not touched")
    return 130


_say = notice.say
