"""The soak: many consecutive runs of every way of sampling on long-lived targets, counting harm.

One Go and one C target, and a C program that forks, vforks and execs a child every 10 ms
(a child that dies counts as the target harmed), live through the whole soak. Runs cycle
through delve, delve-rpc, ptrace with a breakpoint (Go, C and the forker), ptrace zero-stop
and `sampler trace` (C and the forker), each with a short
count, and one run in four is ended by SIGINT at a random moment instead. After each run:
sampler's exit code (70, an internal error, is counted apart), the target alive, untraced,
not stopped and still working, its code in memory equal to the file, the CSV whole.
Then a memory phase: zero-stop as fast as it goes for a million samples (--quick: 50,000),
the worker's RSS read every second; it must stay flat.

    .venv/bin/python bench/soak.py              # make soak: 200 runs + 1e6 samples
    .venv/bin/python bench/soak.py --quick      # the test suite's short form: 10 runs + 5e4

Writes bench/results/soak.csv (one row per run) and SOAK.md (or under --results).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from harness import (  # type: ignore[import-not-found]
    CHILD_DIED,
    COMMIT,
    FORKER,
    ROOT,
    SAMPLER,
    TARGETS,
    RunningTarget,
    code_intact,
    csv_whole,
    kill_tree,
    rss_kb,
    worker_of,
)


@dataclass(frozen=True)
class Way:
    name: str
    target: str
    command: str
    """attach or trace."""
    backend: str
    zero_stop: bool = False


WAYS = [  # no two runs in a row on one target: one's check that its target works on waits during the next
    Way("delve", "go", "attach", "delve"),
    Way("ptrace", "c", "attach", "ptrace"),
    Way("delve-rpc", "go", "attach", "delve-rpc"),
    Way("ptrace", "forks", "attach", "ptrace"),
    Way("ptrace", "go", "attach", "ptrace"),
    Way("ptrace zero-stop", "c", "attach", "ptrace", zero_stop=True),
    Way("ptrace zero-stop", "go", "attach", "ptrace", zero_stop=True),
    Way("trace ptrace", "forks", "trace", "ptrace"),
    Way("trace delve-rpc", "go", "trace", "delve-rpc"),
    Way("trace ptrace", "c", "trace", "ptrace"),
]
SOAK_TARGETS = {**TARGETS, "forks": FORKER}


@dataclass
class Run:
    index: int
    way: str
    target: str
    interrupted: bool
    exit_code: int = 0
    internal_error: bool = False
    exit_unexpected: bool = False
    """Not 0 (nor, for a run interrupted before it sampled, 130: 'interrupted before sampling started')."""
    target_died: bool = False
    left_traced: bool = False
    left_stopped: bool = False
    stopped_working: bool = False
    code_changed: bool = False
    csv_broken: bool = False
    rows: int = 0
    seconds: float = 0.0
    message: str = ""
    commit: str = COMMIT


def command(way: Way, pid: int, out: Path, interrupted: bool) -> list[str]:
    target = SOAK_TARGETS[way.target]
    args = [*SAMPLER, way.command, "--backend", way.backend, "--pid", str(pid), "--out", str(out), "--quiet"]
    if way.zero_stop:
        args += ["--expr", f"d={target.global_expr}", "--rate", "200"]
    else:
        args += ["--at", target.hot, "--expr", f"d={target.delta}"]
        if way.command == "attach":
            args += ["--rate", "20" if way.backend.startswith("delve") else "100"]
    if not interrupted:
        args += ["--max-events" if way.command == "trace" else "--count", str(random.randint(1, 5))]
    return args


def one_run(index: int, way: Way, target: RunningTarget, tmp: Path) -> tuple[Run, float]:
    """A run and when it ended; whether the target still works is for :func:`check_working`."""
    interrupted = random.random() < 0.25
    run = Run(index, way.name, way.target, interrupted)
    out = tmp / f"run{index}.csv"
    started = time.monotonic()
    proc = subprocess.Popen(command(way, target.pid, out, interrupted), cwd=ROOT, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if interrupted:
        time.sleep(random.uniform(0.3, 2.0))
        proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        _, stderr = proc.communicate()
        stderr += " (hung: killed after 120 s)"
    ended = time.monotonic()
    run.seconds = ended - started
    run.exit_code = proc.returncode
    run.exit_unexpected = not (proc.returncode == 0 or (interrupted and proc.returncode == 130))
    run.internal_error = proc.returncode == 70 or "internal error" in stderr
    run.message = stderr.strip().replace("\n", " | ")[-300:]
    # a SIGINT before the attach is done ends the run before any row: no CSV is then fine
    whole, run.rows = csv_whole(out)
    run.csv_broken = not whole and (out.exists() and out.stat().st_size > 0)
    run.target_died = target.proc.poll() is not None or target.trapped()
    if run.target_died:  # what the target said of it ("child PID signal S forked T by MODE"), for the report
        said = [line for _, line in target.lines if CHILD_DIED.match(line) or "trap" in line.lower()][-3:]
        run.message = " | ".join([*said, f"exit status {target.proc.poll()}", run.message])[-600:]
    if not run.target_died:
        from sampler.target import procfs

        run.left_traced = procfs.traced(target.pid)
        run.left_stopped = procfs.state(target.pid) in ("T", "t")
        run.code_changed = not code_intact(target.pid)
    out.unlink(missing_ok=True)
    return run, ended


def check_working(run: Run, target: RunningTarget, ended: float) -> None:
    """The target printed its throughput after the run ended (waited for until 2.5 s after the end),
    and is alive, untraced and running; checked before the next run on it, or at once after a harm."""
    if run.target_died:
        return
    while not target.healthy(ended) and time.monotonic() < ended + 2.5:
        time.sleep(0.05)
    run.stopped_working = not target.healthy(ended)


def memory_phase(samples: int, tmp: Path) -> list[tuple[float, int, int]]:
    """Zero-stop as fast as it goes for ``samples``: (seconds, rows so far, worker RSS kB) each second."""
    target = RunningTarget("ringbuf-c")
    out = tmp / "memory.csv"
    points: list[tuple[float, int, int]] = []
    try:
        proc = subprocess.Popen([*SAMPLER, "attach", "--backend", "ptrace", "--pid", str(target.pid), "--expr",
                                 f"d={SOAK_TARGETS['c'].global_expr}", "--rate", "1000000", "--count", str(samples),
                                 "--out", str(out), "--quiet"], cwd=ROOT, stdout=subprocess.DEVNULL)
        start = time.monotonic()
        worker = None
        while proc.poll() is None:
            worker = worker or worker_of(proc.pid)
            if worker:
                size = out.stat().st_size if out.exists() else 0
                points.append((time.monotonic() - start, size, rss_kb(worker)))
            try:
                proc.wait(1.0)  # a point a second, and no wait after the end
            except subprocess.TimeoutExpired:
                pass
        if proc.returncode != 0:
            raise SystemExit(f"soak: the memory run ended with exit code {proc.returncode}")
        rows = csv_whole(out)[1]
        # rows by file size, as the run went: the last point is the whole file
        total = out.stat().st_size
        return [(t, int(rows * size / total), kb) for t, size, kb in points if kb]
    finally:
        target.stop()
        out.unlink(missing_ok=True)


HARMS = ("internal_error", "exit_unexpected", "target_died", "left_traced", "left_stopped", "stopped_working",
         "code_changed", "csv_broken")


def report(runs: list[Run], memory: list[tuple[float, int, int]], samples: int, path: Path, seconds: float,
           quick: bool) -> None:
    lines = ["# Soak: consecutive runs of every way of sampling on long-lived targets", "",
             f"`bench/soak.py{' --quick' if quick else ''}` (make soak), commit {COMMIT}, {os.cpu_count()} CPUs, "
             f"{len(runs)} runs in {seconds / 60:.1f} min. One Go and one C target lived through all of it; one run "
             "in four was ended by SIGINT at a random moment. A third target forked, vforked and execed a "
             "child every 10 ms throughout; a child that died counts as a target death.", "",
             "| way | target | runs | interrupted | exit 0 | " + " | ".join(h.replace("_", " ") for h in HARMS) + " |",
             "|---|---|---|---|---|" + "---|" * len(HARMS)]
    groups: dict[tuple[str, str], list[Run]] = {}
    for run in runs:
        groups.setdefault((run.way, run.target), []).append(run)
    for (way, target), group in groups.items():
        lines.append(f"| {way} | {SOAK_TARGETS[target].label} | {len(group)} | {sum(r.interrupted for r in group)} "
                     f"| {sum(r.exit_code == 0 for r in group)} | "
                     + " | ".join(str(sum(getattr(r, h) for r in group)) for h in HARMS) + " |")
    total = {h: sum(getattr(r, h) for r in runs) for h in HARMS}
    lines += ["", "Totals: " + ", ".join(f"{h.replace('_', ' ')} {n}" for h, n in total.items()) + ".", ""]
    other = [r for r in runs if r.exit_code != 0]
    lines += ["## Runs that did not exit 0", ""]
    lines += [f"- #{r.index} {r.way} / {SOAK_TARGETS[r.target].label}: exit {r.exit_code}: {r.message}"
              for r in other] or ["None."]
    if memory:
        first = next((kb for _, rows, kb in memory if rows >= samples * 0.05), memory[0][2])
        last = memory[-1][2]
        lines += ["", f"## Memory over {samples:,} zero-stop samples", "",
                  f"The worker's RSS after 5 % of the samples: {first} kB; at the end: {last} kB "
                  f"(growth {last - first} kB over {memory[-1][1]:,} rows, {memory[-1][0]:.0f} s).", "",
                  "| seconds | rows | worker RSS (kB) |", "|---|---|---|"]
        step = max(1, len(memory) // 12)
        lines += [f"| {t:.0f} | {rows} | {kb} |" for t, rows, kb in memory[::step]]
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="10 runs (every way once) and 50,000 samples (the tests)")
    parser.add_argument("--runs", type=int, help="consecutive runs (default 200, --quick 10)")
    parser.add_argument("--samples", type=int, help="zero-stop samples of the memory phase (default 1e6)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    have_dlv = shutil.which("dlv") is not None
    ways = [w for w in WAYS if have_dlv or not w.backend.startswith("delve")]
    count = args.runs or (len(ways) if args.quick else 200)
    samples = args.samples or (50_000 if args.quick else 1_000_000)
    started = time.monotonic()
    runs: list[Run] = []
    with tempfile.TemporaryDirectory() as tmp:
        targets = {key: RunningTarget(target.binary, *target.argv()) for key, target in SOAK_TARGETS.items()}
        unchecked: dict[str, tuple[Run, float]] = {}
        """By target: the last run on it, and when it ended, whose check that the target works waits."""

        def check(key: str) -> None:
            if key in unchecked:
                run, ended = unchecked.pop(key)
                check_working(run, targets[key], ended)
                harms = [h for h in HARMS if getattr(run, h)]
                print(f"soak: #{run.index} {run.way} / {run.target} {'SIGINT ' if run.interrupted else ''}"
                      f"exit {run.exit_code} rows {run.rows} {' '.join(harms) or 'ok'}", flush=True)

        try:
            for index in range(1, count + 1):
                way = ways[(index - 1) % len(ways)]
                check(way.target)
                run, ended = one_run(index, way, targets[way.target], Path(tmp))
                runs.append(run)
                unchecked[way.target] = (run, ended)
                if run.target_died or run.code_changed or run.left_traced or run.left_stopped:
                    check(way.target)
                    targets[way.target].stop()  # go on with a new one; the harm is counted
                    targets[way.target] = RunningTarget(SOAK_TARGETS[way.target].binary,
                                                        *SOAK_TARGETS[way.target].argv())
            for key in list(unchecked):
                check(key)
        finally:
            for target in targets.values():
                target.stop()
        memory = memory_phase(samples, Path(tmp))
    args.results.mkdir(parents=True, exist_ok=True)
    with open(args.results / "soak.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(runs[0])))
        writer.writeheader()
        writer.writerows(asdict(r) for r in runs)
    report(runs, memory, samples, args.results / "SOAK.md", time.monotonic() - started, args.quick)
    print((args.results / "SOAK.md").read_text())
    harmed = sum(getattr(r, h) for r in runs for h in HARMS)
    return 1 if harmed else 0


if __name__ == "__main__":
    raise SystemExit(main())
