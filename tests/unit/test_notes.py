"""A run's notes are data (backends/base.py's Note): what is said under --quiet, and how many children
were let go, are decided where the note is made, not read back from its words."""

from __future__ import annotations

from collections import Counter

from sampler.backends.ptrace.backend import Tally
from sampler.backends.ptrace.latency import timed_notes


def test_what_changes_the_rows_meaning_or_harms_is_said_under_quiet() -> None:
    notes = Tally(released=3, unsure=1, emulated=5, stepped=2, left_stepping=1, read_again=4,
                  inprocess=["in-process at f: 9 call(s)"]).notes(every_hit=True)
    assert len(notes) == 6, notes
    assert [n.let_go for n in notes if n.let_go] == [3]  # the children let go: a number, not a phrase to find
    assert next(n for n in notes if n.text.startswith("in-process at f")).matters
    assert next(n for n in notes if n.let_go).matters  # their calls were missed
    assert next(n for n in notes if n.text.startswith("in 1 step")).matters
    assert next(n for n in notes if "SIGTRAP" in n.text).matters  # harm, said always
    assert not next(n for n in notes if n.text.startswith("every hit:")).matters  # how, not what
    assert not next(n for n in notes if n.text.startswith("zero-stop rows")).matters
    assert Tally().notes(every_hit=True) == []


def test_the_timed_notes_say_the_in_process_clock_always_and_the_rest_in_full_runs() -> None:
    notes = timed_notes(Counter(rows=10, int3_ends=2, bounded=1, open=2))
    assert [n.matters for n in notes] == [True, False, False, False], notes
    assert notes[0].text.startswith("8 call(s) clocked in the target")
    dropped = timed_notes(Counter(unseen=2, dropped_records=5))
    assert len(dropped) == 1 and dropped[0].matters and "rings were full" in dropped[0].text
