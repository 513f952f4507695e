"""The data area an in-process probe shares with sampler (probe.S writes it, this reads it): each
probe's counters, the producers' ticket and the ring of records, at the offsets probe.S uses.

The consumer's half of Vyukov's bounded queue: sampler reads the records from its ticket (``tail``)
on while their sequence words say they are written (t + 1), copies them out in one piece (numpy: a
record is a fixed 32 bytes) and frees their slots for the next lap (t + SLOTS). x86 keeps loads in
order with loads and stores with stores, so a record whose word says written is whole.
"""

from __future__ import annotations

import mmap
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported when a ring is made: a run with no in-process probe never loads it
    import numpy as np
    import numpy.typing as npt

HEAD = 0x40
OFF = 0x48
"""A byte: non-zero, the probes of the area only count their hits (no record, no read): set while
--max-overhead's budget rests."""
PROBES = 0x80
PROBE_STRIDE = 0x40
"""Each probe's counters on a cache line of their own: hits, then drops."""
FIRST = (0x1000 - PROBES) // PROBE_STRIDE
"""Probes whose counters lie in the data area's first page (a reading probe's own area has one: 0)."""
RING = 0x1000
SLOTS = 1 << 16
RECORD = 32
COUNTERS = RING + SLOTS * RECORD
"""Where the counters of the probes past FIRST lie: after the ring, a cache line each."""
MAX_PROBES = 8192
"""In-process probes of one process (--at 'libc:*' is 3,600 functions)."""
SIZE = COUNTERS + (MAX_PROBES - FIRST) * PROBE_STRIDE
"""Bytes of the data area: 2.5 MiB and a page (touched by the target as the ring fills and as its probes count)."""
CHUNK = 4096
"""Slots whose sequence words a drain looks at in one step."""
RECORD_FIELDS = [("seq", "<u8"), ("probe", "<u4"), ("flags", "<u4"), ("fs", "<u8"), ("tsc", "<u8")]
"""A counting probe's record (numpy's dtype of RECORD bytes)."""


def hits_at(probe: int) -> int:
    """The offset of probe ``probe``'s hit counter in the data area."""
    if not 0 <= probe < MAX_PROBES:
        raise ValueError(f"at most {MAX_PROBES} in-process probes in one process")
    return PROBES + PROBE_STRIDE * probe if probe < FIRST else COUNTERS + PROBE_STRIDE * (probe - FIRST)


def drops_at(probe: int) -> int:
    return hits_at(probe) + 8


class Ring:
    """Sampler's side of the data area, through its own mapping of it."""

    def __init__(self, view: mmap.mmap, record_type: np.dtype | None = None, slots: int = SLOTS) -> None:
        """The shared ring of the counting probes; a reading probe's own (reads.py) has its records'
        type and its number of slots."""
        import numpy as np
        import numpy.ma  # (np.unique imports it at its first call: 18 ms, at the first drain)

        if record_type is None:
            record_type = np.dtype(RECORD_FIELDS)
            assert record_type.itemsize == RECORD
        self.view = view
        self.slots = slots
        self.records: npt.NDArray[np.void] = np.frombuffer(view, record_type, slots, RING)
        self.tail = 0
        """The ticket of the next record to read."""
        self._steps = np.arange(slots, dtype=np.uint64)

    def initialise(self) -> None:
        """Every slot free for its first lap (before any probe can write)."""
        self.records["seq"] = self._steps
        self.view[HEAD:HEAD + 8] = bytes(8)
        self.tail = 0

    def counter(self, offset: int) -> int:
        return int.from_bytes(self.view[offset:offset + 8], "little")

    def hits(self, probe: int) -> int:
        return self.counter(hits_at(probe))

    def drops(self, probe: int) -> int:
        return self.counter(drops_at(probe))

    def counters(self, probes: int) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
        """The hits and the drops of probes 0 to ``probes`` - 1 of the counting probes' area (a copy each),
        read in bulk: a drain every 10 ms of 8,000 probes' counters one by one took longer than that."""
        import numpy as np

        words = PROBE_STRIDE // 8
        first = np.frombuffer(self.view, "<u8", min(probes, FIRST) * words, PROBES).reshape(-1, words)
        rest = np.frombuffer(self.view, "<u8", max(0, probes - FIRST) * words, COUNTERS).reshape(-1, words)
        both = np.concatenate([first[:, :2], rest[:, :2]])
        return both[:, 0].copy(), both[:, 1].copy()

    def only_count(self, on: bool) -> None:
        """The probes of the area only count (``on``), or count and record again."""
        self.view[OFF] = int(on)

    def head(self) -> int:
        """Tickets taken by the target's threads so far."""
        return self.counter(HEAD)

    def drain(self) -> npt.NDArray[np.void]:
        """The records written since the last drain, in ticket order (a copy), their slots freed. The
        ring from the tail on is at most two runs of slots (to its end, then from its start): each is
        looked at and copied as a slice, not slot by slot."""
        import numpy as np

        first = self.tail & (self.slots - 1)
        tickets = np.uint64(self.tail) + self._steps
        seq = self.records["seq"]
        count = 0
        while count < self.slots:  # (a chunk at a time: a slot's word is a cache line of its own)
            start = (first + count) & (self.slots - 1)
            chunk = min(CHUNK, self.slots - count, self.slots - start)
            ready = seq[start:start + chunk] == tickets[count:count + chunk] + np.uint64(1)
            if not bool(ready.all()):
                count += int(np.argmin(ready))
                break
            count += chunk
        if not count:
            empty: npt.NDArray[np.void] = self.records[:0].copy()
            return empty
        head = min(count, self.slots - first)
        parts = [self.records[first:first + head], self.records[:count - head]]
        out: npt.NDArray[np.void] = np.concatenate(parts) if count > head else parts[0].copy()
        seq[first:first + head] = tickets[:head] + np.uint64(self.slots)
        if count > head:
            seq[:count - head] = tickets[head:count] + np.uint64(self.slots)
        self.tail += count
        return out
