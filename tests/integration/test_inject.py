"""The target's own system calls made for sampler (issue 36, the first part: process/inject.py
and areas.py): the code and data pages of in-process probes made, named, shared and taken away by a
thread of the target, stopped for it, whose own system call then goes on as if nothing happened."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sampler.process import calls
from sampler.process.areas import REACH, Areas
from sampler.process.inject import Injector, find_syscall
from sampler.process.memory import Memory
from sampler.process.restart import restart_ended_call
from sampler.process.tasks import PTRACE_INTERRUPT, PTRACE_SEIZE, WALL
from sampler.target import procfs
from tests.integration.targets import Target, read_counter

PTRACE_DETACH = 17


def stopped_thread(tid: int, memory: Memory) -> str | None:
    """Stopped by sampler's interrupt, as the tracer stops one; its call made again when the stop ended it."""
    assert calls.ptrace(PTRACE_SEIZE, tid, None, None) != -1
    assert calls.ptrace(PTRACE_INTERRUPT, tid, None, None) != -1
    waited, status = os.waitpid(tid, WALL)
    assert waited == tid and os.WIFSTOPPED(status)
    return restart_ended_call(tid, calls.get_registers(tid))


def syscall_of(pid: int, tid: int) -> str:
    return Path(f"/proc/{pid}/task/{tid}/syscall").read_text().split()[0]


def test_pages_made_named_shared_and_taken_away_by_a_thread_in_epoll_wait(
        start_target: Callable[..., Target]) -> None:
    # GIVEN a program whose threads count the EINTRs their blocking calls get
    target = start_target("eintr")
    target.wait_for(lambda: any(syscall_of(target.pid, int(t)) == "232"
                                for t in os.listdir(f"/proc/{target.pid}/task")), 5, "no thread in epoll_wait")
    tid = next(int(t) for t in os.listdir(f"/proc/{target.pid}/task") if syscall_of(target.pid, int(t)) == "232")
    memory = Memory(target.pid, writable=True)
    before = Path(f"/proc/{target.pid}/maps").read_text()
    main = min(m.start for m in procfs.maps(target.pid) if m.executable)
    # WHEN its thread blocked in epoll_wait is stopped and makes the calls that map sampler's pages
    assert stopped_thread(tid, memory) == "epoll_wait"  # (the stop ended it: made again as it goes on)
    try:
        injector = Injector(tid, find_syscall(target.pid, memory.read))
        areas = Areas(target.pid, injector, memory)
        code = areas.code_page(main)
        data = areas.data_area(code.address, 1 << 20)
        areas.close()
        # THEN each is named in the process's maps, within a rel32 jump of the program's code
        maps = Path(f"/proc/{target.pid}/maps").read_text()
        assert f"{code.address:x}-" in maps and "r-xs" in maps and "/memfd:sampler-code" in maps
        assert "/memfd:sampler-data" in maps and abs(code.address - main) < REACH
        assert len(os.listdir(f"/proc/{target.pid}/fd")) == len(os.listdir(f"/proc/{target.pid}/fd"))
        # AND what sampler writes in the shared area, the target reads; the code page is sampler's to write
        assert data.local is not None and code.local is not None
        data.local[0:6] = b"shared"
        assert memory.read(data.address, 6) == b"shared"
        code.local[0:2] = b"\xc3\x90"
        assert memory.read(code.address, 2) == b"\xc3\x90"
        # AND taken away, nothing of them is left
        areas.remove(data)
        areas.remove(code)
        assert Path(f"/proc/{target.pid}/maps").read_text() == before
        assert not any("memfd:sampler" in os.readlink(f"/proc/{target.pid}/fd/{fd}")
                       for fd in os.listdir(f"/proc/{target.pid}/fd"))
    finally:
        calls.ptrace(PTRACE_DETACH, tid, None, None)
    # AND the thread went back into its epoll_wait: the program saw no EINTR
    target.wait_for(lambda: syscall_of(target.pid, tid) == "232", 5, "the thread is not back in epoll_wait")
    assert read_counter(target, "eintrs") == 0
    target.assert_untouched()


def test_a_jump_counts_every_call_of_eight_threads_exactly_in_a_process_sampler_does_not_trace(
        start_target: Callable[..., Target]) -> None:
    # GIVEN 8 threads that call warm() 200,000 times each once its first bytes change
    from contextlib import contextmanager

    from sampler.backends.ptrace.inprocess import Inprocess, plan
    from sampler.debuginfo.debugfiles import DebugFinder
    from sampler.debuginfo.modules import Modules
    from sampler.process.freeze import every_thread_held
    from sampler.process.patchtable import ProbeTable
    from sampler.process.stats import TracerStats
    from tests.integration.targets import assert_code_matches_files
    target = start_target("callers", "8", "200000", "warm")
    modules = Modules(target.pid, DebugFinder(target.pid, (), lambda _: None, lambda _: None))
    symbol = modules.main.symbol("warm")
    assert symbol is not None
    start = symbol.address + modules.main.bias
    modules.close()
    memory = Memory(target.pid, writable=True)

    @contextmanager
    def hold(tids: list[int] | None):  # type: ignore[no-untyped-def]
        with every_thread_held(target.pid) as held:  # (sampler does not trace it: freeze.py's holds)
            yield list(held)

    planned = plan(memory, start, symbol.size, start)
    assert planned.displaced is not None and planned.entry
    probes: Inprocess[str] = Inprocess(target.pid, memory, ProbeTable(target.pid, memory, None, None, TracerStats()),
                                       hold)
    # WHEN a jump goes in at its entry (every thread stopped meanwhile)
    assert probes.put([("warm", planned.displaced, True)]) == {}
    try:
        maps = Path(f"/proc/{target.pid}/maps").read_text()
        assert "/memfd:sampler-code" in maps and "/memfd:sampler-data" in maps
        # THEN every call is counted, by the program's own count
        target.wait_for(lambda: any(line.startswith("done") for line in target.lines), 60, "the calls never ended")
        assert "done calls=1600000" in target.lines
        probes.drain()
        assert probes.counts[0].hits == 1_600_000
        assert probes.counts[0].recorded + probes.ring.drops(0) == 1_600_000  # type: ignore[union-attr]
        # AND taken out, the code is the file's again and sampler's pages are gone
        probes.take_out()
    finally:
        probes.close()
        memory.close()
    assert_code_matches_files(target.pid)
    assert "memfd:sampler" not in Path(f"/proc/{target.pid}/maps").read_text() and probes.left == ""
    assert procfs.tracer_pid(target.pid) == 0
