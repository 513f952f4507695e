"""What a run of many processes costs sampler, and whether it keeps the schedule: 1, 10, 50 and
200 processes of one program (targets/pool's workers, each calling handle() every 5 ms),
sampled together at a breakpoint at 10 Hz for 30 s (`make bench-many`).

For each count: rows per process against the schedule (ticks x 1), sampler's CPU (its front,
worker and guardian, from the kernel's accounting of the children this bench waited for),
that CPU per tick, the worker's peak RSS, the time to the first row of every process (the whole
command), and the median and 99th-percentile lateness of the ticks. Every process is checked
afterwards: running, untraced, code equal to its file.

    .venv/bin/python bench/many.py [--counts 1,10,50,200] [--seconds 30] [--quick] [--results DIR]

--quick: 1 and 10 processes for 3 s (the test suite runs it).
"""

from __future__ import annotations

import argparse
import csv
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import BIN, COMMIT, ROOT, SAMPLER, code_intact, csv_whole, worker_of, write_results

from sampler.target import procfs

RATE_HZ = 10
PERIOD_US = 5000


def start_pool(workers: int) -> tuple[subprocess.Popen[str], list[int]]:
    pool = subprocess.Popen([str(BIN / "pool"), str(workers), str(PERIOD_US)], stdout=subprocess.PIPE, text=True)
    assert pool.stdout is not None
    first = pool.stdout.readline()
    assert first.startswith("ready pid="), first
    deadline = time.monotonic() + 30
    while len(procfs.children(pool.pid)) < workers:
        assert time.monotonic() < deadline, "the pool did not start its workers"
        time.sleep(0.05)
    return pool, sorted(procfs.children(pool.pid))


def stop_pool(pool: subprocess.Popen[str]) -> str:
    pool.send_signal(signal.SIGTERM)
    out, _ = pool.communicate(timeout=60)
    return out.splitlines()[-1] if out else ""


def steady_cpu(run: subprocess.Popen[str], out: Path, count: int, seconds: float) -> tuple[float, float]:
    """The worker's CPU once every process has a row, until shortly before the end: (share of a
    core, ms per tick)."""
    deadline = time.monotonic() + 600
    while not (out.exists() and len(out.read_text().splitlines()) > 2 * count):
        if run.poll() is not None or time.monotonic() > deadline:
            return 0.0, 0.0
        time.sleep(0.05)
    worker = worker_of(run.pid)
    if worker is None:
        return 0.0, 0.0
    first, since = cpu_s(worker), time.monotonic()
    time.sleep(max(0.5, seconds * 0.6))
    used, took = cpu_s(worker) - first, time.monotonic() - since
    return used / took, used / (took * RATE_HZ) * 1000


def cpu_s(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(count: int, seconds: float, folder: Path) -> dict[str, object]:
    pool, workers = start_pool(count)
    out = folder / f"many-{count}.csv"  # the rows themselves: in a temporary folder
    out.unlink(missing_ok=True)
    try:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.monotonic()
        args = [arg for pid in workers for arg in ("--pid", str(pid))]
        run = subprocess.Popen([*SAMPLER, "attach", "--backend", "ptrace", *args, "--at", "handle", "--expr", "n",
                                "--rate", str(RATE_HZ), "--duration", f"{seconds}s", "--out", str(out), "--quiet"],
                               cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        steady = steady_cpu(run, out, count, seconds)
        _, stderr = run.communicate(timeout=seconds * 10 + 600)
        took = time.monotonic() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        intact = all(code_intact(pid) and procfs.tracer_pid(pid) == 0 and procfs.state(pid) not in "Tt"
                     for pid in workers)
    finally:
        last = stop_pool(pool)
    whole, _ = csv_whole(out)
    with open(out, newline="") as f:
        rows = list(csv.DictReader(f))
    per_pid: dict[str, int] = {}
    for row in rows:
        per_pid[row["pid"]] = per_pid.get(row["pid"], 0) + 1
    ticks = round(seconds * RATE_HZ)
    late = sorted(float(row["late_us"]) for row in rows) or [0.0]
    first_row = min((float(row["elapsed_s"]) for row in rows), default=0.0)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    errors = sum(1 for row in rows if row["error"])
    return {
        "processes": count,
        "seconds": seconds,
        "exit": run.returncode,
        "steady_cpu_share": round(steady[0], 3),
        "steady_cpu_ms_per_tick": round(steady[1], 2),
        "csv_whole": whole,
        "rows": len(rows),
        "errors": errors,
        "schedule_rows": ticks,
        "min_rows": min(per_pid.values(), default=0),
        "max_rows": max(per_pid.values(), default=0),
        "processes_with_rows": len(per_pid),
        "cpu_s": round(cpu, 2),
        "cpu_share": round(cpu / took, 3),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1),
        "command_s": round(took, 2),
        "attach_s": round(took - seconds - first_row, 2),
        "late_p50_ms": round(statistics.median(late) / 1000, 2),
        "late_p99_ms": round(late[int(0.99 * (len(late) - 1))] / 1000, 2),
        "untouched": intact and last == "pool done bad=0",
        "stderr": stderr.strip().splitlines()[-1] if stderr.strip() else "",
    }


def report(rows: list[dict[str, object]], seconds: float) -> str:
    lines = [
        f"# Many processes in one run: cost per tick against the process count (commit {COMMIT})",
        "",
        f"`bench/many.py`: targets/pool's workers (each calls handle() every {PERIOD_US // 1000} ms), all sampled "
        f"in one run at a breakpoint on handle(), {RATE_HZ} Hz for {seconds:g} s, one tracer for all. CPU: "
        "sampler's front, worker and guardian (the kernel's accounting of the children the bench waited for); "
        "steady: the worker's own CPU once every process had a row, per tick: that over the ticks. Peak RSS: "
        "the worker's. Attach: the command's time to the first row. Lateness: of each tick's start, over every row.",
        "",
        "| processes | rows per process (schedule) | worker CPU, steady | per tick | all of sampler's CPU | peak RSS |"
        " attach | late p50 / p99 | untouched |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['processes']} | {row['min_rows']}-{row['max_rows']} ({row['schedule_rows']}) | "
            f"{float(row['steady_cpu_share']) * 100:.0f} % of a core | {row['steady_cpu_ms_per_tick']} ms | "
            f"{row['cpu_s']} s | "
            f"{row['peak_rss_mb']} MB | {row['attach_s']} s | {row['late_p50_ms']} / {row['late_p99_ms']} ms | "
            f"{'yes' if row['untouched'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="1,10,50,200")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--quick", action="store_true", help="1 and 10 processes for 3 s")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    options = parser.parse_args()
    counts = [1, 10] if options.quick else [int(c) for c in options.counts.split(",")]
    seconds = 3.0 if options.quick else options.seconds
    options.results.mkdir(parents=True, exist_ok=True)
    rows = []
    scratch = Path(tempfile.mkdtemp(prefix="sampler-many-"))
    for count in counts:
        row = measure(count, seconds, scratch)
        print(row, flush=True)
        rows.append(row)
    shutil.rmtree(scratch, ignore_errors=True)
    write_results(options.results, "many", rows, report(rows, seconds))
    print(report(rows, seconds))
    bad = [row for row in rows if row["exit"] != 0 or not row["untouched"] or not row["csv_whole"]]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
