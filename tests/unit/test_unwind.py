"""The unwinder's walk on made-up stacks (a fake module and memory; the real ones are
tests/integration/test_stack.py's): loops, a stack pointer that goes down, the depth limit,
unreadable memory and registers not read all end a stack with the reason, never a hang. And the
DWARF expressions of call frame information, and Rust's v0 names."""

from __future__ import annotations

import struct
import time

import pytest

from sampler.debuginfo.rustv0 import demangle_v0
from sampler.process.reads import UnreadableMemory
from sampler.unwind.code import Place
from sampler.unwind.expression import BadExpression, evaluate
from sampler.unwind.walk import RBP, RIP, RSP, unwind


class FakeCode:
    """One module of code at [0x1000, 0x2000), no unwind tables: the frame pointer is followed."""

    name, bias, frames, go = "fake", 0, None, None

    def function(self, pc: int) -> None:
        return None

    def place(self, pc: int) -> Place:
        return Place(f"f{pc:x}", 0)

    def starts_function(self, pc: int) -> bool:
        return False

    def call_target(self, returns: int) -> tuple[None, None]:
        return None, None


class FakeMap:
    def __init__(self) -> None:
        self.code = FakeCode()

    def at(self, pc: int) -> FakeCode | None:
        return self.code if 0x1000 <= pc < 0x2000 else None

    def name_at(self, pc: int) -> str | None:
        return None


def memory(words: dict[int, int]):  # type: ignore[no-untyped-def]
    def read(address: int, size: int) -> bytes:
        if address not in words:
            raise UnreadableMemory(f"nothing at {address:#x}")
        return struct.pack("<Q", words[address])
    return read


def walk(registers: dict[int, int], words: dict[int, int], depth: int = 256):  # type: ignore[no-untyped-def]
    return unwind(registers, FakeMap(), memory(words), depth)  # type: ignore[arg-type]


def test_a_frame_pointer_chain_to_its_end() -> None:
    # three frames: bp chain 0x8000 -> 0x8100 -> 0 (the outermost's saved bp), return addresses in code
    words = {0x8000: 0x8100, 0x8008: 0x1200, 0x8100: 0, 0x8108: 0x1300, 0x0: 0, 0x8: 0}
    stack = walk({RIP: 0x1100, RSP: 0x7ff0, RBP: 0x8000}, words)
    assert [f.pc for f in stack.frames] == [0x1100, 0x1200, 0x1300]
    assert stack.frames[1].how == "frame pointer"


def test_a_frame_pointer_that_points_at_itself_ends_the_stack() -> None:
    words = {0x8000: 0x8000, 0x8008: 0x1200}
    stack = walk({RIP: 0x1100, RSP: 0x7ff0, RBP: 0x8000}, words)
    assert stack.ended is not None and "is no frame pointer" in stack.ended, stack.ended
    assert len(stack.frames) == 2


def test_the_depth_limit() -> None:
    # an endless chain going up: every frame's bp points 16 bytes higher
    words = {}
    for i in range(10_000):
        words[0x8000 + 16 * i] = 0x8000 + 16 * (i + 1)
        words[0x8008 + 16 * i] = 0x1200 + i % 16
    started = time.monotonic()
    stack = walk({RIP: 0x1100, RSP: 0x7ff0, RBP: 0x8000}, words, depth=50)
    assert len(stack.frames) == 50 and stack.ended == "deeper than 50 frames (--max-depth)"
    assert time.monotonic() - started < 1


def test_unreadable_memory_ends_the_stack_with_the_reason() -> None:
    stack = walk({RIP: 0x1100, RSP: 0x7ff0, RBP: 0x8000}, {})
    assert len(stack.frames) == 1 and "cannot be read" in (stack.ended or "")


def test_a_register_not_read_says_so() -> None:
    # no frame pointer known (a thread read without stopping it) and no unwind table
    stack = walk({RIP: 0x1100, RSP: 0x7ff0}, {})
    assert stack.short_of_registers and "without stopping it" in (stack.ended or "")


