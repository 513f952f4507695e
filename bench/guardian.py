"""How fast the guardian puts the breakpoint byte back after the tracing worker is SIGKILLed.

For each trial: the C target, `sampler attach --backend ptrace --at never` (an int3 armed all
the time), the worker SIGKILLed at a random moment; the guardian writes the CLOCK_MONOTONIC
time it restored the byte (SAMPLER_GUARDIAN_LOG), and the latency is that minus the moment
just before the kill. Trials alternate the guardian's raised priority on and off
(SAMPLER_GUARDIAN_PRIORITY=0), on a quiet machine and with a busy process on every core.
After each trial the target must still run with its code equal to the file.

    .venv/bin/python bench/guardian.py [--trials 20]   # results in bench/results/GUARDIAN.md
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from harness import (  # type: ignore[import-not-found]
    COMMIT,
    ROOT,
    SAMPLER,
    RunningTarget,
    code_intact,
    cpu_hog,
    kill_tree,
    worker_of,
)


def trial(target: RunningTarget, priority: bool, tmp: Path) -> tuple[float | None, float | None, bool]:
    """(µs from the kill to the restored byte, µs of it before the guardian saw EOF, the target unharmed)."""
    folder = Path(tempfile.mkdtemp(dir=tmp))
    log = folder / "guardian.log"
    journal = folder / "journal"
    env = {**os.environ, "SAMPLER_GUARDIAN_LOG": str(log), "SAMPLER_JOURNAL_DIR": str(journal),
           "SAMPLER_GUARDIAN_PRIORITY": "1" if priority else "0"}
    proc = subprocess.Popen([*SAMPLER, "attach", "--backend", "ptrace", "--pid", str(target.pid), "--at", "never",
                             "--expr", "b->w", "--hit-timeout", "30s", "--out", str(folder / "s.csv"), "--quiet"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (journal.exists() and any(journal.glob("*.json"))):
        if time.monotonic() > deadline or proc.poll() is not None:
            kill_tree(proc.pid)
            return None, None, False
        time.sleep(0.01)
    time.sleep(random.uniform(0.05, 0.3))
    worker = worker_of(proc.pid)
    assert worker is not None
    killed = time.monotonic()
    os.kill(worker, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 10
    while "rescued" not in (log.read_text() if log.exists() else ""):
        if time.monotonic() > deadline:
            return None, None, False
        time.sleep(0.01)
    said = log.read_text()
    rescued = float(said.split("rescued ")[1].split()[0])
    eof = float(said.split("eof ")[1].split()[0])
    time.sleep(1.5)
    ok = target.healthy(time.monotonic() - 1.2) and code_intact(target.pid)
    return (rescued - killed) * 1e6, (eof - killed) * 1e6, ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20, help="per cell (priority on/off x quiet/loaded)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    results: dict[tuple[str, bool], list[float]] = {}
    to_eof: dict[tuple[str, bool], list[float]] = {}
    harmed: dict[tuple[str, bool], int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        target = RunningTarget("ringbuf-c")
        try:
            for load in ("quiet", "loaded"):
                for i in range(args.trials * 2):
                    priority = i % 2 == 0  # A/B alternation
                    if load == "loaded":
                        with cpu_hog():
                            latency, eof, ok = trial(target, priority, Path(tmp))
                    else:
                        latency, eof, ok = trial(target, priority, Path(tmp))
                    key = (load, priority)
                    harmed[key] = harmed.get(key, 0) + (not ok)
                    if latency is not None and eof is not None:
                        results.setdefault(key, []).append(latency)
                        to_eof.setdefault(key, []).append(eof)
                    print(f"guardian: {load} priority={'on' if priority else 'off'} "
                          f"latency={latency if latency is None else round(latency)}us ok={ok}", flush=True)
                    if not ok:  # a harmed target is replaced
                        target.stop()
                        target = RunningTarget("ringbuf-c")
        finally:
            target.stop()
    lines = ["# The guardian's latency: from SIGKILL of the tracing worker to the restored byte", "",
             f"`bench/guardian.py --trials {args.trials}`, commit {COMMIT}, {os.cpu_count()} CPUs. C target, int3 "
             "armed at `never`, the worker SIGKILLed at a random moment; *loaded*: a busy process on every core. "
             "Priority on: the guardian asks for SCHED_FIFO (else nice -20); off: normal priority.", "",
             "*Until EOF*: from the kill until the guardian's pipe read EOF (the kernel tears the worker down "
             "first); the rest is the guardian's wake-up and its one pwrite.", "",
             "| machine | guardian priority | trials | median (µs) | p90 (µs) | max (µs) | median until EOF (µs) "
             "| target harmed |",
             "|---|---|---|---|---|---|---|---|"]
    for (load, priority), values in sorted(results.items(), key=lambda kv: (kv[0][0] != "quiet", not kv[0][1])):
        values.sort()
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        lines.append(f"| {load} | {'on' if priority else 'off'} | {len(values)} | {statistics.median(values):.0f} "
                     f"| {p90:.0f} | {values[-1]:.0f} | {statistics.median(to_eof[(load, priority)]):.0f} "
                     f"| {harmed.get((load, priority), 0)} |")
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "GUARDIAN.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
