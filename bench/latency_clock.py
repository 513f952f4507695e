"""How right trace --latency's clock is: latency_us against what the call really took, and what the
target lives with, beside bpftrace's uprobe + uretprobe on the same program.

targets/latency's work(i, k) is busy k x 100 us by the monotonic clock (k = 1 + i % 5), so each call's
own time is known to within a microsecond; the program also clocks each call from outside (its caller's
figure: the call plus every stop a tracer made in it). For each tracer, one run of CALLS calls:

- error: the tracer's figure less k x 100 us, per call (median, p95, max); sampler's rows marked (an
  upper bound: the return's stop came while sampler was busy; or a call under way while the in-process
  probes went in) are counted apart and left out; sampler runs twice, --probe int3 and inprocess;
- added: the caller's figure less k x 100 us (what one timed call costs the program).

Results: bench/results/latency_clock.csv and LATENCY_CLOCK.md.

    .venv/bin/python bench/latency_clock.py [--calls 300] [--results DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
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
TARGET = ROOT / "targets" / "bin" / "latency"


def start_target(calls: int) -> tuple[subprocess.Popen[str], list[str]]:
    proc = subprocess.Popen([str(TARGET), "work", str(calls)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    lines = [proc.stdout.readline()]
    assert lines[0].startswith("ready"), lines
    return proc, lines


def read_until_done(proc: subprocess.Popen[str], lines: list[str]) -> dict[int, tuple[int, float]]:
    assert proc.stdout is not None
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("done"):
            break
    calls = {}
    for line in lines:
        if line.startswith("call "):
            _, i, k, ns, _ = line.split()
            calls[int(i)] = (int(k), int(ns) / 1000)
    return calls


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def summary(tracer: str, errors: list[float], added: list[float], bounded: int, calls: int) -> dict[str, object]:
    return {"tracer": tracer, "calls": calls, "rows_exact": len(errors), "rows_bounded": bounded,
            "error_median_us": round(statistics.median(errors), 1) if errors else "",
            "error_p95_us": round(percentile(errors, 0.95), 1) if errors else "",
            "error_max_us": round(max(errors), 1) if errors else "",
            "error_min_us": round(min(errors), 1) if errors else "",
            "added_median_us": round(statistics.median(added), 1) if added else ""}


def run_sampler(calls: int, folder: Path, probe: str) -> dict[str, object]:
    proc, lines = start_target(calls)
    out = folder / f"sampler-{probe}.csv"
    tracer = subprocess.Popen([*SAMPLER, "trace", "--pid", str(proc.pid), "--at", "work", "--latency", "--expr",
                               "i=arg0", "--probe", probe, "--out", str(out), "--quiet"], cwd=ROOT, text=True,
                              stderr=subprocess.PIPE)
    try:
        own = read_until_done(proc, lines)
        time.sleep(1.0)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.communicate(timeout=60)
        proc.kill()
        proc.wait()
    errors, bounded = [], 0
    with out.open() as f:
        for row in csv.DictReader(f):
            k, _ = own[int(row["i"])]
            if row["error"]:  # (an upper bound, or a call the in-process probes went in during)
                bounded += 1
                continue
            errors.append(float(row["latency_us"]) - k * 100)
    added = [us - k * 100 for n, (k, us) in own.items() if n >= 5]  # (the in-process probes in by then)
    name = "int3" if probe == "int3" else "in-process, clocked in the target"
    return summary(f"sampler trace --latency ({name})", errors, added, bounded, calls)


def run_bpftrace(calls: int) -> dict[str, object]:
    if shutil.which("bpftrace") is None:
        return {"tracer": "bpftrace uprobe+uretprobe", "calls": 0, "note": "bpftrace is not installed"}
    proc, lines = start_target(calls)
    script = (f"uprobe:{TARGET}:work {{ @s[tid] = nsecs; @i[tid] = arg0; }} "
              f"uretprobe:{TARGET}:work /@s[tid]/ {{ printf(\"%d %d\\n\", @i[tid], nsecs - @s[tid]); "
              "delete(@s[tid]); delete(@i[tid]); }")
    tracer = subprocess.Popen(["bpftrace", "-e", script], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert tracer.stdout is not None
    assert "Attaching" in tracer.stdout.readline()
    os.kill(proc.pid, 0)
    # bpftrace writes no byte the program looks for: the program waits for a change of work()'s first
    # bytes, and a uprobe's int3 is one (the kernel writes it into the page)
    try:
        own = read_until_done(proc, lines)
        time.sleep(0.5)
    finally:
        tracer.send_signal(signal.SIGINT)
        printed, _ = tracer.communicate(timeout=60)
        proc.kill()
        proc.wait()
    errors = []
    for line in printed.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in own:
            k, _ = own[int(parts[0])]
            errors.append(int(parts[1]) / 1000 - k * 100)
    added = [us - k * 100 for n, (k, us) in own.items() if n >= 5]
    return summary("bpftrace uprobe+uretprobe", errors, added, 0, calls)


def report(rows: list[dict[str, object]]) -> str:
    lines = ["# How right --latency's clock is: against each call's own time (targets/latency, k x 100 us busy)",
             "", "| tracer | calls | rows exact | rows bounded | error median | error p95 | error max | error min "
             "| added to the call (caller's clock, median) |", "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        lines.append(f"| {row['tracer']} | {row.get('calls', '')} | {row.get('rows_exact', '')} | "
                     f"{row.get('rows_bounded', '')} | {row.get('error_median_us', '')} us | "
                     f"{row.get('error_p95_us', '')} us | {row.get('error_max_us', '')} us | "
                     f"{row.get('error_min_us', '')} us | {row.get('added_median_us', '')} us |")
    lines += ["", "error: the tracer's latency less the call's own time (k x 100 us busy by CLOCK_MONOTONIC); "
              "rows bounded: sampler's rows with an error (an int3's return seen while sampler was busy: an upper "
              "bound; a call under way while the in-process probes went in), left out of the error. added: the "
              "program's own clock around the call less its own time: what timing it cost the call (from the sixth "
              "call on).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    options = parser.parse_args()
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-latency-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    rows = [run_sampler(options.calls, folder, "int3"), run_sampler(options.calls, folder, "inprocess"),
            run_bpftrace(options.calls)]
    for row in rows:
        print(row, file=sys.stderr)
    write_results(options.results, "latency_clock", rows, report(rows))
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
