"""Every thread's stack of a 10-thread process: the whole command's time and what the threads lost,
`sampler stack` beside `gdb -batch -ex 'thread apply all bt'` and `eu-stack -p`: on 10 threads that
wait (a server's pool between requests), on 10 that compute, and on 2 that compute beside 8 that
wait, whose 2 busy threads (one a CPU) clock what each tool costs them.

targets/spinners' busy threads clock their own stalls (a unit of work that came over 10 us late):
the stall a tool caused is the busy threads' stalled time during the tool's run, less the same
length of the baseline's (the tool's own CPU time counts: on 2 CPUs, a busy thread waits while it
runs). The tools take turns (sampler, gdb, eu-stack, sampler...: ROUNDS rounds); medians. gdb and
eu-stack stop every thread for as long as they read; sampler stops each running thread only
while its registers and stack top are read, and a waiting one not at all.

    .venv/bin/python bench/stacktime.py [--rounds 5] [--quick] [--results DIR]
"""

from __future__ import annotations

import argparse
import json
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
    "sampler": lambda pid: [str(ROOT / ".venv" / "bin" / "sampler"), "stack", "--pid", str(pid), "--format", "json"],
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
    if tool == "sampler":
        [process] = [json.loads(line) for line in result.stdout.splitlines()]
        frames = sum(len(t["frames"] or []) for t in process["threads"])
        holds = [t["stopped_us"] for t in process["threads"] if t["stopped_us"] is not None]
    else:
        frames = sum(1 for line in result.stdout.splitlines() if line.lstrip().startswith("#"))
        holds = []
    return {"took_s": took, "stalled_us": after[2] - before[2], "span_s": span, "frames": frames,
            "held_us": statistics.median(holds) if holds else 0.0, "stopped": len(holds)}


def _took(tools: list[str], rounds: int, busy: str, waiting: str) -> dict[str, list[float]]:
    """The whole command's time on BUSY computing and WAITING waiting threads."""
    target = RunningTarget("spinners", busy, waiting)
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
    idle = _took(tools, rounds, "0", str(THREADS))
    busy = _took(tools, rounds, str(THREADS), "0")
    target = RunningTarget("spinners", "2", str(THREADS - 2))
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
                                 "frames": 0, "held_us": 0.0, "stopped": 0})
    finally:
        target.stop()
    base = statistics.median(r["stalled_us"] / r["span_s"] for r in runs["none"])  # stalled us a second
    rows: list[dict[str, object]] = []
    for tool in tools:
        caused = [r["stalled_us"] - base * r["span_s"] for r in runs[tool]]
        rows.append({"tool": tool, "rounds": len(runs[tool]), "threads": THREADS,
                     "waiting_took_s": round(statistics.median(idle[tool]), 3),
                     "busy_took_s": round(statistics.median(busy[tool]), 3),
                     "mixed_took_s": round(statistics.median(r["took_s"] for r in runs[tool]), 3),
                     "stall_caused_ms": round(statistics.median(caused) / 1000, 1),
                     "stall_per_busy_thread_ms": round(statistics.median(caused) / 1000 / 2, 2),
                     "threads_stopped": int(statistics.median(r["stopped"] for r in runs[tool])) if tool == "sampler"
                     else THREADS,
                     "held_us": round(statistics.median(r["held_us"] for r in runs[tool]), 1)
                     if tool == "sampler" else "",
                     "frames": int(statistics.median(r["frames"] for r in runs[tool]))})
    lines = ["# Every thread's stack of a 10-thread process (bench/stacktime.py)", "",
             f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs; targets/spinners; {rounds} rounds, the tools "
             "taking turns; medians.", "",
             "| tool | whole command: 10 waiting threads | 10 busy threads | 2 busy + 8 waiting | threads stopped "
             "(2 busy + 8 waiting) | each held (sampler's clock) | stall the 2 busy ones clocked | frames |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        held = f"{r['held_us']} us" if r["held_us"] != "" else "all, for the read"
        lines.append(f"| {r['tool']} | {r['waiting_took_s']} s | {r['busy_took_s']} s | {r['mixed_took_s']} s | "
                     f"{r['threads_stopped']} | {held} | {r['stall_caused_ms']} ms | {r['frames']} |")
    lines += ["", "stall clocked: the busy threads' stalled time during the command less the baseline's for as "
              "long (the tool's own CPU time is in it: on 2 CPUs a busy thread waits while the tool runs); "
              "it is within the noise of the target's own clock here (negative values: less than the "
              "baseline's)."]
    write_results(args.results, "stacktime", rows, "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
