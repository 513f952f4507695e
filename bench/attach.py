"""Time to the first row, and peak memory, of a first sample: sampler (ptrace backend)
beside `dlv attach` doing the same first sample, and beside sampler's delve backend.

For each binary (the C ring, the Go ring, a 9.6 MB Go HTTP server, a generated 30 MB Go
program with 40,000 functions), one target runs; the tools then take turns (A/B/C, RUNS
rounds) attaching to it, breaking at a function, reading one expression and leaving:

- sampler: ``sampler attach --backend ptrace --at F --expr E --count 1``;
- delve backend: the same with ``--backend delve``;
- dlv: ``dlv attach PID --init SCRIPT`` whose script breaks at F, continues, prints E and
  exits (dlv detaches and leaves the target running, as it is asked to).

Time to first row: from starting the command to the line with the value on its stdout.
Peak RSS: the largest resident set of the command's process tree (wait4's ru_maxrss:
sampler's two processes; for the delve backend, dlv's). Results: bench/results/attach.csv
and bench/results/ATTACH.md.

    .venv/bin/python bench/attach.py [--runs 5] [--quick] [--results DIR]

``--quick`` (the test suite's short form): one run, without the generated program.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from elftools.elf.elffile import ELFFile
from harness import RunningTarget, write_results  # type: ignore[import-not-found]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
BIG = ROOT / "build" / "big-go"
MARK = "918273645"
"""A constant dlv prints after the value: the line that says the sample is done."""


@dataclass(frozen=True)
class Case:
    name: str
    binary: Path
    at: str
    expr: str
    go: bool


CASES = [
    Case("ringbuf-c (C)", ROOT / "targets" / "bin" / "ringbuf-c", "ring_read", "b->w - b->r", False),
    Case("ringbuf-go", ROOT / "targets" / "bin" / "ringbuf-go", "main.(*Ring).Read", "b.w - b.r", True),
    Case("httpd-go", ROOT / "targets" / "bin" / "httpd-go", "main.serve", "r.URL.Path", True),
    Case("big-go (generated)", BIG, "main.(*Ring).Read", "b.w - b.r", True),
]


def build_big() -> None:
    if BIG.exists():
        return
    source = ROOT / "build" / "bigo"
    subprocess.run([sys.executable, str(ROOT / "bench" / "bigo" / "generate.py"), str(source),
                    "--packages", "100", "--functions", "400"], check=True)
    print("building the generated Go program (about half a minute)...", flush=True)
    subprocess.run(["go", "build", "-buildvcs=false", "-trimpath", "-o", str(BIG), "."], cwd=source, check=True)


def debug_info_mb(binary: Path) -> float:
    with open(binary, "rb") as f:
        section = ELFFile(f).get_dwarf_info().debug_info_sec
        return (section.size if section is not None else 0) / 1e6


def timed(argv: list[str], done: str) -> tuple[float, float, bool]:
    """(seconds to the first line containing ``done``, peak RSS in MB, ended well)."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            text=True)
    assert proc.stdout is not None
    first = None
    for line in proc.stdout:
        if first is None and done in line:
            first = time.perf_counter() - started
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    ok = first is not None and proc.returncode in (0, 2)  # dlv: 2 when its "kill the process?" reads EOF (it detaches)
    return (first or float("nan")), usage.ru_maxrss / 1024, ok


def tools(case: Case, pid: int, script: Path) -> dict[str, list[str]]:
    sampler = [sys.executable, "-m", "sampler", "attach", "--pid", str(pid), "--at", case.at,
               "--expr", f"v={case.expr}", "--count", "1", "--quiet"]
    found = {"sampler (ptrace)": [*sampler, "--backend", "ptrace"]}
    if case.go and shutil.which("dlv"):
        found["sampler (delve)"] = [*sampler, "--backend", "delve"]
        script.write_text(f"break {case.at}\ncontinue\nprint {case.expr}\nprint {MARK}\nclearall\nexit\n")
        found["dlv attach"] = ["dlv", "attach", str(pid), "--init", str(script),
                               "--allow-non-terminal-interactive=true"]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one run, without the generated 30 MB program")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    cases = [c for c in CASES if c.binary != BIG] if args.quick else CASES
    runs = 1 if args.quick else args.runs
    if not args.quick:
        build_big()
    results: Path = args.results
    rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "dlv-init"
        for case in cases:
            size = case.binary.stat().st_size / 1e6
            info = debug_info_mb(case.binary)
            target = RunningTarget(case.binary)
            try:
                commands = tools(case, target.pid, script)
                for run in range(runs):
                    for tool, argv in commands.items():
                        done = MARK if tool == "dlv attach" else f",{target.pid},"
                        seconds, rss, ok = timed(argv, done)
                        if target.proc.poll() is not None:
                            raise SystemExit(f"{tool} ended {case.name}: the bench stops")
                        rows.append({"binary": case.name, "size_mb": round(size, 2), "debug_info_mb": round(info, 2),
                                     "tool": tool, "run": run + 1, "first_row_s": round(seconds, 3),
                                     "peak_rss_mb": round(rss, 1), "ok": ok})
                        print(f"{case.name:20} {tool:17} run {run + 1}: {seconds:.2f} s, {rss:.0f} MB"
                              f"{'' if ok else ' (FAILED)'}", flush=True)
            finally:
                target.stop()
    report = summary(rows, runs)
    write_results(results, "attach", rows, report)
    print(report)


def summary(rows: list[dict[str, object]], runs: int) -> str:
    lines = [f"# Time to the first row and peak RSS (median of {runs} alternating runs)", "",
             "| binary | size | .debug_info | sampler (ptrace) | dlv attach | sampler (delve) | ptrace / dlv |",
             "|---|---|---|---|---|---|---|"]
    for case in dict.fromkeys(str(r["binary"]) for r in rows):
        mine = [r for r in rows if r["binary"] == case]

        def median(tool: str, key: str, of: list[dict[str, object]] = mine) -> float | None:
            values = [float(str(r[key])) for r in of if r["tool"] == tool and r["ok"]]
            return statistics.median(values) if values else None

        def cell(tool: str) -> str:
            t, m = median(tool, "first_row_s"), median(tool, "peak_rss_mb")
            return "-" if t is None or m is None else f"{t:.2f} s, {m:.0f} MB"

        mine_t, dlv_t = median("sampler (ptrace)", "first_row_s"), median("dlv attach", "first_row_s")
        mine_m, dlv_m = median("sampler (ptrace)", "peak_rss_mb"), median("dlv attach", "peak_rss_mb")
        ratio = "-" if not (mine_t and dlv_t and mine_m and dlv_m) else \
            f"{mine_t / dlv_t:.2f}x time, {mine_m / dlv_m:.2f}x RSS"
        first = mine[0]
        lines.append(f"| {case} | {first['size_mb']} MB | {first['debug_info_mb']} MB | {cell('sampler (ptrace)')} "
                     f"| {cell('dlv attach')} | {cell('sampler (delve)')} | {ratio} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
