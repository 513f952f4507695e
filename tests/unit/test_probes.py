"""Several --at on the command line, clone symbols, and the DW_OP operations clones need
(values at entry, arithmetic), without a process."""

from __future__ import annotations

import struct

import pytest

from sampler.cli import attach
from sampler.configure import _probes
from sampler.debuginfo.clones import COLD, shown, split
from sampler.debuginfo.locations import Computed, Frame, OptimizedOut, execute
from sampler.errors import UsageError
from tests.unit.test_debuginfo_readers import ops, registers


def order(*args: str) -> list[tuple[str | None, list[str]]]:
    """Which --at each --expr follows, from click's own parse of the command line."""
    ctx = attach.make_context("attach", list(args))
    return [(location, list(texts)) for location, texts in ctx.meta["order"]]

def test_each_expr_belongs_to_the_at_before_it_and_those_before_any_at_to_all() -> None:
    assert order("--pid", "1", "--expr", "c=calls", "--at", "f", "--expr", "y", "--out", "--at",
                 "--at=g", "--expr=z=w", "--quiet", "--at", "h") == [
        (None, ["c=calls"]), ("f", ["y"]), ("g", ["z=w"]), ("h", [])]
    # an option's value that looks like --at is its value, not an --at
    assert order("--out", "--at", "--at", "f") == [(None, []), ("f", [])]

def test_probes_share_a_column_by_name_and_refuse_a_name_twice_in_one() -> None:
    probes, columns = _probes([(None, ["c=calls"]), ("f", ["n=x"]), ("g", ["n=y", "m=z"])], ["f", "g"])
    assert [p.location for p in probes] == ["f", "g"]
    assert [[e.name for e in p.expressions] for p in probes] == [["c", "n"], ["c", "n", "m"]]
    assert [e.name for e in columns] == ["c", "n", "m"]
    with pytest.raises(UsageError):
        _probes([(None, ["n=x"]), ("f", ["n=y"])], ["f"])
    with pytest.raises(UsageError):
        _probes([(None, []), ("f", ["probe=y"])], ["f"])

def test_clone_symbols_split_into_the_function_and_its_suffix() -> None:
    assert split("ring_gap.isra.0") == ("ring_gap", ".isra.0")
    assert split("f.constprop.0.isra.0") == ("f", ".constprop.0.isra.0")
    assert split("f.llvm.1234567") == ("f", ".llvm.1234567")
    assert split("f.part.3") == ("f", ".part.3")
    assert split("main") is None and split(".isra.0") is None and split("f.isra") == ("f", ".isra")
    assert COLD.search("f.cold") and COLD.search("f.cold.1") and not COLD.search("f.isra.0")
    assert shown("_ZNK2rb4Ring3gapEl.constprop.0.isra.0") == "rb::Ring::gap(long) const [clone .constprop.0.isra.0]"
    assert shown("ring_gap.isra.0") == "ring_gap.isra.0"

def frame(**values: int) -> Frame:
    return Frame({**registers(), **values}, 0, cfa=lambda: 0x8000, read_word=lambda address: 0)

def test_a_value_at_entry_comes_from_the_callers_call_site_or_is_optimized_out() -> None:
    asked: list[tuple[str, int]] = []

    def at_entry(kind: str, arg: int) -> int:
        asked.append((kind, arg))
        return 0x5000

    parameter_ref = ops(b"\xfa" + struct.pack("<I", 0x1264) + b"\x9f")  # DW_OP_GNU_parameter_ref; stack_value
    assert execute(parameter_ref, "b", frame(), 0, lambda: 0, at_entry) == Computed(0x5000)
    entry_value = ops(b"\xa3\x01\x55\x9f")  # DW_OP_entry_value(DW_OP_reg5 rdi); DW_OP_stack_value
    assert execute(entry_value, "b", frame(), 0, lambda: 0, at_entry) == Computed(0x5000)
    assert asked == [("param", 0x1264), ("reg", 5)]
    with pytest.raises(OptimizedOut, match="only its caller knows it"):
        execute(parameter_ref, "b", frame(), 0, lambda: 0)
    with pytest.raises(OptimizedOut, match="only its entry value is known"):
        execute(ops(b"\xa3\x02\x75\x00\x9f"), "b", frame(), 0, lambda: 0, at_entry)  # entry_value(breg5 0)

def test_arithmetic_that_gcc_puts_in_a_clones_locations() -> None:
    # (((r15 & 1) << 3) - (r15 & 1)) << 4 + 0x4040: &rings[i & 1] (112 bytes each), as g++ wrote it
    code = b"\x7f\x00\x31\x1a\x33\x24\x7f\x00\x31\x1a\x1c\x34\x24\x03" + struct.pack("<Q", 0x4040) + b"\x22\x9f"
    assert execute(ops(code), "this", frame(r15=5), 0, lambda: 0) == Computed(0x4040 + 112)
    assert execute(ops(b"\x7f\x00\x31\x1a\x9f"), "x", frame(r15=6), 0, lambda: 0) == Computed(0)
    assert execute(ops(b"\x32\x33\x1e\x9f"), "x", frame(), 0, lambda: 0) == Computed(6)  # 2 * 3
    assert execute(ops(b"\x32\x1f\x9f"), "x", frame(), 0, lambda: 0) == Computed((1 << 64) - 2)  # -2
    assert execute(ops(b"\x3a\x32\x1b\x9f"), "x", frame(), 0, lambda: 0) == Computed(5)  # 10 / 2
    with pytest.raises(OptimizedOut, match="divides by zero"):
        execute(ops(b"\x3a\x30\x1b\x9f"), "x", frame(), 0, lambda: 0)

def test_a_register_the_caller_did_not_keep_is_optimized_out() -> None:
    kept = Frame({"rbx": 1, "rsp": 0x8000}, 0, cfa=lambda: 0x8000, read_word=lambda address: 0)
    assert execute(ops(b"\x73\x00\x9f"), "x", kept, 0, lambda: 0) == Computed(1)  # breg3 (rbx)
    with pytest.raises(OptimizedOut, match="the caller did not keep"):
        execute(ops(b"\x72\x00\x9f"), "x", kept, 0, lambda: 0)  # breg2 (rcx)
