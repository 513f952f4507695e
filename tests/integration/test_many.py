"""Many processes in one run (--pid again, --pgrep --all): one tracer, a row per process,
each process's part ending alone, and every process left as it was on every way out."""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sampler.target import procfs
from tests.integration.targets import (
    BIN,
    ROOT,
    Target,
    assert_code_matches_files,
    assert_csv_whole,
    code_differs,
    finish,
    one_line_error,
    read_counter,
    read_csv,
    sampler,
    start_sampler,
    unique_name,
    wait_for_rows,
    wait_until_patched,
)


def pids(*targets: Target) -> list[str]:
    return [arg for target in targets for arg in ("--pid", str(target.pid))]


def pids_so_far(out: Path) -> list[str]:
    """The pid column of the rows a running sampler has written whole so far."""
    if not out.exists():
        return []
    text = out.read_text()
    lines = text.splitlines()[1:] if text.endswith("\n") else text.splitlines()[1:-1]
    return [line.split(",")[3] for line in lines]


def untouched(*targets: Target) -> None:
    for target in targets:
        target.assert_untouched()
        assert_code_matches_files(target.pid)


def test_attach_samples_every_process_at_each_tick(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN three ring buffers
    targets = [start_target("ringbuf-c") for _ in range(3)]
    out = tmp_path / "s.csv"
    # WHEN one run samples all three at a breakpoint, 4 ticks
    result = sampler("attach", "--backend", "ptrace", *pids(*targets), "--at", "ring_read",
                     "--expr", "delta=b->w - b->r", "--interval", "100ms", "--count", "12", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    # THEN a row per process per tick, each with its own pid, each a hit of that process
    assert collections.Counter(row["pid"] for row in rows) == {str(t.pid): 4 for t in targets}
    assert [row["pid"] for row in rows[:3]] == [str(t.pid) for t in targets]  # the order given, each tick
    for row in rows:
        assert not row["error"], row
        assert 0 <= int(row["delta"]) <= 20000
        assert row["thread"] and 0 < float(row["pause_us"]) < 1e6
    assert "sampling 3 processes (PID" in result.stderr
    assert result.stderr.count("debug info in the file itself") == 1, result.stderr  # said once, not per process
    untouched(*targets)


def test_trace_counts_every_call_of_each_process(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN three programs whose 2 threads call hot() 200 times each once its breakpoint is in
    targets = [start_target("callers", "2", "200", "hot") for _ in range(3)]
    out = tmp_path / "t.csv"
    # WHEN one run traces hot() in all three
    proc = start_sampler("trace", "--backend", "ptrace", *pids(*targets), "--at", "hot", "--expr", "i",
                         "--duration", "120s", "--out", str(out), "--quiet")
    for target in targets:
        target.wait_for(lambda t=target: any(line.startswith("done calls=") for line in t.lines), 60,
                        "the target did not finish its calls")
    wait_for_rows(out, proc, 1200)
    time.sleep(0.2)  # and none after
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    # THEN each process's rows are exactly the calls it counted itself
    made = {str(t.pid): int(next(line for line in t.lines if line.startswith("done calls=")).split("=")[1])
            for t in targets}
    counted = collections.Counter(row["pid"] for row in assert_csv_whole(out))
    assert made == {str(t.pid): 400 for t in targets}
    assert counted == made, (counted, stderr)
    assert "missed" not in stderr
    for target in targets:
        assert_code_matches_files(target.pid)


def test_pgrep_all_takes_every_match(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN two ring buffers started as one program
    name = unique_name("rbc-O0")  # its own name: nothing else on the machine matches
    targets = [start_target("ringbuf-c-O0", as_name=name) for _ in range(2)]
    out = tmp_path / "z.csv"
    # WHEN --pgrep matches both: without --all, one line naming them; with it, both sampled (zero-stop)
    one = sampler("attach", "--pgrep", f"^{name}$", "--expr", "ring.w", "--count", "2")
    assert one.returncode == 2 and "--all" in one_line_error(one)
    result = sampler("attach", "--pgrep", f"^{name}$", "--all", "--expr", "w=ring.w",
                     "--interval", "100ms", "--count", "6", "--out", str(out))
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    # THEN three rows of each, their values the write index of each (growing)
    assert collections.Counter(row["pid"] for row in rows) == {str(t.pid): 3 for t in targets}
    for target in targets:
        written = [int(row["w"]) for row in rows if row["pid"] == str(target.pid)]
        assert written == sorted(written) and written[-1] > written[0] > 0, written
    # AND counted in sampler by process
    counted = sampler("attach", "--pgrep", f"^{name}$", "--all", "--expr", "w=ring.w", "--interval", "100ms",
                      "--count", "6", "--count-by", "pid", "--quiet")
    assert counted.returncode == 0, counted.stderr
    assert "@pid (2 processes):" in counted.stdout
    assert {line.split()[0]: line.split()[1] for line in counted.stdout.splitlines()[1:] if line.strip()} == \
        {str(t.pid): "3" for t in targets}, counted.stdout
    untouched(*targets)


def test_a_process_that_exits_ends_only_its_part(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN two ring buffers sampled at 10 Hz in one run
    first, second = start_target("ringbuf-c"), start_target("ringbuf-c")
    out = tmp_path / "e.csv"
    proc = start_sampler("attach", "--backend", "ptrace", *pids(first, second), "--at", "ring_read",
                         "--expr", "delta=b->w - b->r", "--interval", "100ms", "--duration", "60s",
                         "--out", str(out), "--quiet")
    wait_for_rows(out, proc, 6)
    # WHEN one of them is killed
    first.proc.kill()
    first.proc.wait(5)
    before = len(pids_so_far(out))
    wait_for_rows(out, proc, before + 10)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    # THEN its part ends with one line, the other's goes on, and the run ends as asked
    assert proc.returncode == 0, stderr
    assert f"PID {first.pid}: target process {first.pid} exited" in stderr, stderr
    assert "sampling goes on in 1 other process(es)" in stderr
    rows = assert_csv_whole(out)
    after = rows[before + 4:]  # the tick it died in may still have its row
    assert after and all(row["pid"] == str(second.pid) for row in after), after[:3]
    assert all(not row["error"] for row in after)
    untouched(second)


def test_a_process_that_cannot_be_sampled_is_left_out(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a ring buffer and a PID that is no process
    target = start_target("ringbuf-c")
    missing = 4_000_000
    # WHEN both are given
    result = sampler("attach", "--backend", "ptrace", *pids(target), "--pid", str(missing), "--at", "ring_read",
                     "--expr", "b->w", "--count", "2", "--out", str(tmp_path / "m.csv"))
    # THEN the missing one is said in one line, the other sampled
    assert result.returncode == 0, result.stderr
    assert f"PID {missing}: no process with PID {missing}; not sampled" in result.stderr
    assert {row["pid"] for row in assert_csv_whole(tmp_path / "m.csv")} == {str(target.pid)}
    # AND with none that can be, one line and a non-zero exit
    none = sampler("attach", "--pid", str(missing), "--pid", str(missing + 1), "--expr", "x", "--count", "1")
    assert none.returncode != 0 and "none of the 2 processes can be sampled" in one_line_error(none)
    untouched(target)


def test_delve_is_refused_for_several_processes(start_target: Callable[..., Target]) -> None:
    target = start_target("ringbuf-c")
    result = sampler("attach", "--backend", "delve", *pids(target), "--pid", "1", "--expr", "x")
    assert result.returncode == 2
    assert "several processes need the ptrace backend" in one_line_error(result)
    untouched(target)


def test_the_guardian_restores_every_process_when_the_worker_is_killed(
        start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN three processes, each with a breakpoint that stays in (never hit)
    targets = [start_target("ringbuf-c") for _ in range(3)]
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "attach", "--backend", "ptrace", *pids(*targets),
                             "--at", "never", "--expr", "b->w", "--hit-timeout", "20s",
                             "--out", str(tmp_path / "k.csv"), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while not all(code_differs(t.pid) for t in targets):
        assert proc.poll() is None and time.monotonic() < deadline, "the breakpoints never went in"
        time.sleep(0.05)
    # WHEN its tracing worker is killed with SIGKILL
    worker = procfs.children(proc.pid)[0]
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(10) == 128 + signal.SIGKILL
    assert proc.stderr is not None
    said = proc.stderr.read()
    proc.stderr.close()
    assert "every process of the run" in said and "sampler repair --all" in said, said
    # THEN the guardian put every byte back in every process, and none is traced or stopped
    for target in targets:
        target.wait_for(lambda t=target: not code_differs(t.pid), 5, "the guardian did not restore the code")
    untouched(*targets)


def test_wait_us_of_a_trace_of_many_is_the_wait_for_the_hit(start_target: Callable[..., Target],
                                                             tmp_path: Path) -> None:
    # GIVEN two programs that call tick() once a second each
    targets = [start_target("ringbuf-c") for _ in range(2)]
    out = tmp_path / "t.csv"
    # WHEN one run traces both
    result = sampler("trace", *pids(*targets), "--at", "tick", "--max-events", "5", "--out", str(out), "--quiet")
    # THEN each row's wait is the time since the row before (hits 0-1 s apart), not the microseconds
    # its process's turn took (10-30 us before)
    assert result.returncode == 0, result.stderr
    waits = sorted(float(row["wait_us"]) for row in assert_csv_whole(out))
    assert len(waits) == 5
    assert waits[len(waits) // 2] > 20_000, waits
    assert all(wait < 2_000_000 for wait in waits), waits
    untouched(*targets)


def test_ctrl_c_during_a_trace_of_many_leaves_every_process_clean(start_target: Callable[..., Target],
                                                                 tmp_path: Path) -> None:
    # GIVEN three ring buffers traced at their hot read function
    targets = [start_target("ringbuf-c") for _ in range(3)]
    out = tmp_path / "c.csv"
    proc = start_sampler("trace", "--backend", "ptrace", *pids(*targets), "--at", "ring_read",
                         "--expr", "r=b->r", "--duration", "60s", "--out", str(out), "--quiet")
    wait_for_rows(out, proc, 3000)
    # WHEN it is stopped with Ctrl-C
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    # THEN exit 0, rows of all three, and every process running, untraced, its code as its file
    assert proc.returncode == 0, stderr
    assert {row["pid"] for row in assert_csv_whole(out)} == {str(t.pid) for t in targets}
    untouched(*targets)


def test_follow_forks_traces_every_child_from_its_first_instruction(start_target: Callable[..., Target],
                                                                   tmp_path: Path) -> None:
    # GIVEN a program that forks a child every 20 ms; each child calls child_only(i) three times
    target = start_target("forker", "fork", "20", "60")
    out = tmp_path / "f.csv"
    # WHEN child_only is traced for 2 s with --follow-forks (the parent never calls it)
    result = sampler("trace", "--backend", "ptrace", "--pid", str(target.pid), "--at", "child_only",
                     "--expr", "i", "--follow-forks", "--duration", "2s", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    rows = assert_csv_whole(out)
    per_child = collections.defaultdict(list)
    for row in rows:
        per_child[row["pid"]].append(int(row["i"]))
    # THEN every child forked during the run has its three calls, with its own pid and its own i
    assert str(target.pid) not in per_child
    assert len(per_child) >= 20, len(per_child)
    whole = [calls for calls in per_child.values() if len(calls) == 3]
    assert len(whole) >= len(per_child) - 2, per_child  # the first and the last may be cut by the run's ends
    assert all(len(set(calls)) == 1 for calls in per_child.values())
    assert len({calls[0] for calls in per_child.values()}) == len(per_child)  # one child per i
    # AND the children lived their lives: none went bad, the parent untouched
    target.proc.send_signal(signal.SIGUSR1)
    target.wait_for(lambda: any(line.startswith("children forked=") for line in target.lines), 30,
                    "the forker did not finish")
    summary = next(line for line in target.lines if line.startswith("children forked="))
    assert summary.endswith("bad=0"), target.lines[-8:]


def test_exe_takes_in_a_process_that_starts_during_the_run(start_target: Callable[..., Target],
                                                           tmp_path: Path) -> None:
    # GIVEN a program file of its own, one process running it
    program = tmp_path / "ring"
    shutil.copy(BIN / "ringbuf-c", program)
    first = start_target(str(program), binary=False)
    out = tmp_path / "x.csv"
    proc = start_sampler("attach", "--exe", str(program), "--at", "ring_read", "--expr", "delta=b->w - b->r",
                         "--interval", "200ms", "--duration", "60s", "--out", str(out))
    wait_for_rows(out, proc, 3)
    # WHEN a second process starts running it
    second = start_target(str(program), binary=False)
    started = time.monotonic()
    deadline = started + 20
    while str(second.pid) not in pids_so_far(out):
        assert time.monotonic() < deadline and proc.poll() is None, "the new process was not taken in"
        time.sleep(0.05)
    taken_in_s = time.monotonic() - started
    wait_for_rows(out, proc, len(pids_so_far(out)) + 6)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    # THEN it was sampled too, from the tick after it started, each tick a row of each process
    assert proc.returncode == 0, stderr
    assert f"PID {second.pid} started running {program} " in stderr
    assert "ms ago: sampling it too from now (its calls before were not traced)" in stderr  # sampling: no connector
    assert "--exe: 1 process(es) joined the run after they started" in stderr
    assert taken_in_s < 5, taken_in_s  # an interval and the parse of its program, with room for a busy host
    rows = assert_csv_whole(out)
    since = [row["pid"] for row in rows[[row["pid"] for row in rows].index(str(second.pid)):]]
    assert abs(since.count(str(first.pid)) - since.count(str(second.pid))) <= 1, since
    untouched(first, second)


def test_exe_marks_the_processes_that_joined_late(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a program of its own that calls strlen 500 times at each SIGUSR1, traced with --exe
    program = tmp_path / "calls"
    shutil.copy(BIN / "ifuncs", program)
    first = start_target(str(program), "strlen", "500", binary=False)
    out = tmp_path / "calls.csv"
    proc = start_sampler("trace", "--exe", str(program), "--at", "libc:strlen", "--out", str(out))
    wait_until_patched(first.pid)
    # WHEN 4 processes start during the run, each with a burst at once (before it can have
    # joined) and one 2 s later
    late = []
    for _ in range(4):
        target = start_target(str(program), "strlen", "500", binary=False)
        target.proc.send_signal(signal.SIGUSR1)
        target.wait_for(lambda t=target: read_counter(t, "bursts") == 1, 20, "no first burst")  # type: ignore[misc]
        time.sleep(2)
        target.proc.send_signal(signal.SIGUSR1)
        target.wait_for(lambda t=target: read_counter(t, "bursts") == 2, 20, "no second burst")  # type: ignore[misc]
        late.append(target)
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    # THEN each one's second burst is whole, and a first burst missed is said: every late process
    # is named as joining from then on, and the summary counts them
    assert proc.returncode in (0, 130), stderr
    rows = collections.Counter(row["pid"] for row in read_csv(out))
    for target in late:
        assert 500 <= rows[str(target.pid)] <= 1000, (rows, stderr)
        assert f"PID {target.pid} started running {program} " in stderr
    assert "--exe: 4 process(es) joined the run after they started" in stderr
    assert "the calls they made before were missed" in stderr
    for target in [first, *late]:
        assert_code_matches_files(target.pid)


def test_exe_accounts_for_every_process_that_ran_the_program(start_target: Callable[..., Target],
                                                             tmp_path: Path) -> None:
    # GIVEN a trace of a program's function with --exe, one process of it running (its modules read)
    program = tmp_path / "shortlived"
    shutil.copy(BIN / "shortlived", program)
    keeper = subprocess.Popen([str(program), "600000", "1", "0"])
    out = tmp_path / "calls.csv"
    proc = start_sampler("trace", "--exe", str(program), "--at", "counted", "--out", str(out))
    try:
        wait_until_patched(keeper.pid)
        # WHEN it is started 20 times, one after the other, as a psql per query: 10 processes that
        # live 160 ms (10 calls from 150 ms after their start, 1 ms apart) and 10 that make the same
        # calls 800 ms after theirs. Before the kernel told sampler of each exec, /proc was looked at
        # every 0.2 s: a short one was missed 1 time in 4, and counted nowhere
        made: dict[str, tuple[int, bool]] = {}
        for i in range(20):
            short = i % 2 == 0
            run = subprocess.Popen([str(program), "150" if short else "800", "10", "1"], stdout=subprocess.PIPE,
                                   text=True)
            said, _ = run.communicate(timeout=30)
            assert run.returncode == 0, said
            made[str(run.pid)] = (int(said.strip().removeprefix("calls=")), short)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = finish(proc)
        keeper.kill()
        keeper.wait()
    # THEN every one of the 20 is said: joined (how long after its exec) or gone before it could
    # join; a long one joined long before its first call, so each of its calls is a row; no
    # process has more rows than it made calls
    assert proc.returncode in (0, 130), stderr
    rows = collections.Counter(row["pid"] for row in read_csv(out))
    joined = {pid for pid in made if f"PID {pid} started running {program} " in stderr}
    assert all("ms ago (its exec)" in line for line in stderr.splitlines() if "sampling it too" in line), stderr
    summary = re.search(r"--exe: (\d+) process\(es\) joined the run after they started.*?"
                        r"(?:; (\d+) found were gone before they could join|$)", stderr, re.M)
    assert summary is not None, stderr
    gone = int(summary.group(2) or 0)
    assert int(summary.group(1)) == len(joined) and len(joined) + gone == 20, (joined, stderr)
    for pid, (calls, short) in made.items():
        assert calls == 10 and rows[pid] <= calls, (pid, rows, stderr)
        if not short:
            assert pid in joined and rows[pid] == calls, (pid, rows, stderr)
    assert set(rows) <= set(made), rows
    assert "each process was looked at when the kernel told of its exec" in stderr, stderr


def test_exe_refuses_a_program_nobody_runs(tmp_path: Path) -> None:
    program = tmp_path / "idle"
    shutil.copy(BIN / "ringbuf-c", program)
    result = sampler("attach", "--exe", str(program), "--expr", "x")
    assert "no process runs it" in one_line_error(result)
    assert "no such program file" in one_line_error(sampler("attach", "--exe", str(tmp_path / "none"),
                                                            "--expr", "x"))


def test_exe_with_user_takes_in_only_that_users_processes(start_target: Callable[..., Target],
                                                         tmp_path: Path) -> None:
    # GIVEN a program file any user may run, run by root and by nobody (who could plant theirs in a run)
    from tests.integration.test_permissions import NOBODY
    os.chmod(tmp_path, 0o755)
    program = tmp_path / "ring"
    shutil.copy(BIN / "ringbuf-c", program)
    roots = start_target(str(program), binary=False)
    theirs = start_target(*NOBODY, str(program), binary=False)
    idle = tmp_path / "idle"
    shutil.copy(BIN / "ringbuf-c", idle)
    for user, wanted, other in (("root", roots, theirs), ("65534", theirs, roots)):
        # WHEN --exe is limited to one user
        out = tmp_path / f"{user}.csv"
        result = sampler("attach", "--exe", str(program), "--user", user, "--at", "ring_read", "--expr",
                         "delta=b->w - b->r", "--interval", "100ms", "--count", "6", "--out", str(out), "--quiet")
        # THEN only that user's process is sampled (6 rows, its pid), the other never traced
        assert result.returncode == 0, result.stderr
        rows = assert_csv_whole(out)
        assert {row["pid"] for row in rows} == {str(wanted.pid)}, rows
        assert len(rows) == 6
        assert str(other.pid) not in result.stderr
    untouched(roots, theirs)
    # AND a user who runs none of it, an unknown user and --user without --exe are one line each
    assert "no process of user 0 runs it" in one_line_error(
        sampler("attach", "--exe", str(idle), "--user", "root", "--expr", "x"))
    assert "--user nosuch: no such user" in one_line_error(
        sampler("attach", "--exe", str(program), "--user", "nosuch", "--expr", "x"))
    assert "--user goes with --exe" in one_line_error(
        sampler("attach", "--pid", str(roots.pid), "--user", "root", "--expr", "x"))


def test_a_pre_fork_server_is_traced_whole_with_its_respawned_workers(start_target: Callable[..., Target],
                                                                      tmp_path: Path) -> None:
    # GIVEN a pre-fork server (its own program file) with 4 workers calling handle(n), n counting
    program = tmp_path / "pool"
    shutil.copy(BIN / "pool", program)
    pool = start_target(str(program), "4", "1000", binary=False)
    out = tmp_path / "p.csv"
    # WHEN every process of the program is traced, following forks
    proc = start_sampler("trace", "--exe", str(program), "--follow-forks", "--at", "handle", "--expr", "n",
                         "--duration", "120s", "--out", str(out), "--quiet")
    old = procfs.children(pool.pid)
    deadline = time.monotonic() + 30
    while set(pids_so_far(out)) != {str(pid) for pid in old}:
        assert time.monotonic() < deadline and proc.poll() is None, "not every worker was traced"
        time.sleep(0.05)
    # AND two workers end mid-run (the server forks two new ones), then the server stops
    for pid in old[:2]:
        os.kill(pid, signal.SIGUSR1)
    pool.wait_for(lambda: sum(line.startswith("spawned pid=") for line in pool.lines) == 2, 10, "no respawn")
    spawned = [line.split("=")[1] for line in pool.lines if line.startswith("spawned pid=")]
    deadline = time.monotonic() + 30
    while not set(spawned) <= set(pids_so_far(out)):
        assert time.monotonic() < deadline and proc.poll() is None, "the new workers were not traced"
        time.sleep(0.05)
    time.sleep(0.5)
    pool.proc.send_signal(signal.SIGTERM)
    pool.wait_for(lambda: any(line.startswith("pool done") for line in pool.lines), 10, "the pool did not end")
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    assert proc.returncode == 0, stderr
    # THEN each new worker's rows are every one of its calls, from its first (n = 0); each old
    # worker's are every call from the moment sampler came, none missed; no worker went bad
    assert pool.lines[-1] == "pool done bad=0", pool.lines[-8:]
    handled = {line.split()[1]: int(line.split()[3]) for line in pool.lines if line.startswith("worker ")}
    per_pid: dict[str, list[int]] = collections.defaultdict(list)
    for row in assert_csv_whole(out):
        per_pid[row["pid"]].append(int(row["n"]))
    assert set(per_pid) == {str(pid) for pid in old} | set(spawned)
    for pid, calls in per_pid.items():
        assert calls == list(range(calls[0], handled[pid])), (pid, calls[:3], calls[-3:], handled[pid])
        if pid in spawned:
            assert calls[0] == 0, (pid, calls[:3])
    assert "missed" not in stderr, stderr


def test_the_guardian_restores_followed_children_too(start_target: Callable[..., Target], tmp_path: Path) -> None:
    # GIVEN a pre-fork server whose every process holds a breakpoint that stays in (never hit),
    # one worker forked during the run (followed, armed from its first instruction)
    program = tmp_path / "pool"
    shutil.copy(BIN / "pool", program)
    pool = start_target(str(program), "3", "2000", binary=False)
    proc = subprocess.Popen([sys.executable, "-m", "sampler", "trace", "--exe", str(program), "--follow-forks",
                             "--at", "never", "--out", str(tmp_path / "g.csv"), "--quiet"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    everyone = [pool.pid, *procfs.children(pool.pid)]
    deadline = time.monotonic() + 30
    while not all(code_differs(pid) for pid in everyone):
        assert proc.poll() is None and time.monotonic() < deadline, "the breakpoints never went in"
        time.sleep(0.05)
    os.kill(everyone[1], signal.SIGUSR1)
    pool.wait_for(lambda: any(line.startswith("spawned pid=") for line in pool.lines), 10, "no respawn")
    child = int(next(line for line in pool.lines if line.startswith("spawned pid=")).split("=")[1])
    deadline = time.monotonic() + 10
    while not code_differs(child):
        assert time.monotonic() < deadline, "the new worker was not armed"
        time.sleep(0.02)
    # WHEN the tracing worker is killed with SIGKILL
    worker = procfs.children(proc.pid)[0]
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(10) == 128 + signal.SIGKILL
    assert proc.stderr is not None
    proc.stderr.close()
    # THEN every process, the followed child too, has its code back, untraced, and works on
    alive = [pid for pid in everyone if pid != everyone[1]] + [child]
    for pid in alive:
        pool.wait_for(lambda p=pid: not code_differs(p), 5, f"the guardian did not restore PID {pid}")
        status = Path(f"/proc/{pid}/status").read_text()
        assert "TracerPid:\t0" in status and "State:\tT" not in status, status
    pool.more_throughput(1)
    pool.proc.send_signal(signal.SIGTERM)
    pool.wait_for(lambda: any(line.startswith("pool done") for line in pool.lines), 10, "the pool did not end")
    assert pool.lines[-1] == "pool done bad=0", pool.lines[-8:]
