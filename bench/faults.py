"""The fault suite: does the target survive everything the sampler goes through?

For each way of sampling (delve, delve-rpc, ptrace with a breakpoint, ptrace
zero-stop) and each target (Go, C -O2, and for ptrace a C program that forks, vforks
and execs a child every 10 ms, whose children must all live), many trials of one fault each, on a run
sampling at 100 Hz: signals to sampler at a random moment (SIGINT, SIGTERM,
SIGKILL; SIGKILL of the tracing worker itself, as the OOM killer would, with and
without the guardian), with a breakpoint on a hot function and on one called once
a second; the target exiting, killed, or stopped with SIGSTOP; a second sampler
and gdb attaching; the output disk full; the output file removed.

After each trial it waits two seconds (--quick: at least half a second, until the target
is well, at most four) and checks: the target still runs (a new throughput line came, it never
printed SIGTRAP, it is neither stopped nor traced), its code in memory is byte for byte
its file, the CSV parses with every row whole, and sampler's exit code and message are
the ones expected. Where the fault ends the target, only the CSV and the exit are checked,
at once.

    .venv/bin/python bench/faults.py            # make faults (41 minutes here)
    .venv/bin/python bench/faults.py --quick    # make faults-quick (the tests run it)

Writes bench/results/faults.csv (one row per trial) and FAULTS.md (or under --results).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import (  # type: ignore[import-not-found]
    CHILD_DIED,
    COMMIT,
    FORKER,
    ROOT,
    SAMPLER,
    TARGETS,
    RunningTarget,
    Target,
    code_intact,
    cpu_hog,
    csv_whole,
    kill_tree,
    worker_of,
)

FAULT_TARGETS = {**TARGETS, "forks": FORKER}
CHECK_AFTER_S = 2.0
"""How long after the trial the target must still be running."""
QUICK_CHECK_S = (0.5, 4.0)
"""--quick: check from this long after the trial until the target is well (running, untraced, its code
intact, a throughput line, so a tick of its once-a-second function, 0.2 s or more after the end), at most
the second."""


@dataclass(frozen=True)
class Way:
    name: str
    backend: str
    zero_stop: bool = False
    go_only: bool = False


WAYS = [Way("delve", "delve", go_only=True), Way("delve-rpc", "delve-rpc", go_only=True),
        Way("ptrace", "ptrace"), Way("ptrace zero-stop", "ptrace", zero_stop=True)]


@dataclass(frozen=True)
class Fault:
    name: str
    expected_exit: tuple[int, ...]
    where: str = "hot"
    """hot, rare, or none (zero-stop has no breakpoint)."""
    guardian: bool = True
    target_lives: bool = True
    says: int = 0
    """Lines sampler should print (all with --quiet): one for an error or a notice, none otherwise."""


def faults_for(way: Way) -> list[Fault]:
    wheres = ["none"] if way.zero_stop else ["hot", "rare"]
    faults = []
    for where in wheres:
        faults += [Fault("SIGINT", (0,), where), Fault("SIGTERM", (0,), where),
                   Fault("SIGKILL", (-9,), where), Fault("SIGKILL worker", (137,), where, says=1)]
        if not way.zero_stop:
            faults.append(Fault("SIGKILL worker", (137,), where, guardian=False, says=1))
            # the guardian's race on a loaded machine: every core busy while the worker is killed
            faults.append(Fault(LOADED_KILL, (137,), where, says=1))
    return faults + [
        Fault("target exits", (1,), wheres[0], target_lives=False, says=1),
        Fault("target killed", (1,), wheres[0], target_lives=False, says=1),
        Fault("target SIGSTOP", (0,), wheres[0]),
        Fault("second sampler", (0,), wheres[0]),
        Fault("gdb attaches", (0,), wheres[0]),
        Fault("disk full", (1,), wheres[0], says=1),
        Fault("output removed", (0,), wheres[0], says=1),
    ]


KILL_WINDOW_S = (0.05, 0.02)
"""A child forked this long before / after the worker's SIGKILL may die of the int3 it copied:
auto-attached to the dying worker, it is let go when the kernel ends the worker's tracing,
an instant after the guardian could first act (docs/safety.md). Margins for a loaded machine."""
LOADED_KILL = "SIGKILL worker, loaded"
"""SIGKILL of the tracing worker while a busy process runs on every core."""

QUICK = {  # (way, target, fault, where, guardian): one trial each, about a minute in all
    # (no unloaded ptrace / C / SIGKILL worker / rare: the loaded trial below is that one, every core busy)
    ("ptrace", "c", "SIGINT", "hot", True), ("ptrace", "c", "SIGKILL", "hot", True),
    ("ptrace", "c", "target exits", "hot", True),
    ("ptrace", "c", LOADED_KILL, "rare", True),
    ("ptrace", "c", "target SIGSTOP", "hot", True), ("ptrace", "c", "second sampler", "hot", True),
    ("ptrace", "c", "gdb attaches", "hot", True), ("ptrace", "c", "disk full", "hot", True),
    ("ptrace", "c", "output removed", "hot", True),
    ("ptrace zero-stop", "c", "target killed", "none", True),
    ("ptrace", "forks", "SIGKILL worker", "hot", True), ("ptrace", "forks", "target exits", "hot", True),
    ("delve", "go", "SIGKILL worker", "hot", True), ("delve", "go", "target killed", "hot", True),
    ("delve-rpc", "go", "SIGKILL worker", "rare", True), ("delve-rpc", "go", "SIGTERM", "hot", True),
}


def trials_for(fault: Fault, way: Way, target: Target, quick: bool) -> int:
    if quick:
        return int((way.name, target.key, fault.name, fault.where, fault.guardian) in QUICK)
    if target.key == "forks":
        return 5 if fault.name.startswith("SIGKILL") else 2  # its children make each trial many
    if fault.name in ("SIGKILL worker", LOADED_KILL) and fault.guardian and way.name == "ptrace":
        return 50  # 2 targets x 2 places x 50 = 200 kills of the tracer, guardian on (and as many loaded)
    if fault.name.startswith("SIGKILL"):
        return 10
    return 5 if fault.name in ("SIGINT", "SIGTERM") else 3


@dataclass
class Trial:
    way: str
    target: str
    fault: str
    where: str
    guardian: bool
    trial: int
    target_survived: bool | None = None
    """None where the fault ends the target."""
    code_intact: bool | None = None
    csv_whole: bool = False
    rows: int = 0
    exit_code: int | None = None
    exit_expected: bool = False
    message: str = ""
    message_clean: bool = False
    others_as_expected: bool = True
    """second sampler / gdb: refused (or, zero-stop, served) as expected."""
    note: str = ""
    ok: bool = field(default=False)
    window_children: int = 0
    """Forked children that died of an int3 copied in the kill window (forked within
    KILL_WINDOW_S of the worker's SIGKILL), the one harm left when the worker is killed."""
    commit: str = ""
    """The sampler commit the trial ran (git describe of the tree)."""


class Runner:
    def __init__(self, tmp: Path, quick: bool = False) -> None:
        self.tmp = tmp
        self.check_after = QUICK_CHECK_S if quick else (CHECK_AFTER_S, CHECK_AFTER_S)
        """From when to when after the trial the target is checked (the first moment it is well)."""
        self.targets: dict[str, RunningTarget] = {}
        self.killed_at = 0.0
        """CLOCK_MONOTONIC seconds of the last SIGKILL of a worker (the forker's clock too)."""

    def target(self, target: Target, fresh: bool = False, exit_after: int = 0) -> RunningTarget:
        running = self.targets.get(target.key)
        if fresh or running is None:
            if running is not None:
                self.drop(target)
            running = RunningTarget(target.binary, *target.argv(exit_after))  # it said ready: sampler's
            self.targets[target.key] = running  # own start (half a second and more) lets it get going
        return running

    def drop(self, target: Target) -> None:
        running = self.targets.pop(target.key, None)
        if running is not None:
            running.stop()

    def close(self) -> None:
        for key in list(self.targets):
            self.drop(FAULT_TARGETS[key])

    def command(self, way: Way, target: Target, fault: Fault, pid: int, out: Path, count: int = 0) -> list[str]:
        command = [*SAMPLER, "attach", "--backend", way.backend, "--pid", str(pid),
                   "--rate", "100", "--hit-timeout", "2s", "--out", str(out), "--quiet"]
        if count:
            command += ["--count", str(count)]
        if not fault.guardian:
            command.append("--no-guardian")
        if way.zero_stop:
            return command + ["--expr", f"d={target.global_expr}"]
        return command + ["--at", target.hot if fault.where == "hot" else target.rare, "--expr", target.at_expr]

    def run(self, way: Way, target: Target, fault: Fault, index: int) -> Trial:
        if fault.name == LOADED_KILL:
            with cpu_hog():
                return self._run(way, target, fault, index)
        return self._run(way, target, fault, index)

    def _run(self, way: Way, target: Target, fault: Fault, index: int) -> Trial:
        trial = Trial(way.name, target.key, fault.name, fault.where, fault.guardian, index, commit=COMMIT)
        exits = fault.name == "target exits"
        running = self.target(target, fresh=exits or not fault.target_lives, exit_after=4 if exits else 0)
        folder = Path(tempfile.mkdtemp(dir=self.tmp))
        out = folder / "samples.csv"
        if fault.name == "disk full":
            out = _tiny_filesystem(folder) / "samples.csv"
        stderr_path = folder / "stderr"
        with open(stderr_path, "w") as stderr:
            sampler = subprocess.Popen(self.command(way, target, fault, running.pid, out), cwd=ROOT,
                                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            if not _wait(lambda: csv_whole(out)[1] >= 1, sampler, 60):
                trial.note = "no sample came"
            else:
                trial.others_as_expected, trial.note = self._inflict(fault, way, target, running, sampler, out)
            try:
                trial.exit_code = sampler.wait(40)
            except subprocess.TimeoutExpired:
                trial.note += " sampler hung: killed"
                kill_tree(sampler.pid)
                trial.exit_code = sampler.wait()
            ended = time.monotonic()
            if fault.target_lives:
                self._settle(running, ended)
                trial.target_survived = running.healthy(ended + 0.2)
                if not trial.target_survived and running.proc.poll() == -signal.SIGTRAP:
                    trial.note += " the target died of SIGTRAP"  # a thread at the int3 as its tracer died
                died = [line for _, line in list(running.lines) if CHILD_DIED.match(line)]
                if died and fault.name in ("SIGKILL worker", LOADED_KILL):
                    trial.note += f" {died[0]} (worker killed at {self.killed_at:.6f})"
                    forked = [float(line.split(" forked ")[1].split()[0]) for line in died]
                    if all(-KILL_WINDOW_S[0] < t - self.killed_at < KILL_WINDOW_S[1] for t in forked) \
                            and running.healthy(ended + 0.2, children_died=False):
                        trial.window_children = len(died)
                trial.code_intact = code_intact(running.pid)
            trial.csv_whole, trial.rows = csv_whole(out)
            trial.exit_expected = trial.exit_code in fault.expected_exit
            lines = [line for line in stderr_path.read_text(errors="replace").splitlines() if line.strip()]
            trial.message = " | ".join(lines)[-300:]
            trial.message_clean = len(lines) == fault.says and all(line.startswith("sampler: ") for line in lines)
            trial.ok = trial.target_survived is not False and trial.code_intact is not False and \
                trial.csv_whole and trial.exit_expected and trial.message_clean and trial.others_as_expected
        finally:
            if sampler.poll() is None:
                kill_tree(sampler.pid)
                sampler.wait()
            _unmount(folder)
            if not fault.target_lives or not (trial.target_survived and trial.code_intact):
                self.drop(target)
        return trial

    def _settle(self, running: RunningTarget, ended: float) -> None:
        """Wait until the check is due: ``check_after[0]`` after the end, and then until the target is
        well (running, untraced, a throughput line since, its code intact) or ``check_after[1]``."""
        first, last = self.check_after
        time.sleep(max(0.0, ended + first - time.monotonic()))
        while time.monotonic() < ended + last and not (running.healthy(ended + 0.2) and code_intact(running.pid)):
            time.sleep(0.05)

    def _inflict(self, fault: Fault, way: Way, target: Target, running: RunningTarget,
                 sampler: subprocess.Popen[bytes], out: Path) -> tuple[bool, str]:
        time.sleep(random.uniform(0.05, 1.2))
        name = fault.name
        if name in ("SIGINT", "SIGTERM", "SIGKILL"):
            sampler.send_signal(getattr(signal, name))
        elif name in ("SIGKILL worker", LOADED_KILL):
            worker = worker_of(sampler.pid)
            if worker is None:
                return False, "no worker found"
            os.kill(worker, signal.SIGKILL)
            self.killed_at = time.monotonic()
        elif name == "target exits":
            pass  # it exits 4 s after it started, while sampler samples it
        elif name == "target killed":
            running.proc.kill()
        elif name == "target SIGSTOP":
            os.kill(running.pid, signal.SIGSTOP)
            time.sleep(1.0)
            os.kill(running.pid, signal.SIGCONT)
            time.sleep(0.3)
            sampler.send_signal(signal.SIGINT)
        elif name == "second sampler":
            second = subprocess.run(self.command(way, target, fault, running.pid, out.with_name("second.csv"), 3),
                                    cwd=ROOT, capture_output=True, text=True, timeout=60)
            sampler.send_signal(signal.SIGINT)
            expected = 0 if way.zero_stop else 2
            said = second.stderr.strip().replace("\n", " | ")
            return second.returncode == expected, \
                f"second sampler exit {second.returncode} (expected {expected}): {said}"[:300]
        elif name == "gdb attaches":
            gdb = subprocess.run(["gdb", "-p", str(running.pid), "-batch", "-ex", "info threads"],
                                 capture_output=True, text=True, timeout=60)
            sampler.send_signal(signal.SIGINT)
            said = [line for line in (gdb.stdout + gdb.stderr).splitlines() if "ptrace" in line.lower()]
            refused = any("Operation not permitted" in line for line in said)
            return refused != way.zero_stop, f"gdb exit {gdb.returncode}: {' | '.join(said)[:200] or 'attached'}"
        elif name == "disk full":
            pass  # the tiny file system fills within a few seconds
        elif name == "output removed":
            out.unlink()
            time.sleep(0.5)
            sampler.send_signal(signal.SIGINT)
        return True, ""


def _wait(condition: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _tiny_filesystem(folder: Path) -> Path:
    mount = folder / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", str(mount)], check=True)
    return mount


def _unmount(folder: Path) -> None:
    mount = folder / "full"
    if mount.is_dir() and os.path.ismount(mount):
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _pct(n: int, of: int) -> str:
    return f"{n}/{of} ({100 * n / of:.0f} %)" if of else "-"


def report(trials: list[Trial], path: Path, quick: bool, seconds: float, ran: int) -> None:
    groups: dict[tuple[str, str, str, str, bool], list[Trial]] = {}
    for t in trials:
        groups.setdefault((t.way, t.target, t.fault, t.where, t.guardian), []).append(t)
    lines = [
        "# Fault suite: does the target survive what sampler goes through?",
        "",
        f"{'faults-quick' if quick else 'make faults'}, {datetime.date.today()}, {platform.node() or 'this machine'} "
        f"({os.cpu_count()} CPUs, Linux {platform.release()}), {len(trials)} trials"
        + (f"; the last invocation ran {ran} of them in {seconds / 60:.1f} min. " if ran else ". ") +
        "Written by `bench/faults.py`; one row per trial in `faults.csv`.",
        "",
        "Every trial samples at 100 Hz, waits for the first row, lets a random 0.05-1.2 s pass, inflicts the fault, "
        "waits for sampler to end, then "
        + (f"{QUICK_CHECK_S[0]:g} s more, and on until the target is well (at most {QUICK_CHECK_S[1]:g} s)"
           if quick else f"{CHECK_AFTER_S:g} s more")
        + " (where the fault ends the target, nothing more). *Target survived*: it still runs (a new "
        "throughput line), never printed SIGTRAP, is neither stopped nor traced. *Code intact*: its executable "
        "mappings in /proc/PID/mem equal the file. *CSV whole*: it parses and every row has every column. "
        "*Exit as expected*: the exit code, and one `sampler: ...` line where an error is due. "
        "*Children lost in the kill window*: trials whose one harm was forked children dying of an int3 they "
        f"copied within {KILL_WINDOW_S[0] * 1000:g} ms before / {KILL_WINDOW_S[1] * 1000:g} ms after the worker's "
        "SIGKILL (docs/safety.md says why no rescue reaches them); such a trial counts as not survived.",
        "",
        "*hot*: the breakpoint is on the reader's read function (hit at once); *rare*: on a function called "
        "once a second (armed most of each tick). *SIGKILL*: of the process the user started; *SIGKILL "
        "worker*: of the forked worker that traces (what the OOM killer or a kill of the process group does).",
        "",
    ]
    for title, pick in (("SIGKILL: target survival with and without the guardian",
                         lambda k: k[2].startswith("SIGKILL")),
                        ("Every fault", lambda k: True)):
        lines += [f"## {title}", "",
                  "| way | target | fault | breakpoint | guardian | trials | target survived | code intact "
                  "| CSV whole | exit as expected | children lost in the kill window |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for key, group in groups.items():
            if not pick(key):
                continue
            way, target, fault, where, guardian = key
            lives = [t for t in group if t.target_survived is not None]
            lines.append(
                f"| {way} | {FAULT_TARGETS[target].label} | {fault} | {where} | {'on' if guardian else 'off'} "
                f"| {len(group)} | {_pct(sum(bool(t.target_survived) for t in lives), len(lives))} "
                f"| {_pct(sum(bool(t.code_intact) for t in lives), len(lives))} "
                f"| {_pct(sum(t.csv_whole for t in group), len(group))} "
                f"| {_pct(sum(t.exit_expected and t.message_clean for t in group), len(group))} "
                f"| {_pct(sum(t.window_children > 0 for t in group), len(group)) if target == 'forks' else '-'} |")
        lines.append("")
    runs = sorted({(t.way, t.commit) for t in trials}, key=lambda wc: [w.name for w in WAYS].index(wc[0]))
    lines += ["Sampler commit per way: " + ", ".join(f"{way} `{commit or '?'}`" for way, commit in runs) + ".", ""]
    failed = [t for t in trials if not t.ok]
    lines += ["## Trials that did not pass every check", ""]
    lines += [f"- {t.way} / {FAULT_TARGETS[t.target].label} / {t.fault} / {t.where} / guardian "
              f"{'on' if t.guardian else 'off'} #{t.trial}: survived={t.target_survived} "
              f"intact={t.code_intact} csv={t.csv_whole} exit={t.exit_code} message={t.message!r} {t.note}"
              for t in failed] or ["None."]
    notes = sorted({re.sub(r"(?<=PID )\d+|(?<=process )\d+", "N", f"- {t.way}: {t.fault}: {t.note}") for t in trials
                    if t.note and t.fault in ("second sampler", "gdb attaches")})
    lines += ["", "## What the second sampler and gdb were told (distinct answers)", "", *notes, ""]
    path.write_text("\n".join(lines))


def _load(path: Path) -> list[Trial]:
    """The trials of an earlier faults.csv, typed again."""
    def typed(name: str, text: str) -> object:
        kind = Trial.__dataclass_fields__[name].type
        if "bool" in str(kind):
            return None if text == "" else text == "True"
        if "int" in str(kind):
            return None if text == "" else int(text)
        return text

    if not path.exists():
        return []
    with open(path, newline="") as f:
        return [Trial(**{k: typed(k, v) for k, v in row.items()}) for row in csv.DictReader(f)]  # type: ignore[arg-type]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one trial per fault (the tests run this)")
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--only", help="run only these ways, comma-separated (e.g. delve,delve-rpc)")
    parser.add_argument("--report-only", action="store_true", help="write FAULTS.md again from faults.csv")
    parser.add_argument("--fault", help="run only this fault (e.g. 'SIGKILL worker, loaded')")
    parser.add_argument("--target", help="run only this target (c, go, forks)")
    parser.add_argument("--trials", type=int, help="trials per cell instead of the suite's own numbers")
    parser.add_argument("--merge", action="store_true",
                        help="keep the trials of the other ways (or, with --fault, other faults) from the "
                             "faults.csv already there")
    args = parser.parse_args()
    if args.report_only:
        report(_load(args.results / "faults.csv"), args.results / "FAULTS.md", False, 0.0, 0)
        return 0
    if os.geteuid() != 0:
        raise SystemExit("faults: run as root (ptrace of other processes, a tmpfs for the disk-full trial)")
    have_dlv = shutil.which("dlv") is not None
    started = time.monotonic()
    trials: list[Trial] = []
    args.results.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SAMPLER_JOURNAL_DIR"] = str(Path(tmp) / "journal")  # this run's own journal
        runner = Runner(Path(tmp), args.quick)
        try:
            for way in WAYS:
                if (way.go_only and not have_dlv) or (args.only and way.name not in args.only.split(",")):
                    continue
                for target in FAULT_TARGETS.values():
                    if (way.go_only and target.binary != "ringbuf-go") or args.target not in (None, target.key):
                        continue
                    for fault in faults_for(way):
                        if args.fault and fault.name != args.fault:
                            continue
                        count = trials_for(fault, way, target, args.quick)
                        for index in range(count if args.trials is None or not count else args.trials):
                            trial = runner.run(way, target, fault, index)
                            trials.append(trial)
                            if not trial.ok:
                                print(f"faults: not passed: {asdict(trial)}", flush=True)
                    print(f"faults: {way.name} / {target.label}: {len(trials)} trials so far, "
                          f"{(time.monotonic() - started) / 60:.1f} min", flush=True)
        finally:
            runner.close()
    ran = len(trials)
    if args.merge:
        fresh = {(t.way, t.fault) if args.fault else t.way for t in trials}
        trials = [t for t in _load(args.results / "faults.csv")
                  if ((t.way, t.fault) if args.fault else t.way) not in fresh] + trials
        order = [w.name for w in WAYS]
        trials.sort(key=lambda t: order.index(t.way))  # stable: each way's own order stays
    columns = list(asdict(trials[0])) if trials else []
    with open(args.results / "faults.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, columns)
        writer.writeheader()
        writer.writerows(asdict(t) for t in trials)
    report(trials, args.results / "FAULTS.md", args.quick, time.monotonic() - started, ran)
    passed = sum(t.ok for t in trials)
    print(f"faults: {passed}/{len(trials)} trials passed every check; see {args.results / 'FAULTS.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
