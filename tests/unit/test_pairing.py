"""Matching returns with entries (pairing.py): recursion, frames left without a return, bounds."""

from __future__ import annotations

from sampler.probes.pairing import Calls


def test_recursion_pairs_each_return_with_its_own_entry() -> None:
    calls: Calls[str] = Calls()
    for depth in range(10):  # deeper frames are higher
        calls.enter("t1", depth, float(depth), f"level {10 - depth}")
    ended = []
    for depth in reversed(range(10)):
        found = calls.leave("t1", depth)
        assert found is not None
        ended.append(found[0].what)
    assert ended == [f"level {n}" for n in range(1, 11)]
    assert calls.unseen == 0 and calls.total == 0 and calls.paired == 10


def test_a_return_above_open_calls_closes_them_unseen() -> None:
    # GIVEN f (height 1) calling g (height 2) calling h (height 3); a longjmp back into f
    calls: Calls[str] = Calls()
    for height, name in ((1, "f"), (2, "g"), (3, "h")):
        calls.enter("t", height, 0.0, name)
    # WHEN f returns
    found = calls.leave("t", 1)
    # THEN f is paired, g and h counted as no return seen
    assert found is not None and found[0].what == "f"
    assert calls.unseen == 2 and calls.total == 0


def test_an_entry_at_an_open_calls_height_replaces_it() -> None:
    calls: Calls[str] = Calls()
    calls.enter("t", 5, 0.0, "first")  # left by an exception
    calls.enter("t", 5, 1.0, "second")
    found = calls.leave("t", 5)
    assert found is not None and found[0].what == "second" and calls.unseen == 1


def test_owners_are_apart_and_a_return_without_entry_is_none() -> None:
    calls: Calls[str] = Calls()
    calls.enter("a", 1, 0.0, "a's")
    assert calls.leave("b", 1) is None
    assert calls.leave("a", 1) is not None


def test_stalls_inside_a_call_are_taken_out() -> None:
    calls: Calls[str] = Calls()
    calls.stalled("t", 5.0)  # before any call: not inside one
    calls.enter("t", 1, 0.0, "outer")
    calls.stalled("t", 0.25)  # the inner call's entry stop
    calls.enter("t", 2, 0.5, "inner")
    calls.stalled("t", 0.125)
    inner = calls.leave("t", 2)
    assert inner is not None and inner[1] == 0.125
    outer = calls.leave("t", 1)
    assert outer is not None and outer[1] == 0.375


def test_open_calls_are_bounded() -> None:
    calls: Calls[int] = Calls(max_depth=100, max_open=1000)
    for height in range(1_000):  # one thread entering without returning
        calls.enter("t", height, 0.0, height)
    assert calls.total == 100 and calls.dropped == 900 and calls.unseen == 900
    for owner in range(5_000):  # many threads
        calls.enter(owner, 1, 0.0, owner)
    assert calls.total <= 1000
    assert calls.leave(4_999, 1) is not None  # the newest are kept


def test_a_return_to_elsewhere_is_not_the_open_calls() -> None:
    # GIVEN f open at height 1, returning to X; its frame left by a tail call through a pointer
    calls: Calls[str] = Calls()
    calls.enter("t", 1, 0.0, "f", tag=0x1000)
    # WHEN another function's return at that height goes to Y
    # THEN it is not f's end: f is gone, counted
    assert calls.leave("t", 1, tag=0x2000) is None
    assert calls.unseen == 1 and calls.total == 0


def test_a_call_again_from_the_same_place_replaces_a_frame_left_by_longjmp() -> None:
    calls: Calls[str] = Calls()
    calls.enter("t", 1, 0.0, "first", tag=0x1000)  # left by longjmp
    calls.enter("t", 1, 1.0, "second", tag=0x1000)  # the caller's loop calls again
    found = calls.leave("t", 1, tag=0x1000)
    assert found is not None and found[0].what == "second" and calls.unseen == 1


def test_a_tail_calls_chain_ends_at_one_return() -> None:
    # GIVEN a (traced) whose last act is a jump to b (traced): b runs in a's frame
    calls: Calls[str] = Calls(chains=lambda open_call, new: (open_call, new) == ("a", "b"))
    calls.enter("t", 1, 0.0, "a", tag=0x1000)
    calls.enter("t", 1, 0.5, "b", tag=0x1000)
    # WHEN b returns, THEN both calls end: b's first
    ended = calls.ended("t", 1, tag=0x1000)
    assert [call.what for call, _ in ended] == ["b", "a"] and calls.unseen == 0 and calls.total == 0
