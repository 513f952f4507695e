"""How close sampler's breakpoint sample comes to what the kernel allows.

The reference is the project's own minimal C tracer (bench/limit/reftracer.c, built into
build/): the same cycle as sampler's ptrace backend (int3 through /proc/PID/mem, wait for
the trap, registers, 16 bytes at the pointer argument, byte back, rewind, continue; and
for every hit: step over the instruction and re-arm). It and sampler take turns on one
running target (A B A B, ROUNDS rounds), at the same address, on the C and the Go
ring buffer:

- one-shot at 10 Hz and at 1 kHz: median and p95 pause of the hitting thread, from the
  tracer noticing the trap (waitpid returned) to PTRACE_CONT;
- every hit for a few seconds: hits per second and the median pause; bpftrace's uprobe
  count beside them when bpftrace runs here.

The wake-up latency (from the trap to waitpid returning) is in neither figure: the
kernel gives no timestamp of the stop. Both tracers wait the same way (sampler:
select() on a SIGCHLD wakeup pipe; the reference: a blocking waitpid).

Results: bench/results/limit.csv and LIMIT.md (ratios sampler / reference).

    .venv/bin/python bench/limit.py [--rounds 3] [--quick] [--results DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness import TARGETS, RunningTarget, Target, write_results  # type: ignore[import-not-found]  # noqa: E402

from sampler.debuginfo.debugfiles import DebugFinder  # noqa: E402
from sampler.debuginfo.locate import resolve  # noqa: E402
from sampler.debuginfo.modules import Modules  # noqa: E402

REFERENCE = ROOT / "build" / "reftracer"
STEPPED = "sampler, single-stepping"
"""sampler in every-hit mode with its emulation off (SAMPLER_EMULATE=0): each hit stepped."""
_RESULT = re.compile(r"samples=(\d+) median_pause_us=([\d.]+) p95_pause_us=([\d.]+) hits_per_s=([\d.]+)")


REGISTER = {"c": "rdi", "go": "rax"}
"""Where each target's hot function has its pointer argument at entry (for the reference)."""


@dataclass(frozen=True)
class Mode:
    name: str
    rate: int
    """Samples per second; 0: every hit."""
    count: int
    seconds: float


def build_reference() -> None:
    source = ROOT / "bench" / "limit" / "reftracer.c"
    if REFERENCE.exists() and REFERENCE.stat().st_mtime >= source.stat().st_mtime:
        return
    REFERENCE.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cc", "-O2", "-Wall", "-o", str(REFERENCE), str(source)], check=True)


def breakpoint_address(pid: int, at: str) -> int:
    """Where sampler puts its breakpoint for ``--at``: the reference uses the same address."""
    modules = Modules(pid, DebugFinder(pid, (), lambda _: None, lambda _: None))
    try:
        return resolve(modules, at).address
    finally:
        modules.close()


