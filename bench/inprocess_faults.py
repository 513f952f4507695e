"""SIGKILL mid-trace of a hot function: sampler's worker, its guardian, or both, with an in-process
probe (issue 36), and the worker with an int3 for contrast. Does the target live, and is its code
its file's again?

Each trial: `sampler trace --probe inprocess` (or int3) at the hot function of ringbuf-c or ringbuf-go
(called millions of times a second), the kill at a random moment 0.05-1.2 s after the first row, then:
a killed worker's guardian takes the jump out (with every thread held); a killed guardian leaves the
worker to end the run as usual (SIGINT, exit 0); both killed leave the jump, which keeps the target
running through the trampoline, until `sampler repair --pid` takes it out. Checked: the target runs
(untraced, a throughput line since, no trap), its code equal to its file byte for byte within 10 s.

    .venv/bin/python bench/inprocess_faults.py [--trials 20] [--quick] [--results DIR]

Writes bench/results/inprocess-faults.csv and INPROCESS-FAULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import (  # type: ignore[import-not-found]
    COMMIT,
    ROOT,
    SAMPLER,
    TARGETS,
    RunningTarget,
    code_intact,
    csv_whole,
    kill_tree,
    worker_of,
    write_results,
)

KINDS = ("worker", "guardian", "both")
SETTLE_S = 10.0
"""How long the target has to be well again (the guardian tries to hold every thread for 10 s)."""


def guardian_of(worker: int) -> int | None:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            name, rest = stat.split(" (", 1)[1].rsplit(") ", 1)
            if name == "sampler-guard" and int(rest.split()[1]) == worker:
                return int(entry)
    return None


def trial(running: RunningTarget, hot: str, probe: str, kind: str, folder: Path) -> dict[str, object]:
    out = folder / f"{probe}-{kind}-{time.monotonic_ns()}.csv"
    row: dict[str, object] = {"probe": probe, "killed": kind, "exit": "", "repair": "", "survived": False,
                              "code_intact": False, "note": ""}
    sampler = subprocess.Popen([*SAMPLER, "trace", "--pid", str(running.pid), "--at", hot, "--probe", probe,
                                "--out", str(out), "--quiet"], cwd=ROOT, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while csv_whole(out)[1] < 1:
            if sampler.poll() is not None or time.monotonic() > deadline:
                row["note"] = "no row came"
                return row
            time.sleep(0.02)
        time.sleep(random.uniform(0.05, 1.2))
        worker = worker_of(sampler.pid)
        guardian = guardian_of(worker) if worker else None
        if worker is None or guardian is None:
            row["note"] = "no worker or guardian found"
            return row
        if kind in ("guardian", "both"):
            os.kill(guardian, signal.SIGKILL)
        if kind in ("worker", "both"):
            os.kill(worker, signal.SIGKILL)
        else:
            time.sleep(0.3)
            sampler.send_signal(signal.SIGINT)
        try:
            _, stderr = sampler.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            kill_tree(sampler.pid)
            _, stderr = sampler.communicate()
            row["note"] = "sampler hung: killed"
        row["exit"] = sampler.returncode
        ended = time.monotonic()
        if kind == "both":
            time.sleep(0.2)  # (the dead worker's threads let go by the kernel)
            repair = subprocess.run([*SAMPLER, "repair", "--pid", str(running.pid)], cwd=ROOT,
                                    capture_output=True, text=True, timeout=60)
            row["repair"] = (repair.stderr.strip().splitlines() or [f"exit {repair.returncode}"])[-1][:160]
        while time.monotonic() < ended + SETTLE_S and not (running.healthy(ended) and code_intact(running.pid)):
            time.sleep(0.05)
        row["survived"] = running.healthy(ended)
        row["code_intact"] = code_intact(running.pid)
        if running.proc.poll() is not None:
            row["note"] = f"the target ended: {running.proc.poll()}"
        elif not row["survived"] or not row["code_intact"]:
            row["note"] = (stderr or "").strip().replace("\n", " | ")[-200:]
        return row
    finally:
        if sampler.poll() is None:
            kill_tree(sampler.pid)
            sampler.wait()


def report(rows: list[dict[str, object]], seconds: float, trials: int) -> str:
    lines = [
        "# SIGKILL mid-trace of a hot function: in-process probe and int3",
        "",
        f"`.venv/bin/python bench/inprocess_faults.py --trials {trials}` on {datetime.date.today()}, commit "
        f"{COMMIT}, {os.cpu_count()} cores, {seconds / 60:.1f} minutes. Each trial: `sampler trace --at HOT "
        "--probe P`, SIGKILL at a random moment; survived = running, untraced, a throughput line and no trap "
        f"after; code = its file's again within {SETTLE_S:.0f} s (both killed: after `sampler repair --pid`).",
        "",
        "| target | probe | killed | trials | survived | code its file's | exit as expected |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str, str], list[dict[str, object]]] = {}
    for row in rows:
        groups.setdefault((str(row["target"]), str(row["probe"]), str(row["killed"])), []).append(row)
    for (target, probe, killed), group in groups.items():
        expected = 0 if killed == "guardian" else 137
        lines.append(f"| {target} | {probe} | {killed} | {len(group)} | "
                     f"{sum(bool(r['survived']) for r in group)} | {sum(bool(r['code_intact']) for r in group)} | "
                     f"{sum(r['exit'] == expected for r in group)} |")
    notes = [f"- {r['target']} {r['probe']} {r['killed']} #{r['trial']}: {r['note']}" for r in rows if r["note"]]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="one trial of each kind, C only")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    options = parser.parse_args()
    trials = 1 if options.quick else options.trials
    started = time.monotonic()
    rows: list[dict[str, object]] = []
    plan = [(kind, "inprocess", trials) for kind in KINDS] + [("worker", "int3", max(1, trials // 2))]
    with tempfile.TemporaryDirectory() as tmp:
        for key in ("c",) if options.quick else ("c", "go"):
            target = TARGETS[key]
            running = RunningTarget(target.binary)
            try:
                for kind, probe, count in plan:
                    for index in range(count):
                        row = {"target": target.label, "trial": index, **trial(running, target.hot, probe, kind,
                                                                               Path(tmp)), "commit": COMMIT}
                        rows.append(row)
                        print(row, flush=True)
                        if not (row["survived"] and row["code_intact"]):
                            running.stop()
                            running = RunningTarget(target.binary)
            finally:
                running.stop()
    text = report(rows, time.monotonic() - started, trials)
    write_results(options.results, "inprocess-faults", rows, text)
    print(text)
    harmed = [r for r in rows if r["probe"] == "inprocess" and not (r["survived"] and r["code_intact"])]
    return 1 if harmed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
