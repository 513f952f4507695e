"""The stall the target sees: what a breakpoint sample costs the program, clocked inside it.

sampler's `pause_us` runs from waitpid's return to the PTRACE_CONT request: the tracer's
clock. The program loses more: from the trap to the moment it runs again (the kernel's
stop, the tracer's wake-up, the resume and the scheduler). targets/stall/stall.c (and its
Go twin, targets/stall-go) reads the monotonic clock before and after every call of probe()
and keeps the calls that took over 5 us, by index; each tracer reads ring.w (the call's
index) at the breakpoint, so every sample is matched to the stall it caused, exactly.

Three tracers take turns on one running target (A B C A B C, ROUNDS rounds), one-shot at
10 Hz and at 1 kHz, the target's second core idle and busy (a spinning thread):

- the project's minimal C tracer (bench/limit/reftracer.c, built into build/);
- a minimal Python loop doing the same with ctypes (bench/limit/pyloop.py);
- sampler, `attach --backend ptrace --at *ADDR --expr n=b->w` (the same address: the
  function's first instruction; `n=b.w` in Go).

Results: bench/results/stall.csv and STALL.md (median and p95 stall per tracer, the
ratios to the reference, and sampler's own pause_us beside its stall).

    .venv/bin/python bench/stall.py [--rounds 3] [--quick] [--results DIR]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from harness import RunningTarget, write_results  # type: ignore[import-not-found]  # noqa: E402
from limit import REFERENCE, build_reference  # type: ignore[import-not-found]  # noqa: E402

from sampler.debuginfo.debugfiles import DebugFinder  # noqa: E402
from sampler.debuginfo.modules import Modules  # noqa: E402

PYLOOP = ROOT / "bench" / "limit" / "pyloop.py"
TRACERS = ("reference", "python", "sampler")


@dataclass(frozen=True)
class Program:
    label: str
    binary: str
    function: str
    register: str
    """Where the function's pointer argument is at its entry."""
    index: str
    """sampler's expression for the call's index there."""


PROGRAMS = (Program("C", "stall", "probe", "rdi", "n=b->w"), Program("Go", "stall-go", "main.probe", "rax", "n=b.w"))


@dataclass(frozen=True)
class Mode:
    rate: int
    count: int


def entry_of(pid: int, name: str) -> int:
    """The run-time address of a function's first instruction (before probe() adds to ring.w,
    so that the word read there is the call's index)."""
    modules = Modules(pid, DebugFinder(pid, (), lambda _: None, lambda _: None))
    try:
        address = modules.main.function_symbol(name)
        assert address is not None, name
        return address + modules.main.bias
    finally:
        modules.close()


