"""How long putting thousands of probes in holds the target, clocked inside it (issue 59).

targets/stall's thread calls probe() and clock_gettime() in a loop and keeps every call that took over
5 us with its start (stall.c); `sampler trace --at 'libc:*' --max-probes 8000 --duration 2s` puts a probe
at each of libc's 3,600 functions. The longest of those calls, from the start of sampler's run to its end,
is the longest the target was held (or preempted: a 2-core machine with sampler busy on one core), by the
target's own clock. Each sampler given (a checkout's root: ``--before DIR`` runs that one too, A then B,
``--rounds`` times) gets a row per round: the whole command's time, the probes said in-process, and the
longest stall, the 99th percentile and the stalls over 50 ms.

Results: bench/results/setup_hold.csv and SETUP_HOLD.md.

    .venv/bin/python bench/setup_hold.py [--rounds 1] [--before /tmp/old-checkout] [--results DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import RunningTarget, write_results  # type: ignore[import-not-found]  # noqa: E402

LONG = re.compile(r"long index=\d+ ns=(\d+) t0=(\d+)")
COMMAND = ("trace", "--at", "libc:*", "--max-probes", "8000", "--duration", "2s")


def stalls(target: RunningTarget, since_ns: int, until_ns: int) -> list[int]:
    """The calls stall kept (over 5 us) that began between the two moments (CLOCK_MONOTONIC ns), in ns."""
    seen = len(target.lines)
    os.kill(target.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not any(line == "end long" for _, line in target.lines[seen:]):
        if time.monotonic() > deadline:
            raise SystemExit("bench: stall did not print its long calls")
        time.sleep(0.05)
    found = [LONG.match(line) for _, line in target.lines[seen:]]
    return [int(m[1]) for m in found if m is not None and since_ns <= int(m[2]) <= until_ns]


def one(root: Path, label: str) -> dict[str, object]:
    target = RunningTarget("stall")
    try:
        time.sleep(0.5)
        os.kill(target.pid, signal.SIGUSR2)  # (what it kept before: forgotten)
        time.sleep(0.1)
        with tempfile.TemporaryDirectory() as folder:
            began = time.monotonic_ns()
            done = subprocess.run([sys.executable, "-m", "sampler", *COMMAND, "--pid", str(target.pid),
                                   "--out", f"{folder}/rows.csv"], cwd=root, capture_output=True, text=True,
                                  env={**os.environ, "SAMPLER_JOURNAL_DIR": f"{folder}/journal"})
            ended = time.monotonic_ns()
        if done.returncode != 0 or target.proc.poll() is not None:
            raise SystemExit(f"bench: {label}: exit {done.returncode}, target "
                             f"{'gone' if target.proc.poll() is not None else 'alive'}: {done.stderr[-600:]}")
        long = sorted(stalls(target, began, ended))
        inprocess = re.search(r"probes: (\d+) in-process probes put in", done.stderr)
        return {"sampler": label, "command_s": round((ended - began) / 1e9, 1),
                "in_process": int(inprocess[1]) if inprocess else "",
                "longest_ms": round(long[-1] / 1e6, 1) if long else 0.0,
                "p99_ms": round(long[int(len(long) * 0.99)] / 1e6, 2) if long else 0.0,
                "over_50ms": sum(ns > 50e6 for ns in long), "stalls_over_5us": len(long)}
    finally:
        target.proc.kill()
        target.proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--before", type=Path, help="another checkout's root, run beside this one (A/B)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    samplers = ([("before", args.before)] if args.before else []) + [("after", ROOT)]
    rows = [one(root, label) for _ in range(args.rounds) for label, root in samplers]
    lines = ["# The longest hold of thousands of probes, clocked in the target (bench/setup_hold.py)", "",
             f"`sampler {' '.join(COMMAND)} --pid STALL` on targets/stall, {args.rounds} round(s)"
             + (f", A/B with {args.before}" if args.before else "") + "; stalls from the start of the command "
             "to its end, by stall's own clock (a call that took over 5 us).", "",
             "| sampler | command (s) | in-process probes | longest stall (ms) | p99 (ms) | stalls over 50 ms |",
             "|---|---|---|---|---|---|"]
    for label, _ in samplers:
        mine = [row for row in rows if row["sampler"] == label]
        lines.append(f"| {label} | {statistics.median(float(r['command_s']) for r in mine):.1f} | "  # type: ignore[arg-type]
                     f"{mine[0]['in_process']} | {max(float(r['longest_ms']) for r in mine):.1f} | "  # type: ignore[arg-type]
                     f"{statistics.median(float(r['p99_ms']) for r in mine):.2f} | "  # type: ignore[arg-type]
                     f"{sum(int(r['over_50ms']) for r in mine)} |")  # type: ignore[call-overload]
    write_results(args.results, "setup_hold", rows, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
