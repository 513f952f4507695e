"""The in-process probe's code (sampler/inprocess/probe.S, templates.py, trampoline.py) run in this
test's own process, on a function of a few instructions called through ctypes by real threads at
the same time (ctypes lets go of the GIL for the call), and the ring read as sampler reads it."""

from __future__ import annotations

import ctypes
import mmap
import shutil
import threading
import time
from collections import Counter

import numpy as np
import pytest

from sampler.inprocess import assemble, ring, templates
from sampler.inprocess.relocate import displace
from sampler.inprocess.ring import Ring
from sampler.inprocess.trampoline import recording

FUNCTION = bytes.fromhex("4889f8" "4883c001" "c3")  # mov rax, rdi; add rax, 1; ret
READ_FS = bytes.fromhex("f3480faec0" "c3")  # rdfsbase rax; ret


def test_the_templates_are_what_probe_s_assembles_to() -> None:
    if shutil.which("as") is None:
        pytest.fail("binutils' as is missing: make setup installs it")
    assert assembled_now() == {"entry": templates.ENTRY, "anywhere": templates.ANYWHERE,
                               "reads_entry": templates.READS_ENTRY, "reads_anywhere": templates.READS_ANYWHERE,
                               "filter_entry": templates.FILTER_ENTRY, "filter_anywhere": templates.FILTER_ANYWHERE,
                               "sigtrap": templates.SIGTRAP, "restorer": templates.RESTORER}


def assembled_now() -> dict[str, bytes]:
    return assemble.assembled()


class Probed:
    """FUNCTION at the start of an executable page of this process, with a recording trampoline on
    the next page and the jump in place."""

    def __init__(self, entry: bool, fsgsbase: bool = True, probe: int = 3) -> None:
        self.code = mmap.mmap(-1, 3 * mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self.data = mmap.mmap(-1, ring.SIZE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.code))
        data = ctypes.addressof(ctypes.c_char.from_buffer(self.data))
        self.ring = Ring(self.data)
        self.ring.initialise()
        function, trampoline, reader = base, base + mmap.PAGESIZE, base + 2 * mmap.PAGESIZE
        self.code[:len(FUNCTION)] = FUNCTION
        displaced = displace(FUNCTION, function, function)
        body, _ = recording(displaced, trampoline, data, probe, entry, fsgsbase)
        self.code[mmap.PAGESIZE:mmap.PAGESIZE + len(body)] = body
        self.code[2 * mmap.PAGESIZE:2 * mmap.PAGESIZE + len(READ_FS)] = READ_FS
        jump = b"\xe9" + (trampoline - (function + 5)).to_bytes(4, "little", signed=True)
        self.code[:5] = jump
        self.call = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_long)(function)
        self.fs_base = ctypes.CFUNCTYPE(ctypes.c_uint64)(reader)


def run_threads(probed: Probed, threads: int, calls: int, drain: bool) -> tuple[dict[int, int], list[np.ndarray]]:
    """Each thread calls the function ``calls`` times (checking its result); the main thread drains
    meanwhile when ``drain``. The fs base of each thread -> its calls."""
    bases: dict[int, int] = {}
    wrong: list[int] = []
    start = threading.Barrier(threads + 1)

    def work(index: int) -> None:
        bases[int(probed.fs_base())] = calls
        start.wait()
        for i in range(calls):
            if probed.call(i) != i + 1:
                wrong.append(i)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    start.wait()
    drained = []
    while any(worker.is_alive() for worker in workers):
        if drain:
            drained.append(probed.ring.drain())
        else:
            time.sleep(0.001)  # (a loop that only spins holds the GIL the callers need between calls: 16-20 s)
    for worker in workers:
        worker.join()
    drained.append(probed.ring.drain())
    assert not wrong
    return bases, drained


@pytest.mark.parametrize("entry", [True, False])
def test_eight_threads_calling_at_once_are_each_counted_and_recorded_once(entry: bool) -> None:
    # GIVEN a function probed in this process, its ring read while eight threads call it
    probed = Probed(entry)
    bases, drained = run_threads(probed, 8, 8000, drain=True)  # (fewer calls than slots: none dropped)
    records = np.concatenate(drained)
    # THEN every call is counted, recorded once, by the thread that made it, in ticket order
    assert probed.ring.hits(3) == 64_000 and probed.ring.drops(3) == 0
    assert len(records) == 64_000 and probed.ring.head() == 64_000
    assert Counter(int(fs) for fs in records["fs"]) == bases
    assert set(records["probe"].tolist()) == {3}
    assert (records["seq"] == np.arange(1, 64_001, dtype=np.uint64)).all()
    # (whether a drain came while they wrote is the machine's timing: 64,000 calls take 1-2 ms, and a
    # loaded CI run once read them all in one drain; test_more_calls_than_slots... needs several)
    # AND each thread's TSC readings rise
    for fs in bases:
        assert (np.diff(records["tsc"][records["fs"] == fs].astype(np.int64)) > 0).all()


def test_a_full_ring_drops_records_and_counts_them_never_a_call() -> None:
    # GIVEN a probed function whose ring nobody reads
    probed = Probed(entry=True)
    _, drained = run_threads(probed, 2, 36_000, drain=False)  # (72,000 calls: more than the ring's 65,536)
    # THEN the ring holds SLOTS records, the others are counted as dropped, every call is counted
    assert probed.ring.hits(3) == 72_000
    assert len(drained[0]) == ring.SLOTS and probed.ring.drops(3) == 72_000 - ring.SLOTS
    # AND once read, the ring takes records again
    _, again = run_threads(probed, 1, 10, drain=False)
    assert len(again[0]) == 10 and probed.ring.hits(3) == 72_010


def test_without_rdfsbase_a_thread_is_told_by_the_word_at_fs_0() -> None:
    probed = Probed(entry=True, fsgsbase=False)
    bases, drained = run_threads(probed, 2, 1000, drain=True)
    records = np.concatenate(drained)
    assert Counter(int(fs) for fs in records["fs"]) == bases  # glibc's thread pointer points to itself


def test_more_calls_than_slots_while_read_each_is_recorded_or_counted_as_dropped() -> None:
    probed = Probed(entry=False)
    bases, drained = run_threads(probed, 8, 12_000, drain=True)
    records = np.concatenate(drained)
    assert probed.ring.hits(3) == 96_000
    assert len(records) + probed.ring.drops(3) == 96_000
    assert (records["seq"] == np.arange(1, len(records) + 1, dtype=np.uint64)).all()
    assert set(Counter(int(fs) for fs in records["fs"])) <= set(bases)


def test_a_probe_past_the_first_page_counts_past_the_ring_and_the_counters_read_in_bulk_agree() -> None:
    # GIVEN probe 5,000 of a data area (the first page holds the counters of 62)
    probed = Probed(entry=True, probe=5000)
    _, drained = run_threads(probed, 2, 1000, drain=False)
    # THEN its calls are counted and recorded under its number, its counters past the ring
    assert ring.hits_at(5000) >= ring.COUNTERS and ring.hits_at(ring.MAX_PROBES - 1) + 16 <= ring.SIZE
    assert probed.ring.hits(5000) == 2000 and probed.ring.drops(5000) == 0
    assert set(drained[0]["probe"].tolist()) == {5000} and len(drained[0]) == 2000
    # AND the counters read in bulk say the same, and nothing of any other probe
    hits, drops = probed.ring.counters(5001)
    assert int(hits[5000]) == 2000 and int(hits.sum()) == 2000 and int(drops.sum()) == 0
    with pytest.raises(ValueError):
        ring.hits_at(ring.MAX_PROBES)
