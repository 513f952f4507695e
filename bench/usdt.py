"""What a USDT probe costs the program that fires it: targets/usdt's steps, each firing sampler:tick
(6 arguments) and sampler:item, clocked by the program itself (CLOCK_MONOTONIC around a batch of
steps), with nobody reading the probe, with sampler's in-process probe (counting, and reading two
arguments), with sampler's int3, and with bpftrace's usdt probe (a kernel uprobe), in turns (A/B
alternation; the median of ROUNDS batches each).

Results: bench/results/usdt.csv and USDT.md.

    .venv/bin/python bench/usdt.py [--rounds 5] [--results DIR]
"""

from __future__ import annotations

import argparse
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import SAMPLER, write_results  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "targets" / "bin" / "usdt"
PROBE = "usdt:sampler:tick"


def batch(target: subprocess.Popen[str], steps: int) -> float:
    """ns a step, by the program's own clock."""
    assert target.stdin is not None and target.stdout is not None
    target.stdin.write(f"{steps}\n")
    target.stdin.flush()
    while True:
        line = target.stdout.readline()
        assert line, "the target ended"
        if line.startswith(f"done {steps} "):
            return int(line.split("ns=")[1]) / steps


def reader(way: str, pid: int) -> subprocess.Popen[str] | None:
    if way == "none":
        return None
    if way == "bpftrace":
        proc = subprocess.Popen(["bpftrace", "-p", str(pid), "-e", f"usdt:{TARGET}:sampler:tick {{ @n = count(); }}"],
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        while "Attaching" not in proc.stdout.readline():
            pass
        time.sleep(0.5)
        return proc
    options = {"in-process, counting": ["--probe", "inprocess"],
               "in-process, reading arg0 and arg1": ["--probe", "inprocess", "--expr", "i=arg0", "--expr", "n=arg1"],
               "int3": ["--probe", "int3"]}[way]
    proc = subprocess.Popen([*SAMPLER, "trace", "--pid", str(pid), "--at", PROBE, *options, "--out", "/dev/null",
                             "--quiet"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    code = (TARGET.read_bytes())
    while time.monotonic() < deadline:  # its probe in: the program's code differs from the file
        time.sleep(0.1)
        with open(f"/proc/{pid}/maps") as maps:
            start = next(int(line.split("-")[0], 16) for line in maps if line.rstrip().endswith(str(TARGET))
                         and int(line.split()[2], 16) == 0)
        with open(f"/proc/{pid}/mem", "rb") as mem:
            mem.seek(start)
            now = mem.read(0x3000)
        if now != code[:0x3000]:
            break
    return proc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    ways = ["none", "in-process, counting", "in-process, reading arg0 and arg1", "int3"]
    if shutil.which("bpftrace"):
        ways.append("bpftrace")
    steps = {"none": 200_000, "in-process, counting": 200_000, "in-process, reading arg0 and arg1": 200_000,
             "int3": 2_000, "bpftrace": 50_000}
    target = subprocess.Popen([str(TARGET)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert target.stdout is not None
    target.stdout.readline()
    figures: dict[str, list[float]] = {way: [] for way in ways}
    try:
        batch(target, 10_000)  # (warm)
        for _ in range(args.rounds):
            for way in ways:
                proc = reader(way, target.pid)
                try:
                    figures[way].append(batch(target, steps[way]))
                finally:
                    if proc is not None:
                        proc.send_signal(signal.SIGINT)
                        proc.communicate(timeout=60)
    finally:
        target.kill()
    base = statistics.median(figures["none"])
    rows: list[dict[str, object]] = [{"way": way, "ns_a_step": round(statistics.median(v), 1),
                                      "added_ns": round(statistics.median(v) - base, 1), "steps": steps[way],
                                      "rounds": len(v)} for way, v in figures.items()]
    report = ["# What a USDT probe costs the program that fires it (bench/usdt.py)", "",
              f"targets/usdt: each step fires `{PROBE}` (6 arguments) once, clocked by the program; the median "
              f"of {args.rounds} batches each, the ways in turns.", "",
              "| who reads the probe | ns a step | added a hit |", "|---|---|---|"]
    report += [f"| {r['way']} | {r['ns_a_step']} | {r['added_ns']} |" for r in rows]
    write_results(args.results, "usdt", rows, "\n".join(report) + "\n")
    print("\n".join(report))


if __name__ == "__main__":
    main()
