"""Every thread's stack of a 10-thread process: the whole command's time and what the threads lost,
`sampler stack` beside `gdb -batch -ex 'thread apply all bt'` and `eu-stack -p`, on 10 threads that
wait (a server's pool between requests) and on 10 that compute.

The target is targets/spinners with 10 busy threads, each clocking its own stalls (a unit of work
that came over 10 us late): the stall each tool caused is the target's stalled time during the
tool's run, less the same length of the baseline's, summed over the threads. The tools take
turns (sampler, gdb, eu-stack, sampler...: ROUNDS rounds); medians. gdb and eu-stack stop every
thread for as long as they read; sampler stops one thread at a time, only while its registers
and stack top are read.

    .venv/bin/python bench/stacktime.py [--rounds 5] [--quick] [--results DIR]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import RunningTarget, write_results  # type: ignore[import-not-found]  # noqa: E402
from profiling import counters  # type: ignore[import-not-found]  # noqa: E402

THREADS = 10
COMMANDS = {
    "sampler": lambda pid: [str(ROOT / ".venv" / "bin" / "sampler"), "stack", "--pid", str(pid)],
    "gdb": lambda pid: ["gdb", "-q", "-batch", "-nx", "-p", str(pid), "-ex", "thread apply all bt"],
    "eu-stack": lambda pid: ["eu-stack", "-p", str(pid)],
}


def run(tool: str, target: RunningTarget) -> dict[str, float]:
    before = counters(target, time.monotonic())
    started = time.monotonic()
    result = subprocess.run(COMMANDS[tool](target.pid), capture_output=True, text=True, timeout=300)
    took = time.monotonic() - started
    after = counters(target, time.monotonic())
    if result.returncode != 0 and tool == "sampler":
        raise SystemExit(f"bench: sampler stack failed: {result.stderr[-1000:]}")
    span = after[0] - before[0]
    frames = sum(1 for line in result.stdout.splitlines() if line.lstrip().startswith("#"))
    return {"took_s": took, "stalled_us": after[2] - before[2], "span_s": span, "frames": frames}


def _idle(tools: list[str], rounds: int) -> dict[str, list[float]]:
    """The whole command's time on 10 threads that wait (a server's pool between requests)."""
    target = RunningTarget("spinners", str(THREADS), "idle")
    took: dict[str, list[float]] = {tool: [] for tool in tools}
    try:
        time.sleep(0.5)
        for _ in range(rounds):
            for tool in tools:
                started = time.monotonic()
                subprocess.run(COMMANDS[tool](target.pid), capture_output=True, timeout=300)
                took[tool].append(time.monotonic() - started)
    finally:
        target.stop()
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="two rounds")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    tools = [tool for tool in COMMANDS if tool == "sampler" or shutil.which(COMMANDS[tool](0)[0])]
    idle = _idle(tools, rounds)
    target = RunningTarget("spinners", str(THREADS))
    runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in (*tools, "none")}
    try:
        time.sleep(1.5)
        for _ in range(rounds):
            for tool in tools:
                runs[tool].append(run(tool, target))
            start = counters(target, time.monotonic())  # a baseline as long as the runs were
            time.sleep(max(2.0, statistics.mean(runs[t][-1]["span_s"] for t in tools)))
            end = counters(target, time.monotonic())
            runs["none"].append({"took_s": 0, "stalled_us": end[2] - start[2], "span_s": end[0] - start[0],
                                 "frames": 0})
    finally:
        target.stop()
    base = statistics.median(r["stalled_us"] / r["span_s"] for r in runs["none"])  # stalled us a second
    rows: list[dict[str, object]] = []
    for tool in tools:
        caused = [r["stalled_us"] - base * r["span_s"] for r in runs[tool]]
        rows.append({"tool": tool, "rounds": len(runs[tool]), "threads": THREADS,
                     "idle_took_s": round(statistics.median(idle[tool]), 3),
                     "took_s": round(statistics.median(r["took_s"] for r in runs[tool]), 3),
                     "stall_caused_ms": round(statistics.median(caused) / 1000, 1),
                     "stall_per_thread_ms": round(statistics.median(caused) / 1000 / THREADS, 2),
                     "frames": int(statistics.median(r["frames"] for r in runs[tool]))})
    lines = ["# Every thread's stack of a 10-thread process (bench/stacktime.py)", "",
             f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs; targets/spinners with {THREADS} busy threads; "
             f"{rounds} rounds, the tools taking turns; medians.", "",
             "| tool | whole command, 10 waiting threads | whole command, 10 busy threads | stall it caused the busy "
             "ones, all threads (clocked in them) | a thread | frames |",
             "|---|---|---|---|---|---|"]
    lines += [f"| {r['tool']} | {r['idle_took_s']} s | {r['took_s']} s | {r['stall_caused_ms']} ms | "
              f"{r['stall_per_thread_ms']} ms | {r['frames']} |" for r in rows]
    lines += ["", "stall caused: the threads' stalled time during the command less the baseline's for as long "
              "(10 busy threads on 2 CPUs are stalled much of the time by the scheduler alone)."]
    write_results(args.results, "stacktime", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
