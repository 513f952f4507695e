"""The single file's start-up against the venv install's (make dist-test runs it after make dist).

One target (targets/bin/ringbuf-c), one question: `attach --backend ptrace --expr ring->w --count 1`,
once with dist/sampler and once with .venv/bin/sampler, alternately, RUNS times each. Measured:
the whole command from its start to the first row on its standard output, and to its exit.
Medians of each, and the single file's minus the venv's (0.3 s is what we hold it to: said, not a
failure, as the machine's noise moves it; a target that died is one).
Also the size of the file and of each install (the wheel's core, and with the plot extra).

    .venv/bin/python bench/startup.py [--runs 15] [--results DIR]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import BIN, COMMIT, ROOT, write_results

SINGLE = ROOT / "dist" / "sampler"
VENV = ROOT / ".venv" / "bin" / "sampler"


def once(command: Path, pid: int) -> tuple[float, float]:
    """(seconds to the first row, seconds to the exit) of one attach."""
    started = time.monotonic()
    run = subprocess.Popen([str(command), "attach", "--backend", "ptrace", "--pid", str(pid), "--expr", "ring->w",
                            "--count", "1", "--quiet", "--out", "-"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert run.stdout is not None
    header = run.stdout.readline()
    row = run.stdout.readline()
    first = time.monotonic() - started
    _, err = run.communicate(timeout=60)
    ended = time.monotonic() - started
    assert run.returncode == 0 and header.startswith("seq,") and row, (command, run.returncode, err)
    return first, ended


def size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 1e6
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 1e6


def install_sizes() -> dict[str, float]:
    """MB of site-packages after pip install of the wheel (its packages from PyPI), without and with [plot]."""
    wheel = next((ROOT / "dist").glob("debug_sampler-*.whl"))
    sizes = {}
    for name, spec in (("core", str(wheel)), ("plot", f"{wheel}[plot]")):
        with tempfile.TemporaryDirectory(prefix="sampler-size-") as folder:
            subprocess.run([sys.executable, "-m", "venv", folder], check=True)
            before = size_mb(Path(folder))
            subprocess.run([f"{folder}/bin/pip", "install", "-q", spec], check=True)
            sizes[name] = size_mb(Path(folder)) - before
    return sizes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--no-sizes", action="store_true", help="skip the install sizes (they need PyPI)")
    options = parser.parse_args()
    if not SINGLE.exists():
        print("startup: no dist/sampler: run make dist first", file=sys.stderr)
        return 1
    target = subprocess.Popen([str(BIN / "ringbuf-c")], stdout=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        times: dict[str, list[tuple[float, float]]] = {"single file": [], "venv": []}
        for _ in range(options.runs):  # alternately, so that both see the same machine
            times["single file"].append(once(SINGLE, target.pid))
            times["venv"].append(once(VENV, target.pid))
        alive = target.poll() is None
    finally:
        target.kill()
        target.wait()
    first = {name: statistics.median(t[0] for t in runs) for name, runs in times.items()}
    ended = {name: statistics.median(t[1] for t in runs) for name, runs in times.items()}
    sizes = {} if options.no_sizes else install_sizes()
    row: dict[str, object] = {
        "commit": COMMIT, "runs": options.runs, "python_venv": sys.version.split()[0],
        "single_first_row_s": round(first["single file"], 3), "venv_first_row_s": round(first["venv"], 3),
        "single_exit_s": round(ended["single file"], 3), "venv_exit_s": round(ended["venv"], 3),
        "difference_s": round(first["single file"] - first["venv"], 3),
        "single_file_mb": round(size_mb(SINGLE), 1),
        "wheel_kb": round(size_mb(next((ROOT / "dist").glob("debug_sampler-*.whl"))) * 1000),
        **{f"install_{name}_mb": round(mb, 1) for name, mb in sizes.items()},
        "target_alive": alive,
    }
    report = "\n".join([
        "# The single file against the venv install (bench/startup.py)", "",
        f"Commit {COMMIT}; {options.runs} runs of each, alternately; the venv's Python {row['python_venv']}, "
        "the single file's 3.9 (built on Debian 11). The whole command `sampler attach --backend ptrace "
        "--pid P --expr ring->w --count 1`, to its first row and to its exit; medians.", "",
        "| | first row | exit | size |", "|---|---|---|---|",
        f"| single file (dist/sampler) | {first['single file']:.3f} s | {ended['single file']:.3f} s | "
        f"{row['single_file_mb']} MB |",
        f"| venv (.venv/bin/sampler) | {first['venv']:.3f} s | {ended['venv']:.3f} s | "
        + (f"{sizes['core']:.1f} MB installed ({sizes['plot']:.1f} MB with [plot]) |" if sizes else "- |"),
        "", f"The single file's first row comes {row['difference_s']} s after the venv's (we hold it to 0.3 s).",
        f"The wheel itself: {row['wheel_kb']} kB.", ""])
    write_results(options.results, "startup", [row], report)
    print(report)
    if float(str(row["difference_s"])) > 0.3:
        print("startup: the single file's first row came more than 0.3 s after the venv's", file=sys.stderr)
    if not alive:
        print("startup: the target died", file=sys.stderr)
    return 0 if alive else 1


if __name__ == "__main__":
    sys.exit(main())
