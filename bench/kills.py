"""Target survival when sampler is killed with SIGKILL mid-run, with and without the guardian.

    .venv/bin/python bench/kills.py [--trials 25]

For each breakpoint (ring_read: hot, hit at once; tick: called once a second, so the
int3 sits armed for most of each tick) and guardian on/off: start `sampler attach
--backend ptrace` at 100 Hz on the C -O2 target, SIGKILL it at a random moment, wait
2.5 s (tick runs at least twice), then count the target as surviving if it still runs,
never printed a trap, and its code in memory is byte for byte its file.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def code_intact(pid: int) -> bool:
    exe = os.readlink(f"/proc/{pid}/exe")
    binary = Path(exe).read_bytes()
    with open(f"/proc/{pid}/mem", "rb") as mem:
        for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 6 and fields[1] == "r-xp" and fields[5] == exe:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                offset = int(fields[2], 16)
                mem.seek(start)
                if mem.read(end - start) != binary[offset:offset + end - start]:
                    return False
    return True


def trial(at: str, guardian: bool, journal: str) -> bool:
    target = subprocess.Popen([str(ROOT / "targets/bin/ringbuf-c")], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.2)
        with tempfile.TemporaryDirectory() as tmp:
            command = [sys.executable, "-m", "sampler", "attach", "--backend", "ptrace", "--pid", str(target.pid),
                       "--at", at, "--expr", "b->w", "--rate", "100", "--hit-timeout", "2s",
                       "--out", f"{tmp}/k.csv", "--quiet"] + ([] if guardian else ["--no-guardian"])
            sampler = subprocess.Popen(command, cwd=ROOT, env={**os.environ, "SAMPLER_JOURNAL_DIR": journal},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            deadline = time.monotonic() + 30
            while not Path(f"{tmp}/k.csv").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(random.uniform(0.2, 1.2))
            sampler.send_signal(signal.SIGKILL)
            sampler.wait()
        time.sleep(2.5)
        return target.poll() is None and code_intact(target.pid)
    finally:
        target.kill()
        target.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=25)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as journal:
        for at in ("ring_read", "tick"):
            for guardian in (True, False):
                survived = sum(trial(at, guardian, journal) for _ in range(args.trials))
                print(f"--at {at:9} guardian {'on ' if guardian else 'off'}: target survived "
                      f"{survived}/{args.trials} SIGKILLs of sampler", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