def test_a_pc_in_no_code_is_one_frame_then_the_reason() -> None:
    stack = walk({RIP: 0x9999, RSP: 0x7ff0, RBP: 0x8000}, {0x8000: 0x8100, 0x8008: 0x1200})
    assert stack.frames[0].function is None and stack.frames[0].name == "??"


def test_folded_is_outermost_first() -> None:
    words = {0x8000: 0x8100, 0x8008: 0x1200, 0x8100: 0, 0x8108: 0x1300}
    stack = walk({RIP: 0x1100, RSP: 0x7ff0, RBP: 0x8000}, words)
    assert stack.folded() == "f12ff;f11ff;f1100"  # (return addresses are named by the call: pc - 1)
    assert stack.folded(2) == "f11ff;f1100"


def test_the_expressions_compilers_write() -> None:
    registers = {7: 0x7000, 16: 0x1234, 6: 0x9000}
    read = memory({0x9000 - 8: 0xCAFE, 0x7000 + 160: 0xBEEF})

    def register(n: int) -> int:
        return registers[n]

    # the PLT's CFA: rsp + 8, plus 8 more once past the stub's 11th byte (of a 16-byte entry)
    plt = bytes([0x77, 8, 0x80, 0, 0x3F, 0x1A, 0x3B, 0x2A, 0x33, 0x24, 0x22])
    assert evaluate(plt, register, read) == 0x7000 + 8  # 0x1234 & 15 = 4: not past the 11th byte
    registers[16] = 0x123C  # & 15 = 12 >= 11: 8 more
    assert evaluate(plt, register, read) == 0x7000 + 16
    assert evaluate(bytes([0x77, 160, 1, 0x06]), register, read) == 0xBEEF  # glibc's signal frame: breg7 160; deref
    assert evaluate(bytes([0x76, 0x78, 0x06]), register, read) == 0xCAFE  # a realigned stack: breg6 -8; deref
    with pytest.raises(BadExpression):
        evaluate(bytes([0xE0]), register, read)  # an operation no CFI uses
    with pytest.raises(BadExpression):
        evaluate(bytes([0x22]), register, read)  # plus on an empty stack
    with pytest.raises(BadExpression):
        evaluate(bytes([0x30, 0x2F, 0xFD, 0xFF]), register, read)  # a branch back forever: bounded


@pytest.mark.parametrize("mangled, expected", [
    ("_RNvNtNtCsjrHSEGnQ3l9_3std6thread9functions5sleep", "std::thread::functions::sleep"),
    ("_RNvNvMs0_NtNtNtCsjrHSEGnQ3l9_3std3sys6thread4unixNtB7_6Thread3new12thread_start",
     "<std::sys::thread::unix::Thread>::new::thread_start"),
    ("_RNCNCNCNvNtCsjrHSEGnQ3l9_3std2rt19lang_start_internal00s_0B9_",
     "std::rt::lang_start_internal::{closure#0}::{closure#0}::{closure#1}"),
    ("_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeINtNtCslNYArtu3iFV_5alloc3vec3VecINtNtBL_5boxed3BoxDINtNtNtB4_"
     "3ops8function6FnOnceuEp6OutputuNtNtB4_6marker4SendEL_EEECsjrHSEGnQ3l9_3std",
     "core::ptr::drop_in_place::<alloc::vec::Vec<alloc::boxed::Box<dyn core::ops::function::FnOnce<(), "
     "Output = ()> + core::marker::Send>>>"),
])
def test_rust_v0_names(mangled: str, expected: str) -> None:
    assert demangle_v0(mangled) == expected


def test_hostile_v0_names_are_refused_quickly() -> None:
    started = time.monotonic()
    nested = "_RNv" + "INv" * 2000 + "C1a"  # deeper than MAX_DEPTH
    assert demangle_v0(nested) is None
    backrefs = "_R" + "I" * 30 + "C1a" + "B2_" * 60 + "E" * 30  # back-references that would multiply
    assert demangle_v0(backrefs) is None or len(demangle_v0(backrefs) or "") <= 2048
    assert demangle_v0("_RC" + "9" * 30) is None  # a length past the name
    assert demangle_v0("_RNvC1a\x00") is None
    assert time.monotonic() - started < 1
