"""How long finding and loading debug information takes, step by step, for the largest
library tried here: glibc, whose DWARF (4 MB, from Debian's libc6-dbg) is found by build-id.

Starts Debian's own python3 (stripped, allocating in a loop), then times, in one process
as sampler does them: reading the modules of the process; `--at libc.so.6:malloc`
(the symbol, the debug file by build-id, the unit of malloc through .debug_aranges, the
line table for the end of the prologue); malloc's parameters and locals; its CFA rule
(.eh_frame_hdr); a global of libc that only the DWARF walk finds (main_arena); and then
the same lookups of the first run of `sampler attach`, end to end, with peak RSS.

    .venv/bin/python bench/debuginfo.py [--runs 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sampler.debuginfo.debugfiles import DebugFinder  # noqa: E402
from sampler.debuginfo.locate import find_global, resolve  # noqa: E402
from sampler.debuginfo.locations import REGISTERS  # noqa: E402
from sampler.debuginfo.modules import Modules  # noqa: E402

LOOP = "import time\nwhile True:\n    b = bytearray(100000)\n    time.sleep(0.002)\n"


def timed(steps: dict[str, list[float]], name: str, call: Callable[[], object]) -> object:
    start = time.perf_counter()
    result = call()
    steps.setdefault(name, []).append((time.perf_counter() - start) * 1000)
    return result


def one_run(pid: int, steps: dict[str, list[float]]) -> None:
    modules = timed(steps, "read the modules (/proc/PID/maps, open each ELF)",
                    lambda: Modules(pid, DebugFinder(pid, (), lambda _: None, print)))
    assert isinstance(modules, Modules)
    try:
        place = timed(steps, "--at libc.so.6:malloc (symbol, debug file by build-id, unit, prologue)",
                      lambda: resolve(modules, "libc.so.6:malloc"))
        assert place.module is not None and place.function is not None  # type: ignore[attr-defined]
        module, function = place.module, place.function  # type: ignore[attr-defined]
        debug = module.debug()
        pc = place.address - module.bias  # type: ignore[attr-defined]
        names = timed(steps, "malloc's parameters and locals, with their types",
                      lambda: debug.variables(function, pc))
        assert "bytes" in names  # type: ignore[operator]
        timed(steps, "malloc's CFA rule (.eh_frame_hdr, one FDE)",
              lambda: debug.cfa(pc, dict.fromkeys(REGISTERS, 0)))
        found = timed(steps, "main_arena after that (malloc's unit is already read)",
                      lambda: find_global(modules, "main_arena", None))
        assert found is not None
    finally:
        modules.close()
    fresh = Modules(pid, DebugFinder(pid, (), lambda _: None, print))
    try:
        found = timed(steps, "main_arena with nothing read before: the DWARF walk up to malloc.c's unit",
                      lambda: find_global(fresh, "main_arena", None))
        assert found is not None
    finally:
        fresh.close()


def end_to_end(pid: int, *how: str) -> tuple[float, int]:
    """`sampler attach HOW --count 1`: seconds and peak RSS (kB)."""
    command = ["/usr/bin/time", "-f", "%e %M", sys.executable, "-m", "sampler", "attach", "--backend", "ptrace",
               "--pid", str(pid), *how, "--count", "1", "--quiet"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True)
    seconds, rss = result.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    target = subprocess.Popen(["/usr/bin/python3", "-c", LOOP])
    try:
        time.sleep(0.5)
        steps: dict[str, list[float]] = {}
        for _ in range(args.runs):
            one_run(target.pid, steps)
        print(f"Debian's python3 (PID {target.pid}), glibc's DWARF from libc6-dbg, {args.runs} runs, median:")
        for name, values in steps.items():
            print(f"  {statistics.median(values):8.1f} ms  {name}")
        for how in (["--at", "libc.so.6:malloc", "--expr", "bytes"], ["--expr", "main_arena.system_mem"]):
            runs = [end_to_end(target.pid, *how) for _ in range(args.runs)]
            print(f"sampler attach {' '.join(how)} --count 1: {statistics.median(r[0] for r in runs):.2f} s, "
                  f"peak RSS {statistics.median(r[1] for r in runs) / 1024:.0f} MB")
    finally:
        target.kill()
        target.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
