"""`sampler stack`: every thread's stack of real processes, checked frame by frame where the stacks
are known (targets/stacks in C, C++, Rust and Go), and beside gdb's `thread apply all bt` of the same
stopped process for programs nobody here wrote (Debian's redis-server, nginx, python3 and
prometheus-node-exporter). Nothing a test reads is left stopped or traced."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.gdbstacks import compare, gdb_stacks, named, sampler_stacks
from tests.integration.targets import Target, one_line_error, read_counter, sampler, start_redis, unused_pid
from tests.integration.test_services import start_nginx, stop_nginx

CI = bool(os.environ.get("CI"))


def need(tool: str) -> None:
    """Under CI every tool make setup installs must be there; elsewhere a test without it is skipped."""
    if shutil.which(tool) is None:
        if CI:
            pytest.fail(f"{tool} is missing: make setup installs it")
        pytest.skip(f"{tool} is missing (make setup installs it)")


def stacks_of(pid: int, *options: str) -> dict[str, Any]:
    result = sampler("stack", "--pid", str(pid), "--format", "json", *options)
    assert result.returncode == 0, result.stderr
    [process] = [json.loads(line) for line in result.stdout.splitlines()]
    return process


def by_name(process: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {thread["name"]: thread for thread in process["threads"]}


def functions(thread: dict[str, Any], module: str | None = None) -> list[str]:
    return [f["function"] for f in thread["frames"] if module is None or f["module"] == module]


def test_c_threads_frame_by_frame(start_target: Callable[..., Target]) -> None:
    # GIVEN a C program whose threads wait where they were written to wait
    target = start_target("stacks")
    # WHEN their stacks are read
    process = stacks_of(target.pid)
    threads = by_name(process)
    # THEN each is what the program's source says, innermost first, to start_thread and clone3
    assert set(threads) == {"stacks", "waiter", "recurse", "reader", "spinner", "handler"}
    for thread in threads.values():
        assert thread["ended"] is None, thread
        if thread["name"] != "stacks":
            assert functions(thread)[-2:] == ["start_thread", "clone3"], thread
    assert functions(threads["waiter"], "stacks") == ["level3", "level2", "level1", "waiter_main"]
    assert functions(threads["waiter"])[0] in ("futex_wait", "__lll_lock_wait")  # glibc's, by its DWARF
    assert "pthread_mutex_lock" in functions(threads["waiter"], "libc.so.6")
    level3 = next(f for f in threads["waiter"]["frames"] if f["function"] == "level3")
    assert level3["file"].endswith("stacks.c")
    assert level3["line"] == source_line("stacks/stacks.c", "pthread_mutex_lock(&held)")
    assert functions(threads["recurse"], "stacks") == ["sleep_for_good", "bottom", *["recurse"] * 11, "recurse_main"]
    assert functions(threads["reader"], "stacks") == ["read_input", "reader_main"]
    assert "read" in functions(threads["reader"], "libc.so.6")
    spinner = functions(threads["spinner"], "stacks")
    assert spinner[-2:] == ["spin", "spinner_main"] and spinner[0] in ("hot", "cold", "spin"), spinner
    # the signal handler's frames, the kernel's signal frame, then the frames it interrupted
    handler = functions(threads["handler"])
    assert handler[2:] == ["sleep_for_good", "handler_sleep", "on_signal", "<signal handler called>", "syscall",
                           "in_signal_wait", "handler_main", "start_thread", "clone3"], handler
    main = functions(threads["stacks"])
    assert main[:2] == ["clock_nanosleep", "nanosleep"] and "main" in main and main[-1] == "_start", main
    # AND the target goes on: nothing left stopped or traced
    target.assert_untouched()


def source_line(path: str, text: str) -> int:
    lines = (Path(__file__).resolve().parents[2] / "targets" / path).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line)


def test_cpp_threads_frame_by_frame(start_target: Callable[..., Target]) -> None:
    target = start_target("stacks-cpp")
    threads = by_name(stacks_of(target.pid))
    waiter = functions(threads["waiter"], "stacks-cpp")
    # std::mutex::lock and std::lock_guard are inlined into level3, as gdb shows them
    assert waiter[:3] == ["__gthread_mutex_lock", "std::mutex::lock", "std::lock_guard<std::mutex>::lock_guard"]
    assert waiter[3:6] == ["st::Chain::level3", "st::Chain::level2", "st::Chain::level1"], waiter
    assert [f["inlined"] for f in threads["waiter"]["frames"] if f["module"] == "stacks-cpp"][:4] == \
        [True, True, True, False]
    recurse = functions(threads["recurse"], "stacks-cpp")
    assert recurse[:3 + 11] == ["st::sleep_for_good", "st::bottom", *["st::recurse<int>"] * 11, "operator()"][:14]
    assert functions(threads["reader"], "stacks-cpp")[0] == "st::Input::read_input"
    assert "st::spin" in functions(threads["spinner"], "stacks-cpp")
    assert all(t["ended"] is None for t in threads.values())
    target.assert_untouched()


def test_rust_threads_frame_by_frame(start_target: Callable[..., Target]) -> None:
    target = start_target("stacks-rust")
    threads = by_name(stacks_of(target.pid))
    # Rust's names demangled (std's are v0 names: _RNvNtNtCs..._3std6thread9functions5sleep)
    own = lambda name: [f for f in functions(threads[name], "stacks-rust") if f.startswith("main::")]  # noqa: E731
    assert own("waiter") == ["main::level3", "main::level2", "main::level1"]
    assert own("recurse") == ["main::bottom", *["main::recurse"] * 11, "main::main::{{closure}}"]
    assert own("reader") == ["main::read_input", "main::main::{{closure}}"]
    assert own("spinner")[-1] == "main::spin"
    assert "std::thread::functions::sleep" in functions(threads["recurse"])
    assert not [f for t in threads.values() for f in functions(t) if f and f.startswith(("_R", "_ZN"))]
    assert all(t["ended"] is None for t in threads.values())
    assert functions(threads["waiter"])[-2:] == ["start_thread", "clone3"]
    target.assert_untouched()


def test_go_goroutines_frame_by_frame(start_target: Callable[..., Target]) -> None:
    # GIVEN a Go program whose goroutines wait on a channel, a mutex, a timer and nothing at all
    target = start_target("stacks-go")
    process = stacks_of(target.pid)
    # THEN each goroutine with its wait reason and stack, as a Go panic prints them
    goroutines = process["goroutines"]
    by_function = {}
    for g in goroutines:
        for frame in g["frames"] or []:
            if frame["function"].startswith("main.") and not frame["function"].startswith("main.main"):
                by_function.setdefault(frame["function"], g)
                break
    channel, mutex, timer = by_function["main.level3"], by_function["main.lockIt"], by_function["main.nap"]
    assert channel["wait_reason"] == "chan receive" and channel["status"] == "waiting"
    assert [f["function"] for f in channel["frames"]] == [
        "runtime.gopark", "runtime.chanrecv", "runtime.chanrecv1", "main.level3", "main.level2", "main.level1",
        "main.main.func1", "runtime.goexit"]
    assert channel["created_by"]["function"] == "main.main"
    assert mutex["wait_reason"] in ("semacquire", "sync.Mutex.Lock")
    assert "sync.(*Mutex).Lock" in [f["function"] for f in mutex["frames"]]
    assert timer["wait_reason"] == "sleep"
    assert [f["function"] for f in timer["frames"]][1:3] == ["time.Sleep", "main.nap"]
    recurse = by_function["main.bottom"]
    assert recurse["wait_reason"] == "select (no cases)"
    assert [f["function"] for f in recurse["frames"]].count("main.recurse") == 11
    main = next(g for g in goroutines if g["goid"] == 1)
    assert main["wait_reason"] == "sleep" and "main.main" in [f["function"] for f in main["frames"]]
    # the spinning goroutine runs on its locked thread: that thread's stack
    spinner = next((g for g in goroutines if g["thread"] is not None and g["frames"]
                    and "main.spin" in [f["function"] for f in g["frames"]]), None)
    # (runnable at the moment Go's scheduler preempted it, on its locked thread still: once in a loaded run)
    assert spinner is not None and spinner["status"] in ("running", "runnable"), goroutines
    assert all(g["frames"] is not None and g["ended"] is None for g in goroutines if g["status"] != "running")
    # AND the OS threads too, each unwound through Go's own table
    assert any("runtime.mstart" in functions(t) for t in process["threads"])
    target.assert_untouched()


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """The process stopped (SIGSTOP) while two tools read it, then let go."""
    os.kill(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 5
        while not all(state(pid, tid) == "T" for tid in os.listdir(f"/proc/{pid}/task")):
            assert time.monotonic() < deadline, "the process did not stop"
            time.sleep(0.01)
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def state(pid: int, tid: str) -> str:
    try:
        return Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(") ", 1)[1][:1]
    except (OSError, IndexError):
        return "T"


def beside_gdb(pid: int) -> tuple[dict[int, list[Any]], dict[int, list[dict[str, object]]]]:
    """gdb's stacks and sampler's of the same stopped process."""
    need("gdb")
    with stopped(pid):
        result = sampler("stack", "--pid", str(pid), "--format", "json")
        assert result.returncode == 0, result.stderr
        gdb = gdb_stacks(pid)
    return gdb, sampler_stacks(result.stdout)


def test_beside_gdb_on_the_c_target(start_target: Callable[..., Target]) -> None:
    target = start_target("stacks")
    gdb, ours = beside_gdb(target.pid)
    assert len(gdb) == 6 and all(len(frames) >= 4 for frames in gdb.values()), gdb
    assert compare(gdb, ours) == []
    target.assert_untouched()


def wait_in_call(tid: int, number: int) -> None:
    """Until the thread is blocked in that system call."""
    deadline = time.monotonic() + 5
    while Path(f"/proc/{tid}/syscall").read_text().split()[0] != str(number):
        assert time.monotonic() < deadline, f"thread {tid} never blocked in system call {number}"
        time.sleep(0.01)


def test_beside_gdb_on_redis_idle_and_in_a_command(start_target: Callable[..., Target]) -> None:
    # GIVEN Debian's redis-server idle in epoll_wait (its background threads in pthread_cond_wait)
    redis, port = start_redis(start_target, "--enable-debug-command", "local")
    wait_in_call(redis.pid, 232)  # epoll_wait
    gdb, ours = beside_gdb(redis.pid)
    assert compare(gdb, ours) == []
    main = ours[redis.pid]
    assert main[0]["function"] == "epoll_wait" and "aeMain" in [f["function"] for f in main]
    # AND during DEBUG SLEEP 5: the main thread in nanosleep under the command
    client = subprocess.Popen(["redis-cli", "-p", str(port), "DEBUG", "SLEEP", "5"], stdout=subprocess.DEVNULL)
    try:
        wait_in_call(redis.pid, 230)  # clock_nanosleep
        gdb, ours = beside_gdb(redis.pid)
        assert compare(gdb, ours) == []
        names = [f["function"] for f in ours[redis.pid]]
        assert "debugCommand" in names and "call" in names and "aeMain" in names, names
    finally:
        client.kill()
        client.wait()
    left_alone(redis.pid)
    assert subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True,
                          timeout=10).stdout.strip() == "PONG"


def left_alone(pid: int) -> None:
    """Not traced, no thread stopped (for a service that idles: its CPU time need not grow)."""
    status = Path(f"/proc/{pid}/status").read_text()
    assert "TracerPid:\t0\n" in status, status
    assert not [tid for tid in os.listdir(f"/proc/{pid}/task") if state(pid, tid) in "Tt"]


def test_beside_gdb_on_nginx_master_and_workers(start_target: Callable[..., Target], tmp_path: Path) -> None:
    nginx, program, _ = start_nginx(start_target, tmp_path)
    try:
        from sampler.target import procfs
        for pid in [nginx.pid, *procfs.children(nginx.pid)]:
            gdb, ours = beside_gdb(pid)
            assert compare(gdb, ours) == []
            names = [f["function"] for f in ours[pid]]
            expected = "ngx_master_process_cycle" if pid == nginx.pid else "ngx_process_events_and_timers"
            assert expected in names and names[-1] == "_start", names
            left_alone(pid)
    finally:
        stop_nginx(nginx, program)


PYTHON_SCRIPT = """
import threading, time
lock = threading.Lock()
lock.acquire()
def waits(): lock.acquire()
def sleeps(): time.sleep(3600)
for body in (waits, sleeps):
    threading.Thread(target=body, daemon=True).start()
