"""glibc's IFUNCs: a name whose symbol is a resolver breaks where the process's calls go.

targets/ifuncs calls one of memcpy, memmove, memset, strlen, strcmp or strchr COUNT times
at each SIGUSR1 and nothing else of libc's between; a trace of libc:NAME must see exactly
those calls. Before ifunc.py: memcpy broke at the old compatibility memcpy@GLIBC_2.2.5
(0 hits), and the others were not found ("did you mean 'strlen_ifunc'?")."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.integration.targets import (
    Target,
    assert_code_matches_files,
    finish,
    read_counter,
    read_csv,
    start_sampler,
    wait_until_patched,
)

COUNT = 500


@pytest.mark.parametrize("name", ["memcpy", "memmove", "memset", "strlen", "strcmp", "strchr"])
def test_a_trace_of_an_ifunc_counts_every_call_the_program_makes(
        start_target: Callable[..., Target], tmp_path: Path, name: str) -> None:
    # GIVEN a program that calls NAME through its PLT 500 times at each SIGUSR1
    target = start_target("ifuncs", name, str(COUNT))
    out = tmp_path / "calls.csv"
    # WHEN tracing libc:NAME over two bursts
    proc = start_sampler("trace", "--pid", str(target.pid), "--backend", "ptrace", "--at", f"libc:{name}",
                         "--out", str(out))
    wait_until_patched(target.pid)
    for burst in (1, 2):
        target.proc.send_signal(signal.SIGUSR1)
        target.wait_for(lambda done=burst: read_counter(target, "bursts") == done, 20,  # type: ignore[misc]
                        f"burst {burst} did not end")
    time.sleep(0.2)  # (the last rows on their way)
    proc.send_signal(signal.SIGINT)
    _, stderr = finish(proc)
    # THEN every call is a row, no more, and the line says which implementation it is
    assert proc.returncode in (0, 130), stderr
    rows = read_csv(out)
    assert read_counter(target, "calls") == 2 * COUNT
    assert len(rows) == 2 * COUNT, stderr
    said = re.search(rf"--at {name}: an IFUNC of libc\.so\.6; this process's calls go to (\S+), chosen for "
                     "this CPU", stderr)
    assert said and name in said.group(1) and said.group(1) != name, stderr
    if name in ("memcpy", "memmove"):  # one implementation serves both in glibc 2.36
        assert "its calls are counted too" in stderr
    assert_code_matches_files(target.pid)
    assert target.proc.poll() is None
