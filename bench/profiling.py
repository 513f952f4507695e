"""What a profile costs the threads it samples, clocked inside them: `sampler profile` beside
`perf record -g` and nothing, at 49, 99 and 999 Hz, on 1 and 8 busy threads.

targets/spinners/spinners.c runs N threads that only compute in units of a few microseconds and
clock each unit (the vDSO's clock): a unit that took over 10 us longer than the thread's fastest
is a stall (the thread was stopped, or not scheduled), its excess added up. Per window the bench
takes the target's own lines at its start and its end: units done per second (the work the
target got through) and stalled time per second per thread. The three tools take turns on one
running target (none, sampler, perf, none, sampler, perf ...: ROUNDS rounds), so that the host's
load of the moment falls on all of them alike; figures are medians over the rounds, and each
tool's stall is the excess over the baseline window of its own round, divided by its samples.

sampler stops a running thread for each sample (its registers and stack read through ptrace),
perf interrupts it in the kernel (cpu-clock); with 8 threads on this 2-core host most stalls
are the scheduler's, and both tools take CPU time from the target too (sampler is Python): the
lost units say what the program lost in all.

    .venv/bin/python bench/profiling.py [--rounds 3] [--window 5] [--quick] [--results DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import RunningTarget, write_results  # type: ignore[import-not-found]  # noqa: E402

SAMPLER = [str(ROOT / ".venv" / "bin" / "sampler")]
LINE = re.compile(r"^t_us=(\d+) units=(\d+) stalls=(\d+) stalled_us=(\d+)$")
SUMMARY = re.compile(r"(\d+) samples \(on-CPU\) of (\d+) thread\(s\) in ([\d.]+) s, (\d+) of [\d.]+ ticks/s; "
                     r"a sampled thread was held (\d+) us")
PERF_SAMPLES = re.compile(r"\((\d+) samples\)")


def counters(target: RunningTarget, after: float) -> tuple[float, int, int]:
    """The target's first line printed after ``after`` (its clock, units, stalled us), waiting for it."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        for t, line in list(target.lines):
            match = LINE.match(line)
            if t > after and match:
                return int(match.group(1)) / 1e6, int(match.group(2)), int(match.group(4))
        time.sleep(0.05)
    raise SystemExit("bench: the target printed nothing (is it stopped?)")


def window(target: RunningTarget, seconds: float, threads: int) -> dict[str, float]:
    """Units per second and stalled share per thread over a window of whole target lines."""
    start = counters(target, time.monotonic())
    time.sleep(seconds)
    end = counters(target, time.monotonic())
    span = end[0] - start[0]
    return {"units_per_s": (end[1] - start[1]) / span, "stalled_us_per_s": (end[2] - start[2]) / span / threads,
            "span_s": span, "stalled_us": (end[2] - start[2]) / threads}


