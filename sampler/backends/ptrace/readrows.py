"""A reading probe's records (an in-process probe with --expr) made into rows: in bulk where each of
its expressions is a column of the records (sampler/inprocess/columns.py), else one record at a time,
the evaluator reading the registers and bytes the record holds (as the int3 path's rows are made
from a read plan's snapshot after the thread went on)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sampler.backends.ptrace.inprocess import Read
from sampler.backends.ptrace.site import Site
from sampler.evaluation.evaluate import Evaluator
from sampler.evaluation.plan import Snapshot
from sampler.inprocess import columns
from sampler.inprocess.reads import Layout, Recorded
from sampler.process.memory import Memory
from sampler.sample import Bulk, Reading


@dataclass(frozen=True)
class Pending:
    """A record to evaluate into its row when it is handed over (a drain holds thousands)."""

    rows: Rows
    record: np.void
    thread: str
    at: float

    def reading(self) -> Reading:
        return self.rows.one(self.record, self.thread, self.at)


class Rows:
    """The rows of one site's reading probe."""

    def __init__(self, site: Site, layout: Layout, memory: Memory) -> None:
        self.site = site
        self.layout = layout
        self.memory = memory
        self.columns: list[columns.Column] | None = None
        self.goid: columns.Load | None = None
        self._learnt = False

    def of(self, read: Read) -> list[Reading | Pending]:
        """The rows of a drain's records: made at once where the columns hold, else pending."""
        records, seconds = read.records, read.seconds.tolist()
        evaluated = self._evaluated(read)
        if evaluated is None:
            return [Pending(self, record, thread, at) for record, thread, at in zip(records, read.threads, seconds)]
        values, ok, threads = evaluated
        site = self.site
        return [site.recorded_values(list(row), thread, at) if holds else Pending(self, records[index], thread, at)
                for index, (row, holds, thread, at) in
                enumerate(zip(zip(*(v.tolist() for v in values)), ok.tolist(), threads, seconds))]

    def bulk(self, read: Read) -> tuple[Bulk | None, list[Reading]]:
        """The rows of a drain's records for writers that count: those the columns hold as one Bulk,
        the others one by one."""
        records, seconds = read.records, read.seconds.tolist()
        evaluated = self._evaluated(read)
        if evaluated is None:
            return None, [self.one(record, thread, at) for record, thread, at in zip(records, read.threads, seconds)]
        values, ok, threads = evaluated
        alone = [self.one(records[i], threads[i], seconds[i]) for i in np.flatnonzero(~ok).tolist()]
        count = int(ok.sum())
        if not count:
            return None, alone
        kept = [t for t, h in zip(threads, ok.tolist()) if h] if len(alone) else threads
        return Bulk(count, self.site.laid_out_columns([v[ok] if len(alone) else v for v in values]), kept), alone

    def _evaluated(self, read: Read) -> tuple[list[np.ndarray], np.ndarray, list[str]] | None:
        """Each expression's column over the records, where every read of a record's columns was
        made, and the thread of each (Go: its goroutine's id); None: the expressions are no columns."""
        records, threads = read.records, read.threads
        if not self._learnt:
            self._learnt = True
            self.columns, self.goid = self._learn(records)
        if self.columns is None:
            return None
        raw = columns.as_bytes(records, self.layout)
        values, ok = [], np.ones(len(records), bool)
        for column in self.columns:
            got, held = columns.evaluate(column, raw)
            values.append(got)
            ok &= held
        if self.goid is not None:
            goids, held = columns.evaluate(self.goid, raw)
            threads = [str(g) if h else t for g, h, t in zip(goids.tolist(), held.tolist(), threads)]
        return values, ok, threads

    def one(self, record: np.void, thread: str, at: float) -> Reading:
        registers, snapshot = self.layout.decode(record)
        assert self.site.address is not None
        return self.site.recorded(self.memory, Recorded(self.site.address, registers), snapshot, thread, at)

    def _learn(self, records: np.ndarray) -> tuple[list[columns.Column] | None, columns.Load | None]:
        """Each expression's column, learnt from these records and checked on them (None: one fails)."""
        site, layout = self.site, self.layout
        assert site.address is not None
        address = site.address
        decoded = {}

        def at(n: int) -> tuple[Recorded, Snapshot]:
            if n not in decoded:
                registers, snapshot = layout.decode(records[n])
                decoded[n] = (Recorded(address, registers), snapshot)
            return decoded[n]

        def evaluator(n: int, reads: list[tuple[int, int]] | None) -> Evaluator:
            hit, snapshot = at(n)

            def read(where: int, size: int) -> bytes:
                if reads is not None:
                    reads.append((where, size))
                return snapshot.read(where, size)
            return site.scope.evaluator(hit, read)

        learnt = []
        for index, expression in enumerate(site.expressions):
            def value(n: int, index: int = index) -> object:
                hit, snapshot = at(n)
                return site.scope.evaluate(hit, index, snapshot.read)[0]
            column = columns.learn(expression.tree, layout, records, evaluator, value)
            if column is None:
                return None, None
            learnt.append(column)
        goid = None
        if site.scope.goid_offset is not None:
            registers = at(0)[0].registers
            goid = columns.at_address(int(registers.r14) + site.scope.goid_offset, 8, False, layout,
                                      columns.as_bytes(records[:1], layout))
        return learnt, goid