def run_reference(pid: int, address: int, target: Target, mode: Mode) -> dict[str, float]:
    argv = [str(REFERENCE), "everyhit" if mode.rate == 0 else "oneshot", str(pid), f"{address:x}",
            REGISTER[target.key]]
    argv += [f"{mode.seconds:g}"] if mode.rate == 0 else [str(mode.count), str(mode.rate)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    found = _RESULT.search(out.stdout)
    if out.returncode != 0 or found is None:
        raise SystemExit(f"the reference failed: {out.stdout}{out.stderr}")
    return {"samples": float(found[1]), "median_pause_us": float(found[2]), "p95_pause_us": float(found[3]),
            "hits_per_s": float(found[4])}


def run_sampler(pid: int, address: int, target: Target, mode: Mode, scratch: Path,
                emulate: bool = True) -> dict[str, float]:
    """sampler's rows; with ``emulate=False`` every hit is single-stepped (SAMPLER_EMULATE=0),
    as before the every-hit emulation."""
    out = scratch / "rows.csv"
    common = ["--pid", str(pid), "--backend", "ptrace", "--at", f"*{address:#x}", "--expr", f"delta={target.delta}",
              "--out", str(out), "--quiet"]
    if mode.rate == 0:
        argv = [sys.executable, "-m", "sampler", "trace", *common, "--probe", "int3", "--duration",
                f"{mode.seconds:g}s"]  # (the int3's every hit: bench/inprocess.py measures the in-process one)
    else:
        argv = [sys.executable, "-m", "sampler", "attach", *common, "--rate", str(mode.rate),
                "--count", str(mode.count)]
    # (single-stepping: no out-of-line copy and no stop either, issue 59's; with them every hit goes on in a copy)
    env = {**os.environ, "SAMPLER_EMULATE": "1" if emulate else "0", "SAMPLER_OUTOFLINE": "1" if emulate else "0"}
    result = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=ROOT, env=env)
    if result.returncode != 0:
        raise SystemExit(f"sampler failed: {result.stderr}")
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["error"]]
    if len(rows) < 4:
        raise SystemExit(f"sampler gave {len(rows)} rows without error")
    pauses = sorted(float(r["pause_us"]) for r in rows[2:])  # the first two hits make the read plan
    span = float(rows[-1]["elapsed_s"]) - float(rows[0]["elapsed_s"])
    return {"samples": float(len(rows)), "median_pause_us": statistics.median(pauses),
            "p95_pause_us": pauses[len(pauses) * 95 // 100],
            "hits_per_s": (len(rows) - 1) / span if mode.rate == 0 and span > 0 else 0.0}


def run_bpftrace(pid: int, target: Target, seconds: float) -> dict[str, float] | None:
    if shutil.which("bpftrace") is None:
        return None
    symbol = f'"{target.hot}"' if "(" in target.hot else target.hot
    program = (f"uprobe:{ROOT / 'targets' / 'bin' / target.binary}:{symbol} {{ @n = count(); }} "
               f"interval:ms:{int(seconds * 1000)} {{ exit(); }}")
    started = time.monotonic()
    out = subprocess.run(["bpftrace", "-p", str(pid), "-e", program], capture_output=True, text=True, timeout=60)
    took = time.monotonic() - started
    found = re.search(r"@n: (\d+)", out.stdout)
    if found is None:
        return None
    return {"samples": float(found[1]), "median_pause_us": 0.0, "p95_pause_us": 0.0,
            "hits_per_s": float(found[1]) / min(seconds, took)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one round of short runs (the tests' form)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    modes = [Mode("10 Hz", 10, 10 if args.quick else 100, 0), Mode("1 kHz", 1000, 300 if args.quick else 2000, 0),
             Mode("every hit", 0, 0, 0.5 if args.quick else 3.0)]
    build_reference()
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for target in (TARGETS["c"], TARGETS["go"]):
            running = RunningTarget(target.binary)
            proc = running.proc
            try:
                address = breakpoint_address(proc.pid, target.hot)
                for mode in modes:
                    for round_ in range(rounds):
                        measured = {"reference (C)": run_reference(proc.pid, address, target, mode),
                                    "sampler": run_sampler(proc.pid, address, target, mode, Path(tmp))}
                        if mode.rate == 0 and not args.quick:  # the tests: test_emulate.py
                            measured[STEPPED] = run_sampler(proc.pid, address, target, mode, Path(tmp), emulate=False)
                        if mode.rate == 0:
                            bpf = run_bpftrace(proc.pid, target, mode.seconds)
                            if bpf is not None:
                                measured["bpftrace (count only)"] = bpf
                        for tool, figures in measured.items():
                            rows.append({"target": target.label, "mode": mode.name, "tool": tool,
                                         "round": round_ + 1, **{k: round(v, 1) for k, v in figures.items()}})
                            print(f"{target.label:6} {mode.name:9} {tool:26} "
                                  f"median {figures['median_pause_us']:7.1f} us  "
                                  f"p95 {figures['p95_pause_us']:7.1f} us  hits/s {figures['hits_per_s']:9.0f}",
                                  flush=True)
                        if proc.poll() is not None:
                            raise SystemExit(f"{target.binary} died")
            finally:
                running.stop()
    report = summary(rows, rounds)
    write_results(args.results, "limit", rows, report)
    print(report)


def summary(rows: list[dict[str, object]], rounds: int) -> str:
    def median(target: str, mode: str, tool: str, key: str) -> float | None:
        values = [float(str(r[key])) for r in rows if (r["target"], r["mode"], r["tool"]) == (target, mode, tool)]
        return statistics.median(values) if values else None

    lines = [f"# sampler's breakpoint sample against a minimal C tracer (medians of {rounds} alternating rounds)",
             "", "| target | mode | reference: median / p95 pause | sampler: median / p95 pause | pause ratio "
             "| every hit: reference / sampler / sampler single-stepping / bpftrace hits/s | rate ratios |",
             "|---|---|---|---|---|---|---|"]
    for target in dict.fromkeys(str(r["target"]) for r in rows):
        for mode in dict.fromkeys(str(r["mode"]) for r in rows):
            ref_p, ref_95 = median(target, mode, "reference (C)", "median_pause_us"), \
                median(target, mode, "reference (C)", "p95_pause_us")
            mine_p = median(target, mode, "sampler", "median_pause_us")
            mine_95 = median(target, mode, "sampler", "p95_pause_us")
            if ref_p is None or mine_p is None or ref_95 is None or mine_95 is None:
                continue
            rates = ratio = "-"
            if mode == "every hit":
                ref_r = median(target, mode, "reference (C)", "hits_per_s") or 0.0
                mine_r = median(target, mode, "sampler", "hits_per_s") or 0.0
                bpf_r = median(target, mode, "bpftrace (count only)", "hits_per_s")
                stepped_r = median(target, mode, STEPPED, "hits_per_s") or 0.0
                rates = f"{ref_r:,.0f} / {mine_r:,.0f} / {stepped_r:,.0f} / " + (f"{bpf_r:,.0f}" if bpf_r else "-")
                ratio = f"{mine_r / ref_r:.2f}x of the reference" + (f", 1/{bpf_r / mine_r:.0f} of bpftrace"
                                                                      if bpf_r and mine_r else "")
            lines.append(f"| {target} | {mode} | {ref_p:.0f} / {ref_95:.0f} us | {mine_p:.0f} / {mine_95:.0f} us | "
                         f"{mine_p / ref_p:.2f}x | {rates} | {ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
