"""Each call's return matched with its own entry (trace --latency), and each end with its start (--to).

A call is open from its entry's hit until a return's hit of the same owner (a thread; in Go, a
goroutine, which can move between threads mid-call) at the same frame. The frame is a height: the
larger, the deeper in the owner's stack (C: minus the canonical frame address, which is the same at
the entry and at the return; Go: the goroutine's stack top minus that address, which stays the same
when Go copies the stack elsewhere to grow it). So recursion pairs each return with its own entry.

What can be said without a guess:

- a return at height h closes every open call deeper than h: the stack was unwound past them without
  their return (a longjmp, a C++ exception, a Go panic recovered above them): "no return seen";
- an entry at height h closes every open call at h or deeper for the same reason;
- a return with no open call at its height is of a call under way before the trace began.

An owner's open calls, and the open calls of all owners together, are bounded (a thread that enters
a million times without returning does not grow sampler): past the bound, the oldest are dropped and
counted with those whose return was not seen. --to pairs at one height (0): an owner's second start
before its end replaces the first, as bpftrace's ``@s[tid] = nsecs`` does.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

MAX_DEPTH = 4096
"""Open calls one owner may have (recursion deeper than this: the outermost are dropped)."""
MAX_OPEN = 65536
"""Open calls of every owner together (past it, the owner unseen longest loses its open calls)."""

T = TypeVar("T")


@dataclass
class Open(Generic[T]):
    height: int
    began: float
    """When the call's own time started (monotonic seconds: its thread went on from the entry's stop)."""
    stalled: float
    """Its owner's stalls for sampler (seconds) summed up to the entry: the ones after it, until the
    return, were inside the call and are taken out of its time."""
    what: T
    """What the entry read (its row, waiting for the return)."""
    spanned: float = 0.0
    """Seconds of sampler's work on the whole process (putting probes in) while it was open."""
    tag: int | None = None
    """Its return address (where known): the return that ends it goes there too."""
    stops: int = 0
    """Its owner's stops for sampler up to the entry (the ones after it, until the end, were inside)."""
    inside: int = 0
    """Once ended: how many stops for sampler were inside it."""


class Calls(Generic[T]):
    def __init__(self, max_depth: int = MAX_DEPTH, max_open: int = MAX_OPEN,
                 chains: Callable[[T, T], bool] = lambda _open, _new: False) -> None:
        """``chains(open, new)``: the open call's code jumps to the new one's (a tail call): a new call at
        the open one's height and return address continues it, and both end at one return."""
        self.chains = chains
        self._open: OrderedDict[object, list[Open[T]]] = OrderedDict()
        self._stalls: dict[object, float] = {}
        self._stops: dict[object, int] = {}
        self.max_depth = max_depth
        self.max_open = max_open
        self.total = 0
        self.unseen = 0
        """Calls whose return was never seen (their frame unwound past, or dropped past a bound)."""
        self.dropped = 0
        """Of those, calls dropped past a bound."""
        self.paired = 0

    def stalled(self, owner: object, seconds: float) -> None:
        """The owner was stopped for sampler this long (an entry's or a return's stop); kept only while
        the owner has an open call (the stalls inside it are taken out of its time)."""
        if owner in self._open:
            self._stalls[owner] = self._stalls.get(owner, 0.0) + seconds
            self._stops[owner] = self._stops.get(owner, 0) + 1

    def abandon(self) -> int:
        """Every open call loses its end (its return will not be seen): how many there were."""
        count = self.total
        self._open.clear()
        self._stalls.clear()
        self._stops.clear()
        self.total = 0
        return count

    def stalled_all(self, seconds: float) -> None:
        """Every owner with an open call was stopped for sampler this long."""
        for owner in self._open:
            self._stalls[owner] = self._stalls.get(owner, 0.0) + seconds
            self._stops[owner] = self._stops.get(owner, 0) + 1

    def spanning(self, seconds: float) -> None:
        """Sampler worked on the whole process this long: every open call spans it (its row says so)."""
        for stack in self._open.values():
            for call in stack:
                call.spanned += seconds

    def enter(self, owner: object, height: int, began: float, what: T, tag: int | None = None) -> None:
        """``tag``: the call's return address, where known: an open call at the same height with the same
        one whose code jumps to this one's (``chains``) continues in it and ends with it; any other is
        gone (a longjmp or an exception left it, and its caller called again)."""
        stack = self._open.get(owner)
        if stack is None:
            stack = self._open[owner] = []
        else:
            self._open.move_to_end(owner)
        while stack and (stack[-1].height > height or
                         (stack[-1].height == height and
                          (tag is None or stack[-1].tag != tag or not self.chains(stack[-1].what, what)))):
            stack.pop()
            self.total -= 1
            self.unseen += 1
        stack.append(Open(height, began, self._stalls.get(owner, 0.0), what, tag=tag,
                          stops=self._stops.get(owner, 0)))
        self.total += 1
        if len(stack) > self.max_depth:
            del stack[0]
            self._lost(1)
        while self.total > self.max_open:
            oldest, lost = next(iter(self._open.items()))
            del self._open[oldest]
            self._stalls.pop(oldest, None)
            self._stops.pop(oldest, None)
            self._lost(len(lost))

    def leave(self, owner: object, height: int, tag: int | None = None) -> tuple[Open[T], float] | None:
        """The open call this return ends, and the owner's stalls for sampler inside it (seconds);
        None when no call of the owner is open at that height (a tail call's chain: ended())."""
        ended = self.ended(owner, height, tag)
        return ended[0] if ended else None

    def ended(self, owner: object, height: int, tag: int | None = None) -> list[tuple[Open[T], float]]:
        """Every open call this return ends, innermost first: one, or a chain of calls that jumped to
        one another (tail calls, same height and return address); each with its owner's stalls for
        sampler inside it (seconds). A call open at that height with another return address is gone
        (counted): its frame was left without its return, and this is another call's."""
        stack = self._open.get(owner)
        while stack and stack[-1].height > height:
            stack.pop()
            self.total -= 1
            self.unseen += 1
        out: list[tuple[Open[T], float]] = []
        while stack and stack[-1].height == height:
            if tag is not None and stack[-1].tag is not None and stack[-1].tag != tag:
                if not out:
                    stack.pop()
                    self.total -= 1
                    self.unseen += 1
                break
            call = stack.pop()
            self.total -= 1
            self.paired += 1
            call.inside = self._stops.get(owner, 0) - call.stops
            out.append((call, self._stalls.get(owner, 0.0) - call.stalled))
            if tag is None or call.tag is None:
                break
        if stack is not None and not stack:
            del self._open[owner]
            self._stalls.pop(owner, None)
            self._stops.pop(owner, None)
        return out

    def has(self, owner: object) -> bool:
        """The owner has an open call."""
        return owner in self._open

    def open_calls(self) -> int:
        return self.total

    def _lost(self, count: int) -> None:
        self.total -= count
        self.unseen += count
        self.dropped += count
