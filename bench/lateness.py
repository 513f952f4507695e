"""How late ticks start: `late_us` of every backend against the busy Go ring buffer (its two
goroutines spin), A/B with the worker's short scheduler slice on and off (SAMPLER_SHORT_SLICE=0),
on an otherwise quiet machine and with one more busy process per core.

    .venv/bin/python bench/lateness.py [--samples 50] [--rate 5]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from harness import COMMIT, ROOT, SAMPLER, TARGETS, RunningTarget, cpu_hog  # type: ignore[import-not-found]


def late_us(target: RunningTarget, backend: str, short: bool, samples: int, rate: float, out: Path) -> list[float]:
    env = {**os.environ, "SAMPLER_SHORT_SLICE": "1" if short else "0"}
    go = TARGETS["go"]
    subprocess.run([*SAMPLER, "attach", "--backend", backend, "--pid", str(target.pid), "--at", go.hot,
                    "--expr", f"d={go.delta}", "--rate", str(rate), "--count", str(samples), "--out", str(out),
                    "--quiet"], cwd=ROOT, env=env, check=True)
    with open(out, newline="") as f:
        return [float(row["late_us"]) for row in csv.DictReader(f)][1:]  # the first tick is due at once


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--rate", type=float, default=5.0)
    args = parser.parse_args()
    target = RunningTarget("ringbuf-go")
    print(f"lateness: commit {COMMIT}, {args.samples} samples at {args.rate:g} Hz per cell, Go target at "
          f"{TARGETS['go'].hot}; A/B alternating\n")
    print("| machine | backend | short slice | median late (µs) | p90 (µs) | max (µs) | ticks over 1 ms |")
    print("|---|---|---|---|---|---|---|")
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for load in ("quiet", "loaded"):
                for backend in ("delve", "delve-rpc", "ptrace"):
                    for short in (True, False):
                        out = Path(tmp) / "l.csv"
                        if load == "loaded":
                            with cpu_hog():
                                values = late_us(target, backend, short, args.samples, args.rate, out)
                        else:
                            values = late_us(target, backend, short, args.samples, args.rate, out)
                        values.sort()
                        p90 = values[int(0.9 * (len(values) - 1))]
                        print(f"| {load} | {backend} | {'on' if short else 'off'} | {statistics.median(values):.0f} "
                              f"| {p90:.0f} | {values[-1]:.0f} | {sum(v > 1000 for v in values)}/{len(values)} |",
                              flush=True)
    finally:
        target.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