def with_sampler(target: RunningTarget, rate: int, seconds: float, threads: int) -> dict[str, float]:
    out = Path(tempfile.mkdtemp()) / "p.folded"
    proc = subprocess.Popen([*SAMPLER, "profile", "--pid", str(target.pid), "--rate", str(rate), "--duration",
                             f"{seconds + 2.5}s", "--out", str(out)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    for line in proc.stderr:  # the clock starts once its tables are read
        if "profiling PID" in line:
            break
    measured = window(target, seconds, threads)
    _, rest = proc.communicate(timeout=120)
    match = SUMMARY.search(rest)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"bench: sampler profile failed: {rest[-2000:]}")
    samples, _, took, _, held = (float(g) for g in match.groups())
    shutil.rmtree(out.parent, ignore_errors=True)
    measured.update(samples_per_s=samples / took / threads, held_us=held)
    return measured


def with_perf(target: RunningTarget, rate: int, seconds: float, threads: int) -> dict[str, float]:
    data = Path(tempfile.mkdtemp()) / "perf.data"
    proc = subprocess.Popen(["perf", "record", "-F", str(rate), "-g", "-p", str(target.pid), "-o", str(data),
                             "--", "sleep", str(seconds + 2.5)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    measured = window(target, seconds, threads)
    _, err = proc.communicate(timeout=120)
    match = PERF_SAMPLES.search(err)
    shutil.rmtree(data.parent, ignore_errors=True)
    if proc.returncode != 0 or match is None:
        raise SystemExit(f"bench: perf record failed: {err[-1000:]}")
    measured.update(samples_per_s=int(match.group(1)) / (seconds + 2.5) / threads, held_us=0.0)
    return measured


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="1 thread, 99 Hz, one round of 2 s")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    threads_list, rates = ((1,), (99,)) if args.quick else ((1, 8), (49, 99, 999))
    rounds, seconds = (1, 2.0) if args.quick else (args.rounds, args.window)
    tools = ["none", "sampler"] + (["perf"] if shutil.which("perf") and _perf_works() else [])
    rows: list[dict[str, object]] = []
    for threads in threads_list:
        target = RunningTarget("spinners", str(threads))
        try:
            time.sleep(1.5)
            for rate in rates:
                runs: dict[str, list[dict[str, float]]] = {tool: [] for tool in tools}
                for _ in range(rounds):
                    for tool in tools:
                        if tool == "none":
                            runs[tool].append(window(target, seconds, threads))
                        elif tool == "sampler":
                            runs[tool].append(with_sampler(target, rate, seconds, threads))
                        else:
                            runs[tool].append(with_perf(target, rate, seconds, threads))
                rows += summarize(threads, rate, runs)
                print(f"bench: {threads} thread(s) at {rate} Hz done", file=sys.stderr)
        finally:
            target.stop()
    write_results(args.results, "profile", rows, report(rows, rounds, seconds))


def _perf_works() -> bool:
    result = subprocess.run(["perf", "record", "-F", "99", "-o", os.devnull, "--", "true"], capture_output=True)
    return result.returncode == 0


def summarize(threads: int, rate: int, runs: dict[str, list[dict[str, float]]]) -> list[dict[str, object]]:
    base = runs["none"]
    rows: list[dict[str, object]] = []
    for tool, measured in runs.items():
        loss = [1 - m["units_per_s"] / b["units_per_s"] for m, b in zip(measured, base)]
        excess = [(m["stalled_us_per_s"] - b["stalled_us_per_s"]) / m["samples_per_s"]
                  for m, b in zip(measured, base) if tool != "none" and m["samples_per_s"] > 0]
        rows.append({
            "threads": threads, "rate": rate, "tool": tool, "rounds": len(measured),
            "units_per_s": round(statistics.median(m["units_per_s"] for m in measured)),
            "work_lost_pct": round(100 * statistics.median(loss), 2) if tool != "none" else 0.0,
            "stalled_pct": round(100 * statistics.median(m["stalled_us_per_s"] for m in measured) / 1e6, 2),
            "samples_per_s_per_thread": round(statistics.median(m.get("samples_per_s", 0.0) for m in measured), 1),
            "stall_per_sample_us": round(statistics.median(excess), 1) if excess else "",
            "held_us": round(statistics.median(m.get("held_us", 0.0) for m in measured), 1)
            if tool == "sampler" else "",
        })
    return rows


def report(rows: list[dict[str, object]], rounds: int, seconds: float) -> str:
    lines = ["# What a profile costs the threads it samples (bench/profiling.py)", "",
             f"{time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs; {rounds} round(s) of {seconds:g} s windows, "
             "the tools taking turns on one target (targets/spinners); medians.", "",
             "| threads | rate | tool | work lost | stalled (per thread) | samples/s a thread | stall a sample "
             "(clocked in the target) | sampler's hold (its clock) |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        if row["tool"] == "none":
            lines.append(f"| {row['threads']} | {row['rate']} Hz | (none) | - | {row['stalled_pct']} % | - | - | - |")
            continue
        hold = f"{row['held_us']} us" if row["held_us"] != "" else "-"
        stall = f"{row['stall_per_sample_us']} us" if row["stall_per_sample_us"] != "" else "-"
        lines.append(f"| {row['threads']} | {row['rate']} Hz | {row['tool']} | {row['work_lost_pct']} % | "
                     f"{row['stalled_pct']} % | {row['samples_per_s_per_thread']} | {stall} | {hold} |")
    lines += ["", "work lost: the target's units per second against its baseline window of the same round; "
              "stalled: the share of each thread's time its units came over 10 us late (stopped or not "
              "scheduled); stall a sample: that excess over the baseline's, per sample of a thread."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
