"""Median pause per sample against the bundled target: a quick figure, not the full bench.

    .venv/bin/python bench/pause.py [--target ringbuf-go] [--rate 10] [--count 100] [--backend delve]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="ringbuf-go")
    parser.add_argument("--at", default="main.(*Ring).Read")
    parser.add_argument("--expr", default="delta=b.w-b.r")
    parser.add_argument("--rate", default="10")
    parser.add_argument("--count", default="100")
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    target = subprocess.Popen([str(ROOT / "targets" / "bin" / args.target)], stdout=subprocess.PIPE, text=True)
    try:
        assert target.stdout is not None
        ready = target.stdout.readline()
        if not ready.startswith("ready pid="):
            print(f"pause: the target did not start: {ready!r}", file=sys.stderr)
            return 1
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "pause.csv"
            command = [sys.executable, "-m", "sampler", "attach", "--pid", str(target.pid),
                       "--expr", args.expr, "--rate", args.rate, "--count", args.count,
                       "--backend", args.backend, "--out", str(out), "--quiet"]
            if args.at:
                command += ["--at", args.at]
            subprocess.run(command, check=True, cwd=ROOT)
            with open(out, newline="") as f:
                rows = list(csv.DictReader(f))
    finally:
        target.kill()
        target.wait()
    pauses = [float(r["pause_us"]) for r in rows if not r["error"]]
    waits = [float(r["wait_us"]) for r in rows if not r["error"]]
    cuts = statistics.quantiles(pauses, n=20)
    print(f"{args.target} --backend {args.backend} at {args.rate} Hz, {len(rows)} samples "
          f"({len(rows) - len(pauses)} with errors): pause_us median {statistics.median(pauses):.0f}, "
          f"p5 {cuts[0]:.0f}, p95 {cuts[-1]:.0f}; wait_us median {statistics.median(waits):.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
