"""What a probe on every call costs the program, clocked by the program: sampler's in-process probe
beside its int3, the project's C reference tracer (every hit) and bpftrace's uprobe.

targets/burst (C) and targets/burst-go call a 3 ns function, touch(), in bursts (1 and 8 threads,
each its own share of the burst), clock each burst and say whether a tracer's bytes were in
touch()'s code for the whole of it. Each tracer is put on and taken off the same running target in
turns (untraced bursts, traced bursts, untraced...), ROUNDS times; its cost a call is the median
traced burst's ns a call less the median untraced one's. A burst's size suits the tracer (a million
calls in-process, 2,000 for an int3 at about 170 us a call).

In-process probes are measured twice: a burst of a million calls a thread (the ring, 65,536 records,
fills within the burst: most calls are counted and their record dropped, the cheaper path), and bursts
of 60,000 calls in all, 100 ms apart (each fits in the ring: most calls write their record; sampler
then writes rows at about 100,000 a second, so it drops records still between bursts, but fewer).
Latency probes (two hits a call: the entry and the return): sampler's --latency (int3 at both, and
in-process: a reading probe at the entry and one over the instructions that end with the ret; not on Go,
whose calls are timed by int3s) and
bpftrace's uprobe and uretprobe (funclatency's one-liner; not on Go, which uretprobes crash). Then the
same with a read plan of two fields through the argument (a->n and a->sum; Go: a.n, a.sum),
for the tracers that read them: sampler in-process (the plan runs in the target: one process_vm_readv
of 16 bytes a call; sampler counts the rows with --hist, in bulk), sampler int3, and bpftrace (two
user-memory reads in the uprobe). The in-process reads are measured in bursts of 20,000 calls, which
the probe's ring (65,536 records) holds: every call reads (rows / calls says so). A reading tracer's
bursts are counted from 2 s after it starts (its first hits are an int3's, learning the plan).

Results: bench/results/inprocess.csv and INPROCESS.md.

    .venv/bin/python bench/inprocess.py [--rounds 3] [--quick] [--only TEXT] [--results DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from harness import SAMPLER, RunningTarget, code_intact, write_results  # type: ignore[import-not-found]  # noqa: E402
from limit import REFERENCE, build_reference  # type: ignore[import-not-found]  # noqa: E402
from stall import entry_of  # type: ignore[import-not-found]  # noqa: E402

BURST = re.compile(r"^burst threads=(\d+) calls=(\d+) ns_per_call=([\d.]+) traced=(\S+)$")
PROGRAMS = {"C": ("burst", "touch", "rdi"), "Go": ("burst-go", "main.touch", "rax")}
SUMMARY = re.compile(r"(\d+) call\(s\), counted in the target; (\d+) row\(s\)(?:; (\d+) not recorded)?")


@dataclass(frozen=True)
class Tracer:
    name: str
    calls: int
    """Calls in one burst, in all (shared by the threads)."""
    reads: bool = False
    """It reads a->n and a->sum at each call."""
    latency: bool = False
    """It times each call, entry to return (two hits a call), into a histogram."""


TRACERS = (Tracer("sampler in-process", 1_000_000), Tracer("sampler in-process, short bursts", 60_000),
           Tracer("sampler int3", 2_000), Tracer("reference tracer (C, int3)", 20_000),
           Tracer("bpftrace uprobe", 100_000),
           Tracer("sampler in-process, 2 fields", 20_000, reads=True),
           Tracer("sampler int3, 2 fields", 2_000, reads=True),
           Tracer("bpftrace uprobe, 2 fields", 100_000, reads=True),
           Tracer("sampler int3, latency", 1_000, latency=True),
           Tracer("sampler in-process, latency", 20_000, latency=True),
           Tracer("bpftrace uprobe+uretprobe, latency", 100_000, latency=True))
FIELDS = {"C": ("a->n", "a->sum"), "Go": ("a.n", "a.sum")}
LEARN_S = 2.0
"""A reading tracer's bursts count from this long after it starts (its plan learnt by an int3 first)."""


