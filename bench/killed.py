"""Does the target survive sampler's tracing worker SIGKILLed mid-trace with int3s in? (issue 59)

Debian's redis-server under redis-benchmark (8 clients, SET and GET), every call of processCommand and of
call traced with `--probe int3` (two stops a command); the worker SIGKILLed at a random moment once rows flow
(the guardian alive: it puts the bytes back). A trial counts as survived when redis is alive a second later,
answers PING and its code is its file's. A/B in one run, alternated: the int3s' out-of-line copies and the
target's SIGTRAP handler (keepalive.py) on, and off (SAMPLER_OUTOFLINE=0: each hit emulated, as before).

    .venv/bin/python bench/killed.py [--trials 20] [--results bench/results]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.targets import code_differs, descendants  # noqa: E402


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ping(port: int) -> bool:
    return subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True,
                          timeout=10).stdout.strip() == "PONG"


def trial(outofline: bool, folder: Path) -> tuple[bool, str]:
    """One kill; (survived, how it died)."""
    port = _port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no", "--loglevel", "warning"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    load = sampler = None
    try:
        deadline = time.monotonic() + 20
        while not _ping(port):
            assert time.monotonic() < deadline, "redis-server did not answer"
            time.sleep(0.05)
        load = subprocess.Popen(["redis-benchmark", "-p", str(port), "-n", "10000000", "-c", "8", "-t", "set,get",
                                 "-q"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = folder / "rows.csv"
        env = {**os.environ, "SAMPLER_JOURNAL_DIR": str(folder / "journal"),
               "SAMPLER_OUTOFLINE": "1" if outofline else "0"}
        sampler = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--pid", str(redis.pid), "--probe",
                                    "int3", "--at", "processCommand", "--at", "call", "--out", str(out), "--quiet"],
                                   cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not (code_differs(redis.pid) and out.exists() and out.stat().st_size > 10_000):
            assert sampler.poll() is None and time.monotonic() < deadline, "sampler never traced a command"
            time.sleep(0.02)
        time.sleep(random.uniform(0.05, 1.0))
        worker = int(Path(f"/proc/{sampler.pid}/task/{sampler.pid}/children").read_text().split()[0])
        assert any(Path(f"/proc/{pid}/comm").read_text().strip() == "sampler-guard" for pid in descendants(worker))
        os.kill(worker, signal.SIGKILL)
        sampler.wait(10)
        time.sleep(1.0)
        if redis.poll() is not None:
            return False, f"signal {-redis.returncode}"
        if not _ping(port):
            return False, "no PONG"
        if code_differs(redis.pid):
            return False, "its code differs from its file"
        return True, ""
    finally:
        for proc in (load, sampler, redis):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="kills of each kind (default 20)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args()
    survived = {True: 0, False: 0}
    deaths: dict[bool, list[str]] = {True: [], False: []}
    for n in range(args.trials):
        for outofline in (True, False) if n % 2 == 0 else (False, True):
            with tempfile.TemporaryDirectory() as folder:
                ok, how = trial(outofline, Path(folder))
            survived[outofline] += ok
            if not ok:
                deaths[outofline].append(how)
            print(f"trial {n + 1} {'copies+handler' if outofline else 'emulated'}: {'survived' if ok else how}",
                  file=sys.stderr)
    lines = ["# A killed tracing worker with int3s in (bench/killed.py)", "",
             f"`.venv/bin/python bench/killed.py --trials {args.trials}`, {time.strftime('%Y-%m-%d')}: Debian's "
             "redis-server under redis-benchmark (8 clients), `trace --probe int3 --at processCommand --at call`, "
             "the worker SIGKILLed at a random moment once rows flow, the guardian alive. A/B alternated.", "",
             "| int3 hits | redis survived | died of |", "|---|---|---|"]
    for outofline, name in ((True, "int3s in stops of sampler's page (each site a jump there), copies + the "
                                   "target's SIGTRAP handler"),
                            (False, "emulated (SAMPLER_OUTOFLINE=0, as before)")):
        died = ", ".join(f"{how} x{deaths[outofline].count(how)}" for how in sorted(set(deaths[outofline])))
        lines.append(f"| {name} | {survived[outofline]} of {args.trials} | {died or '-'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "KILLED.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
