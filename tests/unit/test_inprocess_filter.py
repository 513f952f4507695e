"""A filtering probe's code (probe.S's filter templates, trampoline.filtering; issue 39) run in this
test's own process: a function of a few instructions called through ctypes by threads, its argument a
pointer the test's chain reads through, and only the calls whose pointed-to word is the one wanted
going on to the stop (here a counter in place of sampler's int3, then the jump back)."""

from __future__ import annotations

import ctypes
import mmap
import os
import threading

import pytest

from sampler.inprocess import ring
from sampler.inprocess.relocate import displace
from sampler.inprocess.ring import Ring
from sampler.inprocess.trampoline import Chain, filtering

FUNCTION = bytes.fromhex("4889f8" "4883c001" "c3")  # mov rax, rdi; add rax, 1; ret
WANTED = 0x5EED_C0DE_0000_0042
NUMBER = 2


class Filtered:
    """FUNCTION with a filtering trampoline on the next page, its stop on the third: ``lock inc`` of a
    counter, then the jump back."""

    def __init__(self, entry: bool, offsets: tuple[int, ...]) -> None:
        self.code = mmap.mmap(-1, 3 * mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self.data = mmap.mmap(-1, ring.SIZE)
        self.counter = (ctypes.c_uint64 * 1)()
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.code))
        data = ctypes.addressof(ctypes.c_char.from_buffer(self.data))
        self.ring = Ring(self.data)
        self.ring.initialise()
        function, trampoline, stop = base, base + mmap.PAGESIZE, base + 2 * mmap.PAGESIZE
        self.code[:len(FUNCTION)] = FUNCTION
        displaced = displace(FUNCTION, function, function)
        body, moved_at = filtering(displaced, trampoline, data, NUMBER, entry, Chain("rdi", offsets, WANTED),
                                   os.getpid(), stop)
        self.code[mmap.PAGESIZE:mmap.PAGESIZE + len(body)] = body
        counter = ctypes.addressof(self.counter)
        back = trampoline + moved_at
        stub = b"\x48\xb8" + counter.to_bytes(8, "little")  # movabs rax, counter (rax: the callee's to clobber)
        stub += b"\xf0\x48\xff\x00"  # lock inc qword ptr [rax]
        stub += b"\xe9" + (back - (stop + len(stub) + 5)).to_bytes(4, "little", signed=True)
        self.code[2 * mmap.PAGESIZE:2 * mmap.PAGESIZE + len(stub)] = stub
        self.code[:5] = b"\xe9" + (trampoline - (function + 5)).to_bytes(4, "little", signed=True)
        self.call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64)(function)


@pytest.mark.parametrize("entry", [True, False])
def test_only_the_calls_whose_chain_reads_the_wanted_word_go_on_to_the_stop(entry: bool) -> None:
    # GIVEN words, one in three the wanted one, a pointer to each passed as the argument (the chain: one read)
    words = (ctypes.c_uint64 * 3000)(*[WANTED if i % 3 == 0 else i for i in range(3000)])
    filtered = Filtered(entry, (0,))
    wrong: list[int] = []

    def work(first: int) -> None:
        for i in range(first, 3000, 4):
            address = ctypes.addressof(words) + 8 * i
            if filtered.call(address) != address + 1:
                wrong.append(i)

    # WHEN four threads call the function at once
    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # THEN every call returns its own result, is tested, and only the wanted ones reach the stop
    assert not wrong
    assert filtered.ring.hits(NUMBER) == 3000 and filtered.ring.drops(NUMBER) == 0
    assert filtered.counter[0] == 1000


def test_a_pointer_that_cannot_be_read_is_let_go_and_counted_never_a_fault() -> None:
    # GIVEN a chain of two reads: through a pointer to a pointer
    word = ctypes.c_uint64(WANTED)
    pointer = ctypes.c_uint64(ctypes.addressof(word))
    nowhere = ctypes.c_uint64(8)  # (the first page: never mapped)
    filtered = Filtered(True, (0, 0))
    # WHEN one call's chain reads the wanted word, and two read through a pointer that is not mapped
    assert filtered.call(ctypes.addressof(pointer)) == ctypes.addressof(pointer) + 1
    assert filtered.call(ctypes.addressof(nowhere)) == ctypes.addressof(nowhere) + 1
    assert filtered.call(16) == 17
    # THEN the first reaches the stop; the others are counted as not read, and the process lives on
    assert filtered.counter[0] == 1
    assert filtered.ring.hits(NUMBER) == 3 and filtered.ring.drops(NUMBER) == 2
