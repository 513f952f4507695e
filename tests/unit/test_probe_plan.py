"""The probe plan: each site's kind chosen (probes/plan.py), on made-up sites and processes, no target."""

from __future__ import annotations

import pytest

from sampler.probes.plan import MAX_RETURNS, Kind, Placement, Shows, Wants, choose, int3_line, refused, untimed
from sampler.probes.returns import ReturnPoints

COUNT, READS, USTACK, PYTHON = Wants(), Wants(reads=True), Wants(reads=True, ustack=True), Wants(python=True)
QUIET = Shows()


def kinds(sites: list[tuple[str, Wants]], shows: Shows = QUIET, probe: str = "auto", every_hit: bool = True
          ) -> dict[str, tuple[Kind, str]]:
    return {p.site: (p.kind, p.reason) for p in choose(sites, shows, probe, every_hit)}


def test_a_count_goes_in_process_and_a_reading_site_learns_first() -> None:
    assert kinds([("count", COUNT), ("reads", READS)]) == {"count": (Kind.COUNT, ""), "reads": (Kind.LEARN, "")}


def test_probe_int3_and_attach_keep_every_int3_without_a_reason() -> None:
    sites = [("count", COUNT), ("reads", READS), ("py", PYTHON)]
    assert kinds(sites, probe="int3") == {name: (Kind.INT3, "") for name, _ in sites}
    # attach samples: only a Python probe's places take a probe in the target (its test)
    assert kinds(sites, every_hit=False) == {"count": (Kind.INT3, ""), "reads": (Kind.INT3, ""),
                                             "py": (Kind.FILTER, "")}


@pytest.mark.parametrize(("shows", "says"), [
    (Shows(seccomp=True), "seccomp filter: an in-process probe's reading system call"),
    (Shows(userfaultfd=True), "userfaultfd"),
    (Shows(slow_files=True), "FUSE or network file system"),
    (Shows(unseen_goroutines="no allgs"), "a goroutine parked inside a jump's bytes could not be seen: no allgs"),
])
def test_what_the_process_shows_keeps_a_reading_probe_out_but_not_a_count(shows: Shows, says: str) -> None:
    chosen = kinds([("count", COUNT), ("reads", READS)], shows)
    assert chosen["count"] == (Kind.COUNT, "")
    assert chosen["reads"][0] is Kind.INT3 and says in chosen["reads"][1], chosen


@pytest.mark.parametrize(("shows", "says"), [
    (Shows(stopped=True), "stopped (SIGSTOP)"),
    (Shows(many=True), "trace one process"),
])
def test_a_stopped_process_or_one_of_many_takes_no_jump_at_all(shows: Shows, says: str) -> None:
    chosen = kinds([("count", COUNT), ("reads", READS), ("py", PYTHON)], shows)
    assert all(kind is Kind.INT3 and says in why for kind, why in chosen.values()), chosen


def test_ustack_is_read_by_an_int3() -> None:
    assert kinds([("s", USTACK)]) == {"s": (Kind.INT3, "ustack is read by copying the thread's stack at each hit")}


def test_a_python_probes_test_is_kept_out_by_seccomp_in_its_own_words() -> None:
    kind, why = kinds([("py", PYTHON)], Shows(seccomp=True))["py"]
    assert kind is Kind.INT3 and why.startswith("the process has a seccomp filter: the test's system call"), why


def test_a_timed_call_goes_in_process_at_its_entry_unless_its_returns_say_not() -> None:
    timed, tail = Wants(untimed=""), Wants(untimed="the function leaves by a tail call")
    chosen = kinds([("timed", timed), ("reads", Wants(reads=True, untimed="")), ("tail", tail)])
    assert chosen == {"timed": (Kind.ENTRY, ""), "reads": (Kind.LEARN, ""),
                      "tail": (Kind.INT3, "the function leaves by a tail call")}
    # what the process shows is said before what the returns say
    assert kinds([("tail", tail)], Shows(stopped=True))["tail"][1].startswith("the process is stopped")


def test_the_refusal_is_the_first_site_that_cannot_take_one_and_only_under_probe_inprocess() -> None:
    plan = choose([("a", COUNT), ("b", USTACK), ("c", Wants(reads=True, untimed="x"))], QUIET, "inprocess", True)
    first = refused(plan, "inprocess")
    assert first is not None and first.site == "b" and "ustack" in first.reason
    assert refused(choose([("b", USTACK)], QUIET, "auto", True), "auto") is None
    assert refused(choose([("a", COUNT), ("r", READS)], QUIET, "inprocess", True), "inprocess") is None
    # attach's int3s are no refusal: nothing in-process was wanted there
    assert refused(choose([("r", READS)], QUIET, "inprocess", False), "inprocess") is None


def test_the_line_said_of_a_site_that_keeps_an_int3() -> None:
    assert int3_line(Placement("s", Kind.LEARN), "--at f") == \
        "--at f: an int3 for its first hits, then in-process once they show what it reads"
    assert int3_line(Placement("s", Kind.INT3, "why"), "--at f (0x10)") == "--at f (0x10): an int3 (why)"


TWO_RETURNS = ReturnPoints(start=0x1000, addresses={0x1010, 0x1020}, own={0x1010, 0x1020})


@pytest.mark.parametrize(("kwargs", "says"), [
    ({"to": True}, "--to's places are int3s"),
    ({"go": True}, "Go's calls are timed by int3s"),
    ({"xmm_retval": True}, "xmm0"),
    ({"retval_in_memory": True}, "read through memory at the return"),
    ({"points": None}, "tail call or a jump through a register"),
    ({"points": ReturnPoints(addresses={0x1010}, followed=["g"])}, "tail call"),
    ({"points": ReturnPoints(addresses={0x1010}, unfollowed=1)}, "tail call"),
    ({"points": ReturnPoints(addresses={0x1010}, indirect=1)}, "jump through a register"),
    ({"points": ReturnPoints(addresses=set(range(MAX_RETURNS + 1)))}, f"{MAX_RETURNS + 1} returns, over the"),
])
def test_a_call_is_timed_by_int3s_where_its_returns_or_its_result_say_so(kwargs: dict[str, object], says: str) -> None:
    given: dict[str, object] = {"to": False, "go": False, "xmm_retval": False, "retval_in_memory": False,
                                "points": TWO_RETURNS, **kwargs}
    assert says in untimed(**given)  # type: ignore[arg-type]


def test_a_function_with_its_own_few_returns_is_timed_in_the_target() -> None:
    assert untimed(False, False, False, False, TWO_RETURNS) == ""
    assert untimed(False, False, False, False, ReturnPoints(addresses=set(range(MAX_RETURNS)))) == ""