def stalls(target: RunningTarget, since: int) -> dict[int, float]:
    """The long calls the target kept since the last ask, by index -> microseconds."""
    os.kill(target.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [line for _, line in target.lines[since:]]
        if "end long" in lines:
            found = {}
            for line in lines[:lines.index("end long")]:
                if line.startswith("long "):
                    fields = dict(part.split("=") for part in line.split()[1:])
                    found[int(fields["index"])] = int(fields["ns"]) / 1000
            return found
        time.sleep(0.01)
    raise SystemExit("bench: the stall target did not list its long calls")


def run(tracer: str, program: Program, pid: int, address: int, mode: Mode, scratch: Path
        ) -> tuple[list[int], list[float]]:
    """One run: the index read at each sample, and the pause the tracer reported (sampler's rows)."""
    if tracer == "reference":
        out = subprocess.run([str(REFERENCE), "oneshot", str(pid), f"{address:x}", program.register,
                              str(mode.count), str(mode.rate)], capture_output=True, text=True, timeout=300,
                             env={**os.environ, "REFTRACER_VALUES": "1"})
        lines = out.stdout.splitlines()
    elif tracer == "python":
        out = subprocess.run([sys.executable, str(PYLOOP), str(pid), f"{address:x}", program.register,
                              str(mode.count), str(mode.rate)], capture_output=True, text=True, timeout=300)
        lines = out.stdout.splitlines()
    else:
        rows = scratch / "rows.csv"
        guard = {"sampler-guarded": "1", "sampler-direct": "0"}.get(tracer)  # --guard-ab: forced either way
        out = subprocess.run([sys.executable, "-m", "sampler", "attach", "--pid", str(pid), "--backend", "ptrace",
                              "--at", f"*{address:#x}", "--expr", program.index, "--rate", str(mode.rate),
                              "--count", str(mode.count), "--out", str(rows), "--quiet"],
                             capture_output=True, text=True, timeout=300, cwd=ROOT,
                             env={**os.environ, **({"SAMPLER_GUARD": guard} if guard else {})})
        if out.returncode == 0:
            with open(rows, newline="") as f:
                got = [r for r in csv.DictReader(f) if not r["error"]]
            return [int(r["n"]) for r in got], [float(r["pause_us"]) for r in got]
        lines = []
    if out.returncode != 0:
        raise SystemExit(f"bench: {tracer} failed: {out.stdout[-500:]}{out.stderr[-500:]}")
    return [int(line.removeprefix("value=")) for line in lines if line.startswith("value=")], []


BUDGET = "1%"
_REACHED = re.compile(r"stopped the target about ([\d.]+)% of the time")


def budget_run(command: str, program: Program, target: RunningTarget, address: int, seconds: float,
               scratch: Path) -> dict[str, object]:
    """sampler under --max-overhead 1 % (attach at 1 kHz, or trace): the share of the run the
    target clocked as stalls of its samples, beside sampler's own estimate."""
    stalls(target, len(target.lines))  # forget what came before
    since = len(target.lines)
    rows = scratch / "budget.csv"
    pace = ["--rate", "1000"] if command == "attach" else []
    out = subprocess.run([sys.executable, "-m", "sampler", command, "--pid", str(target.pid), "--backend", "ptrace",
                          "--at", f"*{address:#x}", "--expr", program.index, *pace, "--duration", f"{seconds:g}s",
                          "--max-overhead", BUDGET, "--out", str(rows), "--quiet"],
                         capture_output=True, text=True, timeout=300, cwd=ROOT)
    if out.returncode != 0:
        raise SystemExit(f"bench: sampler --max-overhead failed: {out.stderr[-500:]}")
    with open(rows, newline="") as f:
        got = [r for r in csv.DictReader(f) if not r["error"]]
    long_calls = stalls(target, since)
    matched = [long_calls[int(r["n"])] for r in got if int(r["n"]) in long_calls]
    span = float(got[-1]["elapsed_s"]) if got else seconds
    reached = _REACHED.search(out.stderr)
    return {"samples": len(got), "matched": len(matched), "rate_per_s": round(len(got) / span, 1),
            "estimated_pct": float(reached.group(1)) if reached else "",
            "clocked_pct": round(sum(matched) / 1e6 / span * 100, 3),
            "mean_stall_us": round(statistics.mean(matched), 1) if matched else ""}


def budget_report(rows: list[dict[str, object]]) -> str:
    lines = [f"# --max-overhead {BUDGET}: the share of the time the target clocked as stalls of its samples", "",
             "| program | load | command | round | samples/s | matched | mean stall | sampler's estimate | "
             "the target's clock |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['program']} | {r['load']} | {r['command']} | {r['round']} | {r['rate_per_s']} | "
                     f"{r['matched']}/{r['samples']} | {r['mean_stall_us']} us | {r['estimated_pct']} % | "
                     f"{r['clocked_pct']} % |")
    lines += ["", "attach: --rate 1000 (1 kHz asked); trace: every hit. The target's clock: the sum of the "
              "stalls matched to the samples (the call's index) over the run's span. Not counted: the time "
              "sampler's worker takes a core the target would have used (its preemptions are not matched "
              "to a sample).", ""]
    return "\n".join(lines)


def cell(got: dict[str, list[float]], tracer: str) -> str:
    values = got.get(tracer, [])
    return f"{statistics.median(values):.0f} / {percentile(values, 0.95):.0f} us" if values else "-"


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="one round of short runs, idle core only (the tests' form)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--guard-ab", action="store_true",
                        help="sampler twice a round: every read through the guard thread (SAMPLER_GUARD=1) and "
                             "direct (=0), side by side")
    args = parser.parse_args()
    tracers = ("reference", "python", "sampler-guarded", "sampler-direct") if args.guard_ab else TRACERS
    rounds = 1 if args.quick else args.rounds
    modes = [Mode(10, 10 if args.quick else 60), Mode(1000, 100 if args.quick else 1000)]
    loads = ("idle",) if args.quick else ("idle", "busy")
    build_reference()
    rows: list[dict[str, object]] = []
    budget_rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        for program, load in [(program, load) for program in PROGRAMS for load in loads]:
            target = RunningTarget(program.binary, *(["busy"] if load == "busy" else []))
            try:
                address = entry_of(target.pid, program.function)
                for round_ in range(rounds):
                    for mode in modes:
                        for tracer in tracers:
                            stalls(target, len(target.lines))  # forget what came before
                            since = len(target.lines)
                            indexes, pauses = run(tracer, program, target.pid, address, mode, Path(scratch))
                            long_calls = stalls(target, since)
                            matched = [long_calls[i] for i in indexes if i in long_calls]
                            rows.append({"program": program.label, "load": load, "rate": mode.rate,
                                         "round": round_ + 1, "tracer": tracer,
                                         "samples": len(indexes), "matched": len(matched),
                                         "median_stall_us": round(statistics.median(matched), 1) if matched else "",
                                         "p95_stall_us": round(percentile(matched, 0.95), 1) if matched else "",
                                         "median_pause_us": round(statistics.median(pauses), 1) if pauses else "",
                                         "stalls_us": " ".join(f"{s:.1f}" for s in matched)})
                            print(f"stall: {program.label} {load} {mode.rate} Hz round {round_ + 1} {tracer}: "
                                  f"{len(matched)}/{len(indexes)} matched, median "
                                  f"{rows[-1]['median_stall_us']} us", file=sys.stderr)
                    for command in () if args.quick else ("attach", "trace"):  # the tests: test_budget.py
                        got = budget_run(command, program, target, address, 5, Path(scratch))
                        budget_rows.append({"program": program.label, "load": load, "command": command,
                                            "round": round_ + 1, **got})
                        print(f"stall: {program.label} {load} --max-overhead {BUDGET} {command}: "
                              f"{got['clocked_pct']} % clocked, {got['estimated_pct']} % estimated", file=sys.stderr)
            finally:
                target.stop()
    write_results(args.results, "stall", rows, report(rows, rounds))
    print((args.results / "STALL.md").read_text())
    if budget_rows:
        write_results(args.results, "budget", budget_rows, budget_report(budget_rows))
        print((args.results / "BUDGET.md").read_text())


