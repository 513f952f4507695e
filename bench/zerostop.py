"""Zero-stop sampling as fast as it goes: the rate reached and the target's throughput,
alternating windows without and with the sampler (A B A B ...), medians.

    .venv/bin/python bench/zerostop.py [--target ringbuf-c] [--windows 3] [--seconds 4] [--rate 100000]
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^reads/s=(\d+) writes/s=(\d+)$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="ringbuf-c")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--rate", default="100000")
    args = parser.parse_args()
    name = "main.ring" if args.target.endswith("go") else "ring"
    target = subprocess.Popen([str(ROOT / "targets" / "bin" / args.target)], stdout=subprocess.PIPE, text=True)
    lines: list[tuple[float, int]] = []

    def read() -> None:
        assert target.stdout is not None
        for line in target.stdout:
            match = LINE.match(line.strip())
            if match:
                lines.append((time.monotonic(), int(match.group(1))))

    threading.Thread(target=read, daemon=True).start()
    base: list[float] = []
    sampled: list[float] = []
    rates: list[float] = []
    torn = rows_in_all = 0
    try:
        time.sleep(2)
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(args.windows):
                start = time.monotonic()
                time.sleep(args.seconds)
                base += [r for t, r in lines if start + 1 < t <= time.monotonic()]
                out = Path(tmp) / "z.csv"
                start = time.monotonic()
                subprocess.run([sys.executable, "-m", "sampler", "attach", "--pid", str(target.pid),
                                "--expr", f"d={name}.w-{name}.r", "--rate", args.rate,
                                "--duration", f"{args.seconds}s", "--out", str(out), "--quiet"],
                               check=True, cwd=ROOT)
                sampled += [r for t, r in lines if start + 1.5 < t <= time.monotonic()]
                with open(out, newline="") as f:
                    rows = list(csv.DictReader(f))
                rates.append(len(rows) / float(rows[-1]["elapsed_s"]))
                torn += sum("torn" in row["error"] for row in rows)
                rows_in_all += len(rows)
    finally:
        target.kill()
        target.wait()
    ratio = statistics.median(sampled) / statistics.median(base)
    print(f"{args.target}: zero-stop rate reached median {statistics.median(rates):.0f}/s "
          f"(min {min(rates):.0f}, max {max(rates):.0f}) asking {args.rate}/s; target reads/s "
          f"median {statistics.median(base):.0f} alone vs {statistics.median(sampled):.0f} sampled "
          f"(ratio {ratio:.2f}; {len(base)} and {len(sampled)} one-second lines; 2 cores shared); "
          f"{torn} of {rows_in_all} rows torn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