def bpftrace_ready() -> str:
    """'' when bpftrace can put a uprobe here, else why not."""
    if shutil.which("bpftrace") is None:
        return "bpftrace is not installed (apt-get install bpftrace)"
    if not os.path.ismount("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], capture_output=True)
    return ""


def start_tracer(tracer: Tracer, target: RunningTarget, program: str, function: str, register: str,
                 folder: Path) -> subprocess.Popen[str]:
    pid = str(target.pid)
    binary = PROGRAMS[program][0]
    if tracer.name.startswith("sampler"):
        probe = "int3" if "int3" in tracer.name else "inprocess"
        reads = ["--expr", f"n={FIELDS[program][0]}", "--expr", f"sum={FIELDS[program][1]}", "--hist", "n"] \
            if tracer.reads else ["--latency", "--hist", "latency_us"] if tracer.latency \
            else ["--out", str(folder / "rows.csv")]
        return subprocess.Popen([*SAMPLER, "trace", "--pid", pid, "--at", function, "--probe", probe, *reads,
                                 "--quiet"], cwd=ROOT, text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    if tracer.name.startswith("reference"):
        return subprocess.Popen([str(REFERENCE), "everyhit", pid, f"{entry_of(target.pid, function):x}", register,
                                 "3600"], text=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    path = ROOT / "targets" / "bin" / binary
    arg = f'reg("{register[1:]}")'
    body = (f"@n = sum(*(uint64 *)({arg})); @sum = sum(*(uint64 *)({arg} + 8));" if tracer.reads else
            "@calls = count();")
    script = f"uprobe:{path}:{function} {{ {body} }}"
    if tracer.latency:  # (funclatency's one-liner, docs/usage.md)
        script = (f"uprobe:{path}:{function} {{ @s[tid] = nsecs; }} "
                  f"uretprobe:{path}:{function} /@s[tid]/ {{ @ns = hist(nsecs - @s[tid]); delete(@s[tid]); }}")
    return subprocess.Popen(["bpftrace", "-e", script], text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def bursts(target: RunningTarget, since: float, traced: str, count: int, timeout: float) -> list[float]:
    """ns a call of ``count`` bursts printed after ``since`` whose traced field is ``traced``."""
    deadline = time.monotonic() + timeout
    while True:
        found = [float(m.group(3)) for t, line in list(target.lines) if t > since
                 and (m := BURST.match(line)) and m.group(4) == traced]
        if len(found) >= count or time.monotonic() > deadline:
            return found[:count]
        time.sleep(0.05)


def stop_tracer(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
    return stderr or ""


def measure(program: str, threads: int, tracer: Tracer, rounds: int, per_window: int,
            folder: Path) -> dict[str, object]:
    binary, function, register = PROGRAMS[program]
    calls = max(1, tracer.calls // threads)
    target = RunningTarget(binary, str(threads), str(calls))
    untraced: list[float] = []
    traced: list[float] = []
    said = ""
    try:
        for _ in range(rounds):
            untraced += bursts(target, time.monotonic(), "0", per_window, 120)
            proc = start_tracer(tracer, target, program, function, register, folder)
            if tracer.reads:
                time.sleep(LEARN_S)
            got = bursts(target, time.monotonic(), "1", per_window, 240)
            stderr = stop_tracer(proc)
            if not got:
                said = (stderr.strip().splitlines() or ["no traced burst"])[-1][:200]
                break
            traced += got
            said = next((line for line in stderr.splitlines() if "in-process at" in line), said)
            time.sleep(0.3)
        intact = code_intact(target.pid) and target.proc.poll() is None
    finally:
        target.stop()
    base = statistics.median(untraced) if untraced else float("nan")
    with_tracer = statistics.median(traced) if traced else float("nan")
    summary = SUMMARY.search(said)
    recorded = (f"{int(summary.group(2)) / int(summary.group(1)):.1%}" if summary and int(summary.group(1)) else "")
    return {"program": program, "threads": threads, "tracer": tracer.name, "calls_per_burst": calls * threads,
            "untraced_ns": round(base, 3), "traced_ns": round(with_tracer, 3),
            "cost_ns": round(with_tracer - base, 1) if traced else "", "bursts": f"{len(untraced)}/{len(traced)}",
            "recorded": recorded, "intact": intact, "note": "" if traced else said}


def report(rows: list[dict[str, object]], rounds: int) -> str:
    lines = [f"# What a probe on every call costs the program ({rounds} alternating round(s); medians)", "",
             "| program | threads | tracer | calls a burst | untraced ns/call | traced ns/call | added a call | "
             "rows / calls | code intact after |",
             "|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        cost = row["cost_ns"]
        shown = "" if cost == "" else (f"{cost} ns" if float(cost) < 1000 else f"{float(cost) / 1000:.1f} us")
        lines.append(f"| {row['program']} | {row['threads']} | {row['tracer']} | {row['calls_per_burst']:,} | "
                     f"{row['untraced_ns']} | {row['traced_ns']} | {shown or row['note']} | {row['recorded']} | "
                     f"{'yes' if row['intact'] else 'NO'} |")
    lines += ["", "Each burst is clocked by the program (CLOCK_MONOTONIC around the loop); a burst counts as traced "
              "when the tracer's bytes were in touch()'s code at its start and its end. rows / calls: the share of "
              "calls the in-process probe recorded and sampler wrote as rows (the others were counted in the target "
              "and their records dropped, the ring full, or recorded after the run's end). 8 threads: the median "
              "thread's ns a call, on 2 cores (the int3 tracers serialise them). With 8 threads the reference "
              "tracer's every-hit mode traced no whole burst.",
              ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round, C, one thread")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--only", default="", help="the tracers whose name holds this text")
    options = parser.parse_args()
    build_reference()
    rounds = 1 if options.quick else options.rounds
    per_window = 2 if options.quick else 4
    why_no_bpftrace = bpftrace_ready()
    rows = []
    folder = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-inprocess-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    cases = [("C", 1)] if options.quick else [("C", 1), ("C", 8), ("Go", 1), ("Go", 8)]
    for program, threads in cases:
        for tracer in TRACERS:
            if options.only not in tracer.name:
                continue
            if tracer.name.startswith("bpftrace") and why_no_bpftrace:
                rows.append({"program": program, "threads": threads, "tracer": tracer.name, "calls_per_burst": 0,
                             "untraced_ns": "", "traced_ns": "", "cost_ns": "", "bursts": "", "recorded": "",
                             "intact": True, "note": why_no_bpftrace})
                continue
            if program == "Go" and tracer.name == "sampler in-process, latency":
                rows.append({"program": program, "threads": threads, "tracer": tracer.name, "calls_per_burst": 0,
                             "untraced_ns": "", "traced_ns": "", "cost_ns": "", "bursts": "", "recorded": "",
                             "intact": True, "note": "not run: Go's calls are timed by int3s (the row above)"})
                continue
            if program == "Go" and tracer.latency and tracer.name.startswith("bpftrace"):
                rows.append({"program": program, "threads": threads, "tracer": tracer.name, "calls_per_burst": 0,
                             "untraced_ns": "", "traced_ns": "", "cost_ns": "", "bursts": "", "recorded": "",
                             "intact": True, "note": "not run: a uretprobe rewrites return addresses, which Go's "
                             "stack copying and traceback read (known to crash Go programs)"})
                continue
            row = measure(program, threads, tracer, rounds, per_window, folder)
            print(row, file=sys.stderr, flush=True)
            rows.append(row)
    shutil.rmtree(folder, ignore_errors=True)
    write_results(options.results, "inprocess", rows, report(rows, rounds))
    print(report(rows, rounds))
    return 0 if all(row["intact"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