print("ready pid=%d" % __import__("os").getpid(), flush=True)
time.sleep(3600)
"""


def test_beside_gdb_on_debians_python3(start_target: Callable[..., Target]) -> None:
    python = "/usr/bin/python3.11"
    if not os.path.exists(python):
        if CI:
            pytest.fail("python3.11 is missing: make setup installs it")
        pytest.skip("Debian's python3.11 is missing (make setup installs it)")
    target = start_target(python, "-c", PYTHON_SCRIPT, binary=False)
    gdb, ours = beside_gdb(target.pid)
    assert len(gdb) == 3
    assert compare(gdb, ours) == []
    for frames in ours.values():  # the interpreter's own functions, named from its symbols
        assert "_PyEval_EvalFrameDefault" in [f["function"] for f in frames], frames


def test_a_stripped_go_daemon_is_named_where_gdb_sees_nothing(start_target: Callable[..., Target],
                                                              tmp_path: Path) -> None:
    # GIVEN Debian's prometheus-node-exporter: stripped, no .symtab, no DWARF; only Go's .gopclntab
    need("prometheus-node-exporter")
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    target = start_target("sh", "-c", f"echo ready pid=$$; exec prometheus-node-exporter "
                          f"--web.listen-address=127.0.0.1:{port} --collector.disable-defaults", binary=False)
    time.sleep(0.5)
    gdb, ours = beside_gdb(target.pid)
    # THEN where gdb shows ?? for the frames it found, sampler names them from Go's table
    sampler_named, unnamed = named(gdb, ours)
    assert (unnamed > 0 and sampler_named == unnamed) or sampler_named >= len(gdb), (sampler_named, unnamed)
    for tid, frames in gdb.items():
        assert ours[tid][0]["pc"] == frames[0].pc and ours[tid][0]["function"].startswith("runtime."), ours[tid][0]
        assert all(f["function"] for f in ours[tid][:4]), ours[tid]
    # AND no goroutines without DWARF, said so
    process = stacks_of(target.pid)
    assert process["goroutines"] is None and any("no DWARF" in note for note in process["notes"])


def test_nothing_is_stopped_that_a_stop_would_interrupt(start_target: Callable[..., Target]) -> None:
    # GIVEN threads blocked for good in epoll_wait, poll and sigtimedwait, counting their EINTRs
    target = start_target("eintr")
    # WHEN their stacks are read, five times, one thread at a time and all at once
    for options in ([], [], ["--consistent"], [], ["--consistent"]):
        process = stacks_of(target.pid, *options)
        for thread in process["threads"]:
            if thread["syscall"] and thread["syscall"]["name"] in ("epoll_wait", "rt_sigtimedwait"):
                assert thread["read"].startswith("not stopped"), thread
                assert thread["frames"], thread
    # THEN none of the calls was interrupted
    assert read_counter(target, "eintrs") == 0
    target.assert_untouched()


def test_the_depth_limit_ends_a_stack_with_the_reason(start_target: Callable[..., Target]) -> None:
    target = start_target("stacks")
    threads = by_name(stacks_of(target.pid, "--max-depth", "5"))
    assert len(threads["recurse"]["frames"]) == 5
    assert threads["recurse"]["ended"] == "deeper than 5 frames (--max-depth)"
    text = sampler("stack", "--pid", str(target.pid), "--max-depth", "5").stdout
    assert "(the stack ends here: deeper than 5 frames (--max-depth))" in text
    target.assert_untouched()


def test_text_reads_as_gdbs(start_target: Callable[..., Target]) -> None:
    target = start_target("stacks")
    result = sampler("stack", "--pid", str(target.pid))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.startswith(f"Process {target.pid} (stacks): 6 thread(s)")
    assert '"waiter" state S: futex(' in text
    assert " in level3+0x" in text and "stacks.c:" in text and "#5  <signal handler called>" in text


def test_a_process_that_is_not_there_is_one_line() -> None:
    line = one_line_error(sampler("stack", "--pid", str(unused_pid())))
    assert "no process with PID" in line


@pytest.mark.parametrize("args, expected", [([], "give the target"),
                                            (["--pid", "1", "--all"], "--all goes with --pgrep")])
def test_the_target_is_asked_for_as_the_other_commands_ask(args: list[str], expected: str) -> None:
    assert expected in one_line_error(sampler("stack", *args))


def test_count_by_ustack_gives_each_caller_its_own_count(start_target: Callable[..., Target]) -> None:
    # GIVEN a program that calls leaf() 300 times from via_a() and 100 times from via_b() once a
    # breakpoint is in leaf(), counting each itself
    target = start_target("stacks", "callers", "300", "100")
    # WHEN every call is traced and counted by its stack, as bpftrace's @[ustack] = count()
    result = sampler("trace", "--pid", str(target.pid), "--at", "leaf", "--max-events", "400",
                     "--count-by", "ustack(2)", "--quiet")
    assert result.returncode == 0, result.stderr
    target.wait_for(lambda: any(line.startswith("done") for line in target.lines), 10, "the program never ended")
    # THEN each caller's count is the program's own
    assert "done a=300 b=100" in target.lines
    counts = {line.split()[0]: int(line.split()[1]) for line in result.stdout.splitlines() if ";" in line}
    assert counts == {"via_a;leaf": 300, "via_b;leaf": 100}, result.stdout


def test_ustack_in_rows_is_folded_innermost_last(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("stacks")
    out = tmp_path / "rows.csv"
    result = sampler("attach", "--pid", str(target.pid), "--at", "cold", "--expr", "where=ustack",
                     "--expr", "top=ustack(2)", "--count", "3", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    with out.open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    for row in rows:
        assert row["top"] == "spin;cold", row
        assert row["where"].endswith("start_thread;spinner_main;spin;cold") and row["where"].startswith("clone3;")
    # AND ustack alone, without --at, is refused in one line: there is no stopped thread
    line = one_line_error(sampler("attach", "--pid", str(target.pid), "--expr", "ustack", "--count", "1"))
    assert "ustack" in line and "--at" in line
    target.assert_untouched()


def test_a_call_a_stop_would_end_with_eintr_is_made_again(start_target: Callable[..., Target]) -> None:
    # GIVEN threads blocked for good in epoll_wait and sigtimedwait, counting their EINTRs
    from sampler.process.snapshot import Snapshots
    target = start_target("eintr")

    def blocked_now() -> dict[int, str]:
        calls = {tid: Path(f"/proc/{target.pid}/task/{tid}/syscall").read_text().split()[0]
                 for tid in os.listdir(f"/proc/{target.pid}/task")}
        return {int(tid): number for tid, number in calls.items() if number in ("232", "281", "128")}
    target.wait_for(lambda: len(blocked_now()) == 2, 5, "the threads never blocked")
    blocked = blocked_now()
    # WHEN each is stopped anyway (as when one enters such a call between sampler's look and its
    # interrupt), read and let go
    snapshots = Snapshots(target.pid)
    try:
        for tid in blocked:
            image = snapshots.stopped(tid)
            # THEN the call the stop ended is made again at the detach
            assert image.problem is None and image.restarted in ("epoll_wait", "epoll_pwait", "rt_sigtimedwait")
    finally:
        snapshots.close()
    time.sleep(0.2)
    assert read_counter(target, "eintrs") == 0
    for tid, number in blocked.items():  # back in the same call
        assert Path(f"/proc/{target.pid}/task/{tid}/syscall").read_text().split()[0] == number
    target.assert_untouched()


def test_interrupt_waits_reads_the_rest_and_the_program_sees_no_eintr(start_target: Callable[..., Target]) -> None:
    # GIVEN the EINTR counter built with frame pointers: its blocked threads' callers need rbp
    target = start_target("eintr-fp")
    epoll = lambda process: next(t for t in process["threads"]  # noqa: E731
                                 if t["syscall"] and t["syscall"]["name"] == "epoll_wait")
    # WHEN its stacks are read as they are by default
    thread = epoll(stacks_of(target.pid))
    # THEN the epoll thread is not stopped, and its stack ends where rbp is needed, saying so
    assert thread["read"].startswith("not stopped") and "--interrupt-waits" in thread["ended"], thread
    assert [f["function"] for f in thread["frames"]] == ["epoll_wait", "in_epoll"]
    # AND with --interrupt-waits it is stopped, read whole, and its call made again: no EINTR seen
    thread = epoll(stacks_of(target.pid, "--interrupt-waits"))
    assert thread["ended"] is None and [f["function"] for f in thread["frames"]][-3:] == \
        ["in_epoll", "start_thread", "clone3"], thread
    assert "made again" in thread["read"], thread
    time.sleep(0.2)
    assert read_counter(target, "eintrs") == 0
    target.assert_untouched()


def test_threads_in_timed_socket_calls_and_io_uring_are_never_given_eintr(start_target: Callable[..., Target],
                                                                          tmp_path: Path) -> None:
    # GIVEN threads blocked in recv and accept with a receive timeout, and in io_uring_enter (frame
    # pointers: their stacks need rbp, which only a stop gives)
    target = start_target("eintr-sockets")
    time.sleep(0.2)
    # WHEN their stacks are read, and a profile of every thread runs for 2 s
    process = stacks_of(target.pid)
    result = sampler("profile", "--pid", str(target.pid), "--off-cpu", "--duration", "2s",
                     "--out", str(tmp_path / "p.folded"), "--quiet")
    assert result.returncode == 0, result.stderr
    # THEN none was stopped, each says why its stack ends, and the program got no EINTR
    waiting = [t for t in process["threads"] if t["syscall"] and t["syscall"]["name"] in
               ("recvfrom", "accept", "io_uring_enter")]
    assert len(waiting) >= 2, process["threads"]
    for thread in waiting:
        assert thread["read"].startswith("not stopped") and thread["frames"], thread
    time.sleep(0.2)
    assert not [line for line in target.lines if "EINTR" in line], target.lines
    left_alone(target.pid)
