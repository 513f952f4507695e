"""What reading a Python program's stacks costs it, clocked by the program: `sampler profile` (its
running thread held while its Python frames are read, and --nonblocking) beside `py-spy record`
(blocking, its default, and --nonblocking) and nothing, at 99 Hz; and the whole command of
`sampler stack` beside `py-spy dump` on a program of five threads.

targets/python/spinner.py runs one thread that computes in units of a few microseconds and
prints its count every half second. The tools take turns on one running target (none, then each:
ROUNDS rounds), so that the host's load of the moment falls on all alike; each tool's figure is
the units it let through per second over the "none" window of its own round, the median of the
rounds.

    .venv/bin/python bench/python.py [--python /usr/bin/python3.11] [--rounds 5] [--window 4] [--results DIR]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from harness import COMMIT, write_results  # type: ignore[import-not-found]  # noqa: E402

SAMPLER = str(ROOT / ".venv" / "bin" / "sampler")
PY_SPY = str(ROOT / ".venv" / "bin" / "py-spy")
LINE = re.compile(r"^t=([\d.]+) units=(\d+)$")
HELD = re.compile(r"a sampled thread was held (\d+) us")


class Spinner:
    def __init__(self, python: str, script: str) -> None:
        self.proc = subprocess.Popen([python, str(ROOT / "targets" / "python" / script)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready.startswith("ready pid="):
            raise SystemExit(f"bench: {script} did not start: {ready!r}")
        self.pid = self.proc.pid
        self.lines: list[tuple[float, int]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            match = LINE.match(line.strip())
            if match:
                self.lines.append((float(match.group(1)), int(match.group(2))))

    def rate(self, start: float, end: float) -> float:
        """Units per second between the target's first line after ``start`` and its last before ``end``."""
        inside = [(t, n) for t, n in list(self.lines) if start <= t <= end]
        if len(inside) < 2:
            return float("nan")
        (t0, n0), (t1, n1) = inside[0], inside[-1]
        return (n1 - n0) / (t1 - t0)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def window(spinner: Spinner, command: list[str] | None, seconds: float) -> tuple[float, str]:
    """The target's rate while ``command`` runs (None: nothing), and what the command said last."""
    start = time.monotonic()
    said = ""
    if command is None:
        time.sleep(seconds)
    else:
        done = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60)
        said = (done.stderr.strip().splitlines() or [""])[-1]
    end = time.monotonic()
    return spinner.rate(start + 0.5, end - 0.2), said


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--python", default="/usr/bin/python3.11")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=float, default=4.0)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    spinner = Spinner(args.python, "spinner.py")
    seconds = f"{args.window:g}s"
    tools: dict[str, list[str] | None] = {}
    with tempfile.TemporaryDirectory() as tmp:
        out = f"{tmp}/cpu.folded"
        tools = {
            "sampler profile (held)": [SAMPLER, "profile", "--pid", str(spinner.pid), "--rate", "99", "--duration",
                                       seconds, "--out", out],
            "sampler profile --nonblocking": [SAMPLER, "profile", "--pid", str(spinner.pid), "--rate", "99",
                                              "--duration", seconds, "--out", out, "--nonblocking"],
            "py-spy record (blocking)": [PY_SPY, "record", "--pid", str(spinner.pid), "--rate", "99", "--duration",
                                         str(int(args.window)), "--format", "raw", "--output", f"{tmp}/spy.txt"],
            "py-spy record --nonblocking": [PY_SPY, "record", "--pid", str(spinner.pid), "--rate", "99",
                                            "--duration", str(int(args.window)), "--format", "raw", "--output",
                                            f"{tmp}/spy.txt", "--nonblocking"],
        }
        rows: list[dict[str, object]] = []
        held: list[float] = []
        try:
            time.sleep(1.5)
            for round_ in range(args.rounds):
                base, _ = window(spinner, None, args.window)
                for name, command in tools.items():
                    rate, said = window(spinner, command, args.window)
                    found = HELD.search(said)
                    if found and name == "sampler profile (held)":
                        held.append(float(found.group(1)))
                    rows.append({"round": round_, "tool": name, "units_per_s": round(rate), "none_units_per_s":
                                 round(base), "kept": round(rate / base, 4)})
                    print(f"round {round_}: {name}: {rate / base:.3f} of the units", file=sys.stderr)
        finally:
            spinner.stop()
    dumps = dump_times(args.python, args.rounds)
    probe = probe_cost(args.python, args.rounds, args.window)
    report = [f"# What reading a Python program's stacks costs it ({args.python}, commit {COMMIT})", "",
              f"`.venv/bin/python bench/python.py --python {args.python} --rounds {args.rounds} --window "
              f"{args.window:g}`: targets/python/spinner.py's one busy thread, its units per second while each "
              "tool samples it at 99 Hz over its rate with nothing attached in the same round (median of the "
              "rounds; 1.000: nothing lost).", "", "| tool | units kept (median) | lost |", "|---|---|---|"]
    for name in tools:
        kept = statistics.median(float(r["kept"]) for r in rows if r["tool"] == name)  # type: ignore[arg-type]
        report.append(f"| {name} | {kept:.3f} | {(1 - kept) * 100:.1f} % |")
    if held:
        report += ["", f"sampler held the sampled thread {statistics.median(held):.0f} us a sample (median of the "
                   "rounds' medians, sampler's clock: its registers, stack top and Python frames read)."]
    report += ["", "The whole command on targets/python/blocked.py (five threads; median of the runs):", "",
               "| command | seconds |", "|---|---|"]
    for name, value in dumps.items():
        report.append(f"| `{name}` | {value:.2f} |")
    report += ["", "A Python function's probe (`sampler trace --at py:__main__.never`, a function never called) "
               "while the thread makes its Python calls (one `unit()` a unit): every Python call of the process "
               "reaches the probe's place and is let go by sampler (median of the rounds):", "",
               "| | units/s | a Python call costs |", "|---|---|---|",
               f"| nothing | {probe['none']:.0f} | |",
               *(f"| `--at py:__main__.never {flags}` | {probe[kind]:.0f} | "
                 f"{(1 / probe[kind] - 1 / probe['none']) * 1e6:.2f} us more |"
                 for kind, flags in (("int3", "--probe int3"), ("inprocess", "--probe inprocess (the default)"),
                                     ("latency", "--latency --probe int3 (int3s at the start and the end)"),
                                     ("latency_inprocess", "--latency (in-process at the start, int3s at the ends)"))),
               "", "A unit is one Python call of unit() and one of sum(): two Python-level calls, of which the "
               "eval loop starts a frame for one (sum is C)."]
    write_results(args.results, "python", rows, "\n".join(report) + "\n")
    print("\n".join(report))


