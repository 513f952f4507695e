"""--max-overhead with an in-process probe that reads (issue 36): the share of the target's time
sampler says its probe took, beside the share the target clocked itself.

targets/burst calls touch() in bursts of 20,000 calls, 100 ms apart, and clocks each burst. sampler
reads two fields at every call (`trace --probe inprocess --expr n=a->n --expr sum=a->sum --hist n`,
about 1.2 us a call: a burst takes 24 ms instead of 27 us) under a budget, for 10 s. The target's
share: what its traced bursts took beyond the median untraced one (the bursts before sampler came),
over the run's time. sampler's share: the summary's (the reading probe's time clocked in each of its
records, the hits it only counted estimated, the two learning int3 hits estimated as ever). Alongside,
the same run with no budget (the probe reads at every call).

Results: bench/results/inprocess_budget.csv and INPROCESS_BUDGET.md.

    .venv/bin/python bench/inprocess_budget.py [--rounds 3] [--results DIR]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT))

from harness import SAMPLER, RunningTarget, write_results  # type: ignore[import-not-found]  # noqa: E402

BURST = re.compile(r"^burst threads=1 calls=(\d+) ns_per_call=([\d.]+) traced=(\S+)$")
REACHED = re.compile(r"the probes took about ([\d.]+)% of the target's time")
LINE = re.compile(r"(\d+) call\(s\), counted in the target; (\d+) row\(s\)(?:; (\d+) not recorded[^;\n]*)?"
                  r"(?:; (\d+) only counted)?")
RUN_S = 10.0
BUDGETS = ("1%", "5%", "none")


def one(budget: str) -> dict[str, object]:
    target = RunningTarget("burst", "1", "20000")
    try:
        time.sleep(2.0)
        start = time.monotonic()
        limit = [] if budget == "none" else ["--max-overhead", budget]
        done = subprocess.run([*SAMPLER, "trace", "--pid", str(target.pid), "--at", "touch", "--probe", "inprocess",
                               "--expr", "n=a->n", "--expr", "sum=a->sum", "--hist", "n", *limit,
                               "--duration", f"{RUN_S:.0f}s", "--quiet"], cwd=ROOT, text=True,
                              capture_output=True, timeout=120)
        end = time.monotonic()
        time.sleep(0.3)
    finally:
        target.proc.kill()
        target.proc.wait()
    bursts = [(t, BURST.match(line)) for t, line in target.lines]
    before = [float(m[2]) for t, m in bursts if m and t < start]
    during = [(int(m[1]), float(m[2])) for t, m in bursts if m and start <= t <= end + 0.2 and m[3] != "0"]
    base = statistics.median(before)
    added_s = sum(calls * (ns - base) for calls, ns in during) / 1e9
    reached = REACHED.search(done.stderr)
    line = LINE.search(done.stderr)
    if done.returncode != 0 or line is None:
        raise SystemExit(f"bench: sampler failed ({done.returncode}): {done.stderr[-400:]}")
    return {"budget": budget, "sampler_share_pct": float(reached[1]) if reached else "",
            "target_share_pct": round(100 * added_s / (end - start), 3), "run_s": round(end - start, 2),
            "calls": int(line[1]), "rows": int(line[2]), "only_counted": int(line[4] or 0),
            "not_recorded": int(line[3] or 0)}


def report(rows: list[dict[str, object]], rounds: int) -> str:
    lines = [f"# --max-overhead with an in-process probe reading two fields ({rounds} alternating round(s); medians)",
             "", "| budget | sampler's account | the target's clock | calls | rows | only counted |",
             "|---|---|---|---|---|---|"]
    for budget in BUDGETS:
        mine = [r for r in rows if r["budget"] == budget]
        if not mine:
            continue

        def median(key: str, mine: list[dict[str, object]] = mine) -> float:
            return statistics.median(float(r[key]) for r in mine if r[key] != "")  # type: ignore[arg-type]

        said = f"{median('sampler_share_pct'):.2f}%" if any(r["sampler_share_pct"] != "" for r in mine) else "-"
        lines.append(f"| {budget} | {said} | {median('target_share_pct'):.2f}% | {median('calls'):,.0f} | "
                     f"{median('rows'):,.0f} | {median('only_counted'):,.0f} |")
    lines += ["", f"targets/burst (1 thread, bursts of 20,000 calls 100 ms apart, each clocked by the program); "
              f"sampler `trace --probe inprocess --expr n=a->n --expr sum=a->sum --hist n --duration {RUN_S:.0f}s` "
              "with and without `--max-overhead`. The target's clock: the time its traced bursts took beyond the "
              "median untraced burst, over the run's time (sampler's worker on the other core counts in it where "
              "it takes the target's core). sampler's account: the summary's share (the reading probe's own time "
              "clocked in each record; hits only counted at 5 ns; the two learning int3 hits estimated)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    rows = []
    for round_ in range(args.rounds):
        for budget in BUDGETS:
            row = one(budget)
            print(f"round {round_ + 1}: {row}", file=sys.stderr)
            rows.append(row)
    text = report(rows, args.rounds)
    write_results(args.results, "inprocess_budget", rows, text)  # type: ignore[arg-type]
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
