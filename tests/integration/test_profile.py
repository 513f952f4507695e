"""`sampler profile`: sampled stacks of real processes, counted; the shares of a program's known
split of its time, the threads that wait (--off-cpu), the outputs by suffix, and the target left
as it was."""

from __future__ import annotations

import json
import signal
import subprocess
import xml.etree.ElementTree as ElementTree
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.integration.targets import Target, finish, one_line_error, sampler, start_sampler


def folded(path: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        counts[stack] += int(count)
    return counts


def share(counts: Counter[str], leaf: str, among: tuple[str, ...]) -> float:
    """The share of samples whose innermost frame is ``leaf`` among those ending in any of ``among``."""
    ends = {name: sum(n for stack, n in counts.items() if stack.split(";")[-1] == name) for name in among}
    return ends[leaf] / max(1, sum(ends.values()))


def test_on_cpu_profile_shows_the_programs_split_of_its_time(start_target: Callable[..., Target],
                                                            tmp_path: Path) -> None:
    # GIVEN a thread that spends three quarters of its time in hot() and one in cold()
    target = start_target("stacks")
    out = tmp_path / "cpu.folded"
    # WHEN it is profiled for 3 s at 99 Hz
    result = sampler("profile", "--pid", str(target.pid), "--duration", "3s", "--out", str(out))
    assert result.returncode == 0, result.stderr
    counts = folded(out)
    # THEN the running thread was sampled (the main thread too, the moment it wakes once a second),
    # under its real root, hot about 75 % of it
    samples = sum(counts.values())
    spinning = sum(n for stack, n in counts.items() if stack.startswith("clone3;start_thread;spinner_main;spin;"))
    assert spinning >= samples * 0.95, counts
    assert 150 <= samples <= 310, samples  # 99 Hz for 3 s, less on a loaded host
    assert abs(share(counts, "hot", ("hot", "cold")) - 0.75) < 0.08, counts
    assert f"{samples} samples (on-CPU) of " in result.stderr, result.stderr
    target.assert_untouched()


def test_off_cpu_profile_shows_where_each_thread_waits(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("stacks")
    out = tmp_path / "all.folded"
    result = sampler("profile", "--pid", str(target.pid), "--duration", "2s", "--off-cpu", "--out", str(out),
                     "--quiet")
    assert result.returncode == 0, result.stderr
    counts = folded(out)
    stacks = set(counts)
    # each waiting thread's stack ends in the system call it waits in
    assert any(s.endswith("level1;level2;level3;pthread_mutex_lock;lll_mutex_lock_optimized;__lll_lock_wait;"
                          "futex_wait;[futex]") for s in stacks), stacks
    assert any(s.endswith("read_input;read;__libc_read;[read]") for s in stacks), stacks
    assert any(";on_signal;handler_sleep;" in s and s.endswith("[clock_nanosleep]") for s in stacks), stacks
    # six threads, each about as often as the others (every thread once a tick)
    per_thread = [n for s, n in counts.items() if "spinner_main" not in s and s.startswith("clone3")]
    assert len(per_thread) == 4 and max(per_thread) - min(per_thread) <= 2, counts
    target.assert_untouched()


def test_a_go_program_profiled_through_its_own_table(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("stacks-go")
    out = tmp_path / "go.folded"
    result = sampler("profile", "--pid", str(target.pid), "--duration", "2s", "--out", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    counts = folded(out)
    spinning = {s: n for s, n in counts.items() if ";main.spin;" in s}
    assert sum(spinning.values()) >= sum(counts.values()) * 0.8, counts
    assert abs(share(counts, "main.hot", ("main.hot", "main.cold")) - 0.75) < 0.1, counts
    assert all(s.startswith("runtime.goexit;main.spin") for s in spinning), spinning
    target.assert_untouched()


def test_the_outputs_by_their_suffix(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("stacks")
    svg, speedscope = tmp_path / "cpu.svg", tmp_path / "cpu.speedscope.json"
    for out in (svg, speedscope):
        result = sampler("profile", "--pid", str(target.pid), "--duration", "1s", "--out", str(out), "--quiet")
        assert result.returncode == 0, result.stderr
    texts = [element.text or "" for element in ElementTree.parse(svg).iter() if element.tag.endswith("title")]
    assert any(text.startswith("hot (") for text in texts) and any(text.startswith("spin (") for text in texts)
    document = json.loads(speedscope.read_text())
    names = [frame["name"] for frame in document["shared"]["frames"]]
    assert "hot" in names and document["profiles"][0]["type"] == "sampled"
    assert sum(document["profiles"][0]["weights"]) == document["profiles"][0]["endValue"] > 0
    # AND sampler report draws the flame graph of a .folded file, and names its top functions
    folded_file = tmp_path / "cpu.folded"
    assert sampler("profile", "--pid", str(target.pid), "--duration", "1s", "--out", str(folded_file),
                   "--quiet").returncode == 0
    report = sampler("report", str(folded_file), "--plot", str(tmp_path / "again.svg"))
    assert report.returncode == 0, report.stderr
    assert "hot" in report.stdout and (tmp_path / "again.svg").read_text().startswith("<?xml")
    target.assert_untouched()


def test_bad_input_is_one_line(start_target: Callable[..., Target], tmp_path: Path) -> None:
    line = one_line_error(sampler("profile", "--pid", "1", "--out", str(tmp_path / "x.png")))
    assert ".svg" in line and ".folded" in line
    line = one_line_error(sampler("profile", "--pid", "999999999", "--out", str(tmp_path / "x.svg")))
    assert "no process" in line


def test_ctrl_c_writes_the_samples_taken(start_target: Callable[..., Target], tmp_path: Path) -> None:
    target = start_target("stacks")
    out = tmp_path / "cut.folded"
    proc = start_sampler("profile", "--pid", str(target.pid), "--out", str(out))
    assert proc.stderr is not None
    progress = ""
    while not progress.startswith("sampler: profile: "):  # the first progress line: a second of samples
        progress = proc.stderr.readline()
        assert progress, "sampler ended before it said its progress"
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc, 30)
    assert proc.returncode == 0, stderr
    assert "interrupted: the samples so far are written" in stderr
    said = int(progress.split()[2])
    assert said > 0 and sum(folded(out).values()) >= said, (progress, stderr)
    target.assert_untouched()


def test_a_process_that_ends_during_the_profile(start_target: Callable[..., Target], tmp_path: Path) -> None:
    child = subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done"])
    out = tmp_path / "short.folded"
    result = sampler("profile", "--pid", str(child.pid), "--duration", "30s", "--out", str(out))
    child.wait()
    assert result.returncode == 0, result.stderr
    assert "ended" in result.stderr and out.exists(), result.stderr
