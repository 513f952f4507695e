"""How the target's overhead grows with the sample rate, backend by backend.

For each target, way of sampling and rate: windows alternate without the sampler (A)
and with it (B), A B A B ...; the target's own `reads/s=N` lines give its throughput,
and each B window's median over the A window before it gives one throughput ratio.
A cell reports min / median / max of those ratios, the rate reached, the sampler's
per-sample pause and wait (from its CSV) and its CPU time (dlv included).

    .venv/bin/python bench/overhead.py            # the whole matrix (make bench)
    .venv/bin/python bench/overhead.py --quick    # a small matrix (make bench-quick)

Writes bench/results/overhead.csv, overhead.png and REPORT.md (or under --results).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from harness import BIN, ROOT, TARGETS, RunningTarget, Target  # type: ignore[import-not-found]

BPF_COUNT = re.compile(r"^@n: (\d+)$")
INPROCESS_CALLS = re.compile(r"in-process at .*?: (\d+) call\(s\), counted in the target")
MAX_RATE = 100_000.0
"""Asked for 'as fast as it goes': the schedule skips what it cannot do."""


@dataclass(frozen=True)
class Mode:
    name: str
    backend: str
    kind: str
    """tick (sampler attach at a rate), zero-stop (attach without --at), every-hit (sampler trace),
    inprocess (sampler trace --probe inprocess, count-only: its rate is the calls the target counted
    a second), bpftrace (a uprobe on every call)."""
    go_only: bool = False


MODES = [
    Mode("delve", "delve", "tick", go_only=True),
    Mode("delve-rpc", "delve-rpc", "tick", go_only=True),
    Mode("ptrace", "ptrace", "tick"),
    Mode("ptrace zero-stop", "ptrace", "zero-stop"),
    Mode("every-hit delve", "delve", "every-hit", go_only=True),
    Mode("every-hit delve-rpc", "delve-rpc", "every-hit", go_only=True),
    Mode("every-hit ptrace", "ptrace", "every-hit"),
    Mode("every-hit in-process", "ptrace", "inprocess"),
    Mode("every-hit bpftrace", "bpftrace", "bpftrace"),
]


@dataclass
class Window:
    ratio: float
    rate: float
    pauses: list[float]
    waits: list[float]
    cpu_s: float
    seconds: float


def sampler_command(target: Target, mode: Mode, rate: float | None, pid: int, out: Path) -> list[str]:
    if mode.kind == "bpftrace":
        probe = f"uprobe:{BIN / target.binary}:{_symbol(target)}"
        return ["bpftrace", "-p", str(pid), "-e",
                f"{probe} {{ @n = count(); }} interval:s:1 {{ print(@n); clear(@n); }}"]
    command = [sys.executable, "-m", "sampler"]
    if mode.kind == "inprocess":
        return [*command, "trace", "--probe", "inprocess", "--pid", str(pid), "--at", target.hot,
                "--out", str(out), "--quiet"]
    if mode.kind == "every-hit":
        return [*command, "trace", "--backend", mode.backend, "--probe", "int3", "--pid", str(pid), "--at",
                target.hot, "--expr", f"d={target.delta}", "--out", str(out), "--quiet"]
    command += ["attach", "--backend", mode.backend, "--pid", str(pid), "--rate", f"{rate:g}",
                "--out", str(out), "--quiet"]
    if mode.kind == "zero-stop":
        return [*command, "--expr", f"d={target.global_expr}"]
    return [*command, "--at", target.hot, "--expr", f"d={target.delta}"]


def _symbol(target: Target) -> str:
    return f'"{target.hot}"' if "(" in target.hot else target.hot


def measure(target: Target, running: RunningTarget, mode: Mode, rate: float | None,
            windows: int, seconds: float) -> list[Window]:
    """A B A B ...: the target alone, then with the sampler, ``windows`` times."""
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for index in range(windows):
            start = time.monotonic()
            time.sleep(seconds)
            _until_a_line(running, start)
            alone = running.throughput(start, time.monotonic())
            out = Path(tmp) / f"w{index}.csv"
            said = Path(tmp) / f"w{index}.err"
            with open(said, "w") as err:
                proc = subprocess.Popen(sampler_command(target, mode, rate, running.proc.pid, out),
                                        stdout=subprocess.PIPE if mode.kind == "bpftrace" else subprocess.DEVNULL,
                                        stderr=err, text=True, cwd=ROOT)
            counts: list[int] = []
            if mode.kind == "bpftrace":
                threading.Thread(target=_bpf_counts, args=(proc, counts), daemon=True).start()
                _wait_until(lambda counts=counts: bool(counts), proc, 60)
            else:
                _wait_until(lambda out=out: _rows(out) >= 1, proc, 60)
            first_row = time.monotonic()
            begin, rows_before = time.monotonic(), _rows(out)
            time.sleep(seconds)
            _until_a_line(running, begin, 40.0 if mode.kind == "every-hit" else 15.0)  # (a target slowed to
            # a crawl prints late: the window waits; every-hit ptrace on the C target, at 0.07 % of its speed,
            # printed none within 15 s in a clean-clone run on a slow VM, 2026-12-06)
            end, rows_after = time.monotonic(), _rows(out)
            sampled = running.throughput(begin, end)
            proc.send_signal(signal.SIGINT)
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            if proc.stdout is not None:
                proc.stdout.close()
            pauses, waits = _columns(out, rows_before, rows_after)
            reached = (statistics.median(counts[1:]) if len(counts) > 1 else float("nan")) \
                if mode.kind == "bpftrace" else (rows_after - rows_before) / (end - begin)
            if mode.kind == "inprocess":  # the calls the target counted, from the first row to the stop
                counted = INPROCESS_CALLS.search(said.read_text())
                reached = int(counted.group(1)) / (end - first_row) if counted else float("nan")
            if not (alone and sampled):
                print(f"bench: {mode.name} window {index} dropped: no throughput line "
                      f"{'while sampled' if alone else 'alone'} (the target's last: {list(running.lines)[-1:]})",
                      file=sys.stderr)
            else:
                results.append(Window(statistics.median(sampled) / statistics.median(alone), reached,
                                      pauses, waits, usage.ru_utime + usage.ru_stime,
                                      end - begin))
    return results


def _until_a_line(running: RunningTarget, since: float, longest: float = 15.0) -> None:
    """Wait (up to ``longest`` more seconds) until the target printed a throughput line since
    ``since``: a window without one would be dropped, and a cell could end with none (every-hit
    ptrace on the C target, its reader traced at every call on two busy cores, printed none
    within 5 s once in a clean-clone run: the wait is 15 s, paid only when no line comes)."""
    deadline = time.monotonic() + longest
    while not running.throughput(since, time.monotonic()) and time.monotonic() < deadline:
        time.sleep(0.05)


def _bpf_counts(proc: subprocess.Popen[str], counts: list[int]) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        match = BPF_COUNT.match(line.strip())
        if match:
            counts.append(int(match.group(1)))


def _wait_until(condition: object, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench: {proc.args!r} did not start sampling (exit {proc.returncode})")
        time.sleep(0.02)


def _rows(path: Path) -> int:
    try:
        with open(path, newline="") as f:
            return max(0, sum(1 for _ in f) - 1)
    except FileNotFoundError:
        return 0


def _columns(path: Path, first: int, last: int) -> tuple[list[float], list[float]]:
    if not path.exists():
        return [], []
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))[first:last]
    return ([float(r["pause_us"]) for r in rows if r.get("pause_us")],
            [float(r["wait_us"]) for r in rows if r.get("wait_us")])


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def cell(target_key: str, mode: Mode, rate: float | None, windows: list[Window]) -> dict[str, object]:
    ratios = [w.ratio for w in windows]
    pauses = [p for w in windows for p in w.pauses]
    waits = [x for w in windows for x in w.waits]
    return {
        "target": TARGETS[target_key].label, "mode": mode.name, "backend": mode.backend,
        "rate_asked": "every hit" if rate is None else ("max" if rate >= MAX_RATE else f"{rate:g}"),
        "rate_reached": statistics.median(w.rate for w in windows) if windows else math.nan,
        "ratio_min": min(ratios, default=math.nan), "ratio_median": statistics.median(ratios) if ratios else math.nan,
        "ratio_max": max(ratios, default=math.nan), "windows": len(windows),
        "pause_us_p50": _pct(pauses, 0.5), "pause_us_p95": _pct(pauses, 0.95),
        "wait_us_p50": _pct(waits, 0.5), "wait_us_p95": _pct(waits, 0.95),
        "sampler_cpu_per_s": statistics.median(w.cpu_s / w.seconds for w in windows) if windows else math.nan,
    }


def plan(quick: bool, have_dlv: bool, have_bpf: bool, rates: list[float] | None = None, once: bool = False,
         modes_wanted: Sequence[str] = ()) -> list[tuple[str, Mode, float | None]]:
    """(target, mode, rate) of every cell; ``once``: each mode on one target (C, Delve's on Go);
    ``modes_wanted``: those modes only (by name)."""
    rates = rates or ([10.0, 100.0] if quick else [1.0, 10.0, 100.0, 1000.0, MAX_RATE])
    targets = ["c", "go"]
    modes = [m for m in MODES if (have_dlv or m.backend not in ("delve", "delve-rpc"))
             and (have_bpf or m.kind != "bpftrace")]
    if quick:
        modes = [m for m in modes if m.name in ("delve-rpc", "ptrace", "ptrace zero-stop", "every-hit ptrace",
                                                "every-hit in-process", "every-hit bpftrace")]
    runs: list[tuple[str, Mode, float | None]] = []
    for target in targets:
        for mode in modes:
            if (mode.go_only and target != "go") or (once and not mode.go_only and target != "c"):
                continue
            if quick and mode.kind in ("every-hit", "inprocess", "bpftrace") and target != "c":
                continue
            if modes_wanted and mode.name not in modes_wanted:
                continue
            if mode.kind in ("every-hit", "inprocess", "bpftrace"):
                runs.append((target, mode, None))
            else:
                runs += [(target, mode, rate) for rate in rates]
    return runs


def bpftrace_usable() -> bool:
    if shutil.which("bpftrace") is None or os.geteuid() != 0:
        return False
    if not Path("/sys/kernel/tracing/uprobe_events").exists():
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    return Path("/sys/kernel/tracing/uprobe_events").exists()


def plot(frame: pd.DataFrame, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 9), sharex=True)
    colors = plt.get_cmap("tab20").colors
    for index, ((target, mode), group) in enumerate(frame.groupby(["target", "mode"])):
        group = group.sort_values("rate_reached")
        label = f"{mode} ({target})"
        style = dict(color=colors[index % len(colors)], marker="s" if target == "Go" else "o",
                     linestyle="--" if target == "Go" else "-")
        top.errorbar(group["rate_reached"], group["ratio_median"],
                     yerr=[group["ratio_median"] - group["ratio_min"], group["ratio_max"] - group["ratio_median"]],
                     capsize=3, label=label, **style)
        if group["pause_us_p50"].notna().any():
            bottom.plot(group["rate_reached"], group["pause_us_p50"] / 1000, label=label, **style)
    top.set_xscale("log")
    top.set_yscale("log")
    top.axhline(1.0, color="grey", linewidth=0.8)
    top.set_ylabel("target throughput, sampled / alone (median, min-max)")
    top.set_title("Overhead against sample rate (every-hit modes: one point at the hits/s they reached)")
    top.legend(fontsize=7, ncol=2)
    bottom.set_yscale("symlog", linthresh=0.01)
    bottom.set_ylim(bottom=0)
    bottom.set_ylabel("median pause per sample (ms)")
    bottom.set_xlabel("samples (or hits) per second reached")
    bottom.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _version(command: list[str]) -> str:
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=20).stdout.strip()
        return out.splitlines()[0] if out else "not found"
    except (OSError, subprocess.TimeoutExpired):
        return "not found"


def report(frame: pd.DataFrame, path: Path, args: argparse.Namespace, seconds_taken: float) -> None:
    dlv_lines = subprocess.run(["dlv", "version"], capture_output=True, text=True).stdout.splitlines() \
        if shutil.which("dlv") else []
    dlv_version = next((line.split(":", 1)[1].strip() for line in dlv_lines if line.startswith("Version")),
                       "not found")
    shown = frame.copy()
    for column in ("rate_reached", "sampler_cpu_per_s"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3g}")
    for column in ("ratio_min", "ratio_median", "ratio_max"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3g}")
    for column in ("pause_us_p50", "pause_us_p95", "wait_us_p50", "wait_us_p95"):
        shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.0f}")
    header = "| " + " | ".join(shown.columns) + " |\n|" + "---|" * len(shown.columns) + "\n"
    rows = "".join("| " + " | ".join(str(v) for v in row) + " |\n" for row in shown.itertuples(index=False))
    text = f"""# sampler overhead report

Made by `.venv/bin/python bench/overhead.py{' --quick' if args.quick else ''}` on
{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC in {seconds_taken / 60:.1f} minutes.

Machine: {os.cpu_count()} cores, shared by the target and the sampler (no pinning);
kernel {platform.release()}; {_version(["go", "version"])}; Delve {dlv_version};
{_version(["bpftrace", "--version"])}; Python {platform.python_version()}.

Method: per cell, {args.windows} pairs of windows of {args.seconds:g} s, the target alone (A) then
sampled (B); `ratio` is the median of the target's one-second `reads/s` lines in B over
those in A, per pair; min / median / max over the pairs. `rate_reached` is rows per
second in B (bpftrace: probe hits per second). `pause_us`, `wait_us` come from the
sampler's CSV (p50, p95 over all B windows). `sampler_cpu_per_s` is the sampler's CPU
seconds (dlv included) per second of B window, attach and detach included.

{header}{rows}
![overhead](overhead.png)
"""
    path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small matrix (under 3 minutes)")
    parser.add_argument("--windows", type=int, default=None, help="A/B pairs per cell")
    parser.add_argument("--seconds", type=float, default=None, help="length of each window")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--rates", type=lambda text: [float(r) for r in text.split(",")], default=None,
                        help="sample rates of the ticked cells, comma-separated (default: by --quick)")
    parser.add_argument("--warmup", type=float, default=1.5,
                        help="seconds each target runs before its first window (the tests: 0.5)")
    parser.add_argument("--modes", type=lambda text: [m.strip() for m in text.split(",")], default=(),
                        help="only these ways of sampling, by name, comma-separated (e.g. 'every-hit ptrace,"
                             "every-hit in-process,every-hit bpftrace')")
    parser.add_argument("--once", action="store_true",
                        help="each way of sampling on one target only: C, the Delve backends on Go (the tests)")
    args = parser.parse_args()
    args.windows = args.windows or (2 if args.quick else 3)
    args.seconds = args.seconds or (2.2 if args.quick else 3.2)
    began = time.monotonic()
    have_bpf = bpftrace_usable()
    runs = plan(args.quick, shutil.which("dlv") is not None, have_bpf, args.rates, args.once, args.modes)
    rows = []
    for target_key in TARGETS:
        todo = [(m, r) for t, m, r in runs if t == target_key]
        if not todo:
            continue
        running = RunningTarget(TARGETS[target_key].binary)
        try:
            time.sleep(args.warmup)
            for mode, rate in todo:
                print(f"bench: {TARGETS[target_key].label} {mode.name} "
                      f"{'every hit' if rate is None else f'{rate:g}/s'}", file=sys.stderr, flush=True)
                rows.append(cell(target_key, mode, rate,
                                 measure(TARGETS[target_key], running, mode, rate, args.windows, args.seconds)))
        finally:
            running.stop()
    frame = pd.DataFrame(rows)
    args.results.mkdir(parents=True, exist_ok=True)
    frame.to_csv(args.results / "overhead.csv", index=False)
    plot(frame, args.results / "overhead.png")
    report(frame, args.results / "REPORT.md", args, time.monotonic() - began)
    print(f"bench: {len(frame)} cells in {(time.monotonic() - began) / 60:.1f} min; "
          f"results in {args.results}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