def probe_cost(python: str, rounds: int, seconds: float) -> dict[str, float]:
    """spinner.py's units per second with nothing and with a Python probe at a function it never calls:
    an int3 at each place of the frame's start (sampler's test of each call), or in-process (the
    test in the target), each with and without --latency."""
    spinner = Spinner(python, "spinner.py")
    found: dict[str, list[float]] = {"none": [], "int3": [], "inprocess": [], "latency": [], "latency_inprocess": []}
    try:
        time.sleep(1.5)
        for _ in range(rounds):
            base, _ = window(spinner, None, seconds)
            found["none"].append(base)
            for kind, extra in (("int3", ["--probe", "int3"]), ("inprocess", ["--probe", "inprocess"]),
                                ("latency", ["--latency", "--probe", "int3"]), ("latency_inprocess", ["--latency"])):
                proc = subprocess.Popen([SAMPLER, "trace", "--pid", str(spinner.pid), "--at", "py:__main__.never",
                                         *extra, "--duration", f"{seconds + 8:g}s", "--out", "/dev/null", "--quiet"],
                                        stderr=subprocess.PIPE, text=True)
                time.sleep(6)  # (its attach: the interpreter's DWARF read)
                rate, _ = window(spinner, None, seconds)
                found[kind].append(rate)
                proc.wait(60)
    finally:
        spinner.stop()
    return {key: statistics.median(values) for key, values in found.items()}


def dump_times(python: str, runs: int) -> dict[str, float]:
    proc = subprocess.Popen([python, str(ROOT / "targets" / "python" / "blocked.py")], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout is not None
    proc.stdout.readline()
    pid = str(proc.pid)
    commands = {"sampler stack --pid P": [SAMPLER, "stack", "--pid", pid],
                "sampler stack --pid P --nonblocking": [SAMPLER, "stack", "--pid", pid, "--nonblocking"],
                "sampler stack --pid P --native": [SAMPLER, "stack", "--pid", pid, "--native"],
                "py-spy dump --pid P": [PY_SPY, "dump", "--pid", pid],
                "py-spy dump --pid P --native": [PY_SPY, "dump", "--pid", pid, "--native"]}
    times: dict[str, list[float]] = {name: [] for name in commands}
    try:
        for _ in range(runs):
            for name, command in commands.items():
                start = time.monotonic()
                subprocess.run(command, capture_output=True, timeout=120)
                times[name].append(time.monotonic() - start)
    finally:
        proc.kill()
        proc.wait()
    return {name: statistics.median(values) for name, values in times.items()}


if __name__ == "__main__":
    main()