KINDS = {"sampler": "", "sampler-guarded": " (guard thread)", "sampler-direct": " (direct reads)"}
"""sampler's runs and how the table names them (--guard-ab: both ways of reading, side by side)."""


def report(rows: list[dict[str, object]], rounds: int) -> str:
    loads = [load for load in ("idle", "busy") if any(row["load"] == load for row in rows)]
    lines = [f"# The stall the target sees, clocked inside it (all samples of {rounds} alternating round(s))",
             "",
             "| program | load | rate | reference: median / p95 stall | python loop | sampler | sampler / reference "
             "(median) | sampler's pause_us, median | matched |",
             "|---|---|---|---|---|---|---|---|---|"]
    kinds = [kind for kind in KINDS if any(row["tracer"] == kind for row in rows)]
    for program, load, rate, kind in [(p.label, load, rate, kind) for p in PROGRAMS for load in loads
                                      for rate in sorted({int(str(r["rate"])) for r in rows}) for kind in kinds]:
        got: dict[str, list[float]] = {}
        pauses: list[float] = []
        matched = samples = 0
        for row in rows:
            if row["program"] != program or row["load"] != load or row["rate"] != rate:
                continue
            got.setdefault(str(row["tracer"]), []).extend(float(s) for s in str(row["stalls_us"]).split())
            if row["tracer"] == kind:
                matched += int(str(row["matched"]))
                samples += int(str(row["samples"]))
                if row["median_pause_us"] != "":
                    pauses.append(float(str(row["median_pause_us"])))
        ratio = statistics.median(got[kind]) / statistics.median(got["reference"]) \
            if got.get(kind) and got.get("reference") else float("nan")
        pause = f"{statistics.median(pauses):.0f} us" if pauses else "-"
        lines.append(f"| {program} | {load} | {rate} Hz | {cell(got, 'reference')} | {cell(got, 'python')} | "
                     f"{cell(got, kind)}{KINDS[kind]} | {ratio:.2f}x | {pause} | {matched}/{samples} |")
    lines += ["", "stall: how long the call that hit the breakpoint took, from the program's own clock "
              "(CLOCK_MONOTONIC around the call), matched to the sample by the call's index. busy: a thread "
              "of the target spins on the other core.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
