"""`sampler profile`: every thread's stack, sampled at a rate, counted per folded stack.

At each tick every thread of each process is looked at once: one that runs (state R) is stopped
only while its registers and the top of its stack are read (collect.py), then unwound after it
runs again; with ``off_cpu`` the sleeping and blocked ones are read too, without stopping them
(asleep in a system call, they do not run), and the system call they wait in is their innermost
frame (``[epoll_wait]``): where a hung program waits. A stack is counted under its folded form,
outermost first; the process's name is its root when several processes are sampled.

What the target pays: each thread stopped for a sample is held as long as its read takes (said
per sample by collect.py, summed here), plus the two wake-ups of a stop sampler cannot see; with
``max_overhead`` the rate comes down so that this stays under the share asked (budget.py).
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sampler.budget import Budget, wake_latency_s
from sampler.durations import format_duration
from sampler.errors import ProcessNotFound
from sampler.printable import printable
from sampler.stacks import python
from sampler.stacks.collect import HELD, NONBLOCKING, Reader, ThreadStack, alive, first_in_line
from sampler.stop import StopFlag
from sampler.target import procfs
from sampler.unwind.walk import MAX_DEPTH

PROGRESS_S = 1.0
"""How often the progress line is written."""
HELD_KEPT = 10_000
"""Holds kept for the median a long profile reports (not one per sample of an hour's run)."""


@dataclass
class Profile:
    stacks: Counter[str] = field(default_factory=Counter)
    samples: int = 0
    """Stacks counted (one per thread per tick that was sampled)."""
    ticks: int = 0
    threads: set[tuple[int, int]] = field(default_factory=set)
    held_us: deque[float] = field(default_factory=lambda: deque(maxlen=HELD_KEPT))
    """How long each stopped thread was held (sampler's clock), the last HELD_KEPT."""
    unread: int = 0
    """Threads a tick could not read (one that ended meanwhile, one another tracer holds)."""
    unread_why: dict[str, int] = field(default_factory=dict)
    torn: int = 0
    """Python stacks read as their thread ran (--nonblocking) that changed meanwhile."""
    stopped_ticks: int = 0
    """Ticks that found every thread of a process stopped by a signal (state T): none ran."""
    started: float = 0.0
    elapsed_s: float = 0.0
    stretched_to_hz: float | None = None
    gone: list[int] = field(default_factory=list)
    names: dict[int, str] = field(default_factory=dict)

    @property
    def rate_hz(self) -> float:
        return self.ticks / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def summary(self, rate: float, off_cpu: bool) -> str:
        """The run's figures in one line (the flame graph's subtitle, the last line on stderr)."""
        held = f"; a sampled thread was held {statistics.median(self.held_us):.0f} us (median, sampler's clock)" \
            if self.held_us else ""
        which = "on- and off-CPU" if off_cpu else "on-CPU"
        unread = "".join(f"; {count} thread sample(s) not read: {why}"
                         for why, count in sorted(self.unread_why.items(), key=lambda item: -item[1])[:3])
        stopped = f"; the process was stopped by a signal at {self.stopped_ticks} tick(s): none of its threads " \
            "ran" if self.stopped_ticks else ""
        stopped += f"; {self.torn} Python stack(s) changed while they were read (torn)" if self.torn else ""
        return (f"{self.samples} samples ({which}) of {len(self.threads)} thread(s) in {self.elapsed_s:.1f} s, "
                f"{self.rate_hz:.0f} of {rate:g} ticks/s{held}{unread}{stopped}")


def profile(pids: Sequence[int], rate: float, duration_s: float | None, stop: StopFlag, off_cpu: bool = False,
            max_overhead: float | None = None, max_depth: int = MAX_DEPTH,
            progress: Callable[[str], None] | None = None, debug_dirs: tuple[str, ...] = (),
            python_way: str = HELD, native: bool = False) -> Profile:
    """Sample every thread of ``pids`` ``rate`` times a second until ``duration_s`` or ``stop``."""
    readers: dict[int, Reader] = {}
    result = Profile()
    with first_in_line():
        try:
            _profile(pids, readers, result, rate, duration_s, stop, off_cpu, max_overhead, max_depth, progress,
                     debug_dirs, python_way, native)
        finally:
            for reader in readers.values():
                reader.close()
            result.elapsed_s = time.monotonic() - result.started
    return result


def _profile(pids: Sequence[int], readers: dict[int, Reader], result: Profile, rate: float,
             duration_s: float | None, stop: StopFlag, off_cpu: bool, max_overhead: float | None, max_depth: int,
             progress: Callable[[str], None] | None, debug_dirs: tuple[str, ...], python_way: str = HELD,
             native: bool = False) -> None:
    for pid in pids:
        readers[pid] = Reader(pid, debug_dirs, python=python_way)
        readers[pid].native = native
        readers[pid].remember = True
        readers[pid].interpreter()
        result.names[pid] = procfs.comm(pid)
    for reader in readers.values():  # the tables of the code each runs, read before the clock starts
        reader.warm()
    if progress is not None:
        progress(f"profiling {', '.join(f'PID {pid}' for pid in pids)} at {rate:g} Hz"
                 + (f" for {format_duration(duration_s)}" if duration_s else " until Ctrl-C"))
    result.started = time.monotonic()
    _loop(readers, result, rate, duration_s, stop, off_cpu, max_overhead, max_depth, progress, native)


def _loop(readers: dict[int, Reader], result: Profile, rate: float, duration_s: float | None, stop: StopFlag,
          off_cpu: bool, max_overhead: float | None, max_depth: int, progress: Callable[[str], None] | None,
          native: bool = False) -> None:
    asked = 1.0 / rate
    interval = asked
    budget = Budget(max_overhead, wake_latency_s()) if max_overhead is not None else None
    end = result.started + duration_s if duration_s is not None else None
    next_tick = time.monotonic()
    said = time.monotonic()
    several = len(readers) > 1
    while readers and not stop.is_set():
        now = time.monotonic()
        if end is not None and now >= end:
            break
        if now < next_tick:
            stop.wait(min(next_tick, end or next_tick) - now)
            continue
        next_tick = max(next_tick + interval, now)  # a tick that came late is not made up
        result.ticks += 1
        costs = []
        for pid, reader in list(readers.items()):
            try:
                found = _tick(reader, off_cpu, max_depth)
            except Stopped:
                result.stopped_ticks += 1
                continue
            except ProcessNotFound:
                reader.close()
                del readers[pid]
                result.gone.append(pid)
                continue
            root = f"{printable(result.names[pid])} ({pid})" if several else None
            for thread in found:
                _count(result, pid, thread, root, off_cpu, native)
                if thread.stopped_us is not None:
                    result.held_us.append(thread.stopped_us)
                    costs.append(thread.stopped_us)
        if budget is not None and costs:
            cost = statistics.mean(budget.cost_s(us) for us in costs)
            stretched = budget.interval_for(cost, asked, interval)
            if stretched > interval * 1.05 and progress is not None and result.stretched_to_hz is None:
                progress(f"--max-overhead {budget.share * 100:g}%: sampling at {1 / stretched:.0f} Hz instead of "
                         f"{rate:g} (each sample stops a thread about {cost * 1e6:.0f} us)")
            if stretched > asked * 1.05:
                result.stretched_to_hz = min(result.stretched_to_hz or rate, 1 / stretched)
            interval = stretched
        if progress is not None and time.monotonic() - said >= PROGRESS_S:
            said = time.monotonic()
            result.elapsed_s = said - result.started
            progress(f"profile: {result.samples} samples, {len(result.threads)} thread(s), {result.elapsed_s:.0f} s, "
                     f"{result.rate_hz:.0f} ticks/s"
                     + (f", a thread held {statistics.median(list(result.held_us)[-200:]):.0f} us a sample"
                        if result.held_us else ""))


class Stopped(Exception):
    """Every thread of the process is stopped by a signal (SIGSTOP): none runs."""


def _tick(reader: Reader, off_cpu: bool, max_depth: int) -> list[ThreadStack]:
    """The threads of one process this tick: those running (all of them with ``off_cpu``)."""
    if not alive(reader.pid):
        raise ProcessNotFound(f"process {reader.pid} ended")
    tids = procfs.tasks(reader.pid)
    if not off_cpu:
        states = {tid: procfs.thread_state(reader.pid, tid) for tid in tids}
        if states and all(state == "T" for state in states.values()):
            raise Stopped()
        tids = [tid for tid, state in states.items() if state == "R"]
    if not tids:
        return []
    found, _, _ = reader.read(tids, max_depth=max_depth, kernel=False)
    if not off_cpu:  # one that went to sleep before it was read is no sample of where time goes
        found = [thread for thread in found if thread.stopped_us is not None or thread.stack is None
                 or (reader.python == NONBLOCKING and thread.thread.state == "R")]
    return found


def _count(result: Profile, pid: int, found: ThreadStack, root: str | None, off_cpu: bool,
           native: bool = False) -> None:
    result.threads.add((pid, found.thread.tid))
    as_python = python.folded(found.stack, found.python, native)
    if found.stack is None and as_python is None:
        result.unread += 1
        reason = found.how.removeprefix("not read: ")
        result.unread_why[reason] = result.unread_why.get(reason, 0) + 1
        return
    if as_python is not None and found.python is not None and found.python.torn:
        result.torn += 1
    folded = as_python if as_python is not None else found.stack.folded(unknown=True)  # type: ignore[union-attr]
    state = found.thread.state
    if off_cpu and state in ("T", "t"):
        folded += ";[stopped by a signal]" if state == "T" else ";[stopped by a tracer]"
    elif off_cpu and state != "R" and found.thread.syscall is not None and found.thread.syscall.name:
        folded = f"{folded};[{found.thread.syscall.name}]" if folded else f"[{found.thread.syscall.name}]"
    if as_python is None and found.stack is not None and found.stack.ended and found.stack.frames:
        folded = "[unwinding stopped];" + folded  # a partial stack: not under the real root
    if root is not None:
        folded = f"{root};{folded}" if folded else root
    if folded:
        result.stacks[folded] += 1
        result.samples += 1
