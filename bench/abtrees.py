"""A/B of two source trees of sampler on one running target, alternating run by run: the
medians of the ptrace pause (and p95) at 10 Hz and 1 kHz and the every-hit rate. How each
change of issue 13 was measured.

    .venv/bin/python bench/abtrees.py c|go ROUNDS OLD_TREE [NEW_TREE]

OLD_TREE: e.g. made by `git worktree add /tmp/old HEAD~1`; NEW_TREE defaults to this one.
"""

from __future__ import annotations

import csv
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from harness import RunningTarget  # type: ignore[import-not-found]  # noqa: E402

TARGETS = {"c": ("ringbuf-c", "ring_read", "delta=b->w - b->r"),
           "go": ("ringbuf-go", "main.(*Ring).Read", "delta=b.w-b.r")}
MODES = (("10 Hz", ["attach", "--rate", "10", "--count", "60"]),
         ("1 kHz", ["attach", "--rate", "1000", "--count", "1000"]),
         ("every hit", ["trace", "--duration", "2s"]))


def run(tree: str, pid: int, target: tuple[str, str, str], mode: list[str], out: Path) -> tuple[float, float, float]:
    """(median pause, p95 pause, rows per second) of one run of ``tree``'s sampler."""
    argv = [str(ROOT / ".venv" / "bin" / "python"), "-m", "sampler", mode[0], "--pid", str(pid), "--backend",
            "ptrace", "--at", target[1], "--expr", target[2], *mode[1:], "--out", str(out), "--quiet"]
    subprocess.run(argv, cwd=tree, check=True, env={**os.environ, "PYTHONPATH": tree})
    with open(out, newline="") as f:
        rows = [r for r in csv.DictReader(f) if not r["error"]][3:]  # the first hits make the read plan
    pauses = sorted(float(r["pause_us"]) for r in rows)
    span = float(rows[-1]["elapsed_s"]) - float(rows[0]["elapsed_s"])
    return statistics.median(pauses), pauses[len(pauses) * 95 // 100], len(rows) / span


def main() -> None:
    if len(sys.argv) < 4 or sys.argv[1] not in TARGETS:
        raise SystemExit(__doc__)
    target, rounds = TARGETS[sys.argv[1]], int(sys.argv[2])
    trees = {"old": sys.argv[3], "new": sys.argv[4] if len(sys.argv) > 4 else str(ROOT)}
    results: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    running = RunningTarget(target[0])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(rounds):
                for mode, argv in MODES:
                    for name, tree in trees.items():
                        found = run(tree, running.proc.pid, target, argv, Path(tmp) / "rows.csv")
                        results.setdefault((mode, name), []).append(found)
    finally:
        running.stop()
    for (mode, name), found in sorted(results.items()):
        print(f"{mode:9} {name}: median pause {statistics.median(x[0] for x in found):.0f} us, p95 "
              f"{statistics.median(x[1] for x in found):.0f} us, {statistics.median(x[2] for x in found):.0f} rows/s")


if __name__ == "__main__":
    main()
