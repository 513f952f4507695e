"""Many processes in one run: one tracing worker, one ptrace backend per process.

Each process keeps everything a run of one has (its modules and load bias, breakpoints,
journal entry, plans, children let go clean); the router (router.py) hands each its
tasks' events, and one guardian covers them all, told which process each byte is in.

A tick arms the probe's breakpoints in every process, then serves all of them until each
has been hit once or the hit timeout passed: one row per process per probe, each with its
``pid``. Tracing, every breakpoint of every process stays armed and each hit is a row.
Between ticks every process's signals are passed on at once, whichever is waiting.

A process that ends (exits, execs, cannot be attached or read) ends its part of the run
with one line; the others go on. The run ends when none is left.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import time
from collections.abc import Callable
from functools import partial
from typing import TypeVar

from sampler import notice, waits
from sampler.backends.base import Note, Stopping
from sampler.backends.ptrace.backend import Company, PtraceBackend, Tally, Turn
from sampler.backends.ptrace.rescue import PatchRescue
from sampler.config import SessionConfig
from sampler.debuginfo.modules import Modules
from sampler.errors import (
    ExpressionError,
    LocationNotFound,
    ProbeRefused,
    ProcessNotFound,
    SamplerError,
    TargetExited,
    UsageError,
)
from sampler.probes.columns import value_columns
from sampler.process.reads import UnreadableMemory
from sampler.process.router import Router
from sampler.safety.guardian import Guardian
from sampler.sample import Reading
from sampler.stop import StopFlag
from sampler.target import execs, pgrep, procfs
from sampler.target.process import TargetProcess

T = TypeVar("T")
DISCOVER_EVERY_S = 0.2
"""Tracing with --exe: how often /proc is looked at for new processes of the program."""
SETTLED_S = 0.005
"""--exe: a new process joins once its mappings stayed the same this long (its dynamic loader,
which maps the libraries, relocates them and protects what it relocated, is done)."""
SETTLE_AT_MOST_S = 2.0
"""--exe: ... or once it is this old since it was found, whatever its mappings do."""
OLD_S = 0.1
"""--exe: a process found this long after it started is past its loader: it joins at once."""
RESCAN_EVERY_S = 2.0
"""--exe: how often every process is looked at again (one that exec'd into the program since);
in between only new PIDs are."""
ENDS_A_PROCESS = (SamplerError, UnreadableMemory, ProcessLookupError, FileNotFoundError)
"""What ends one process's part (in a run of one they end the run)."""
ENDS_THE_RUN = (ExpressionError, LocationNotFound, ProbeRefused)
"""A question wrong for the program: asked of the others it would be as wrong."""


class Fleet(Stopping):
    def __init__(self, config: SessionConfig, company: Company, members: list[PtraceBackend],
                 make: Callable[[int, list[Modules]], PtraceBackend] | None = None) -> None:
        """``members``: built with ``company`` (create() builds them); ``make``: --exe, builds the
        backend of a process that started running the program (checked, repaired), with the modules
        of a process mapped alike when one of those given is."""
        self.config = config
        self.make = make
        self.company = company
        if config.follow_forks:
            company.adopt = self._adopt
        self.router = company.router
        self._judged: set[int] = set(config.targets)
        """--exe: the PIDs looked at (pgrep.running)."""
        self._scanned = self._rescanned = time.monotonic()
        self.members = list(members)
        """The processes still sampled, in the order given."""
        self._count = len(members)
        """Processes taken in so far (for the notes)."""
        self._tally = Tally()
        """What the processes whose part ended counted (for the notes)."""
        self._closed: set[int] = set()
        """The modules closed already (by id), their last process gone."""
        self.probe_column = any(member.probe_column for member in members)
        self.columns = value_columns(config.expressions, self.probe_column, config.timing is not None)
        """The value columns of its readings (the Backend interface)."""
        self._ready: list[Reading] = []
        """The rest of the tick's readings: sample() hands them out one at a time."""
        self._next = 0
        """Where trace() looks first for a hit (each process in turn comes first)."""
        self.ended: list[tuple[int, str]] = []
        """(PID, why) of each process whose part ended before the run did."""
        self._notes: list[Note] = []
        self._zero_stop = not config.probe_list()
        self._probes = max(1, len(config.probe_list()))
        """Samples of each process per tick: one of each probe."""
        self._armed = False
        """Tracing: every process's breakpoints are in."""
        self._since = 0.0
        """Tracing: when the last row's hit was handed out (or the breakpoints went in)."""
        self._last_error: BaseException | None = None
        self._began = 0.0
        """When the tick's samples began (every process armed at once)."""
        self.followed: set[PtraceBackend] = set()
        """--follow-forks: the children taken in."""
        self.followed_ended = 0
        self.not_followed = 0
        """Children that could not be taken in (let go clean)."""
        self.joined_after: list[float] = []
        """--exe: how long each process that joined during the run had run by then (s)."""
        self.not_joined = 0
        """--exe: processes of the program found but gone (or refused) before they could join."""
        self.execs: execs.ExecEvents | None = None
        """--exe, tracing: the kernel's word of each exec as it happens (None: /proc is looked at
        only). Opened at the first trace, after the guardian was forked: it must not hold it."""
        self._wants_execs = config.exe is not None and make is not None and config.every_hit
        self._told_of_execs = False
        self._heard: dict[int, float] = {}
        """Exec'd processes heard of (while sleeping) and not looked at yet, with when."""
        self.joined_at_exec = 0
        """--exe: processes that joined when the kernel told of their exec (their age exact)."""
        self._settling: dict[int, tuple[float, float, bytes]] = {}
        """--exe: new processes not taken in yet, their loader maybe still at work: PID to (when
        found, when its mappings last changed, the mappings then)."""
        self._exec_at: dict[int, float] = {}
        """--exe: when each process of the program the kernel told of exec'd (time.monotonic())."""

    @classmethod
    def create(cls, config: SessionConfig, prepare: Callable[[int], TargetProcess]
               ) -> tuple[Fleet, list[tuple[int, SamplerError]]]:
        """Each process of ``config.pids`` checked and repaired (``prepare``) and built on its own,
        those of one program sharing their modules; one that cannot be is left out (returned with
        why) and the run goes on with the others. None can be: the error says why for each."""
        company = Company(Router())

        def make(pid: int, read: list[Modules]) -> PtraceBackend:
            """``read``: the modules read so far; a process mapped like one of them (a server's
            workers) shares them."""
            target = prepare(pid)
            one = dataclasses.replace(config, pid=pid, pids=())
            alike = next((modules for modules in read if modules.mapped_alike(pid)), None)
            return procfs.gone_is_exit(pid, partial(PtraceBackend.create, one, target, alike, company))

        members: list[PtraceBackend] = []
        failed: list[tuple[int, SamplerError]] = []
        for pid in config.pids:
            try:
                members.append(make(pid, _modules_of(members)))
            except ENDS_THE_RUN:
                for member in members:
                    member.detach()
                for modules in _modules_of(members):
                    modules.close()  # (a member of a company leaves its modules to the fleet)
                raise  # a question wrong for the program: as wrong for the others
            except SamplerError as e:
                failed.append((pid, e))
        if not members:  # one line for all
            error = failed[-1][1]
            shown = "; ".join(f"PID {pid}: {why.message}" for pid, why in failed[:3])
            error.message = f"none of the {len(config.pids)} processes can be sampled ({shown}" + \
                (f"; and {len(failed) - 3} more)" if len(failed) > 3 else ")")
            raise error
        return cls(config, company, members, make), failed

    def begin_tick(self) -> int:
        """A process that started running the program (--exe) joins here, so that the count is
        the tick's own."""
        self._discover()
        return len(self.members) * self._probes

    @property
    def pids(self) -> list[int]:
        return [member.config.pid for member in self.members]

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        if not self._zero_stop and self.config.guardian:
            self.company.guardian = Guardian(PatchRescue(self.members[0].config.pid))
        for member in list(self.members):
            self._each(member, member.attach, at_attach=True)
        if not self.members:
            raise self._none_left()

    def _adopt(self, parent: PtraceBackend, child: int) -> bool:
        """--follow-forks: ``parent``'s process forked ``child`` (stopped before its first
        instruction, cleaned of sampler's bytes, waiting with its parent): sample it too, with
        the parent's modules (the same program, mapped at the same addresses)."""
        member = PtraceBackend(dataclasses.replace(parent.config, pid=child), parent.modules, parent.is_go,
                               self.company)
        try:
            member.attach(forked=True)
            if self.config.every_hit and self._armed:
                member.arm_all()  # before it runs: none of its calls is missed
        except ENDS_A_PROCESS:
            member.let_go_at_first_stop()
            self.not_followed += 1
            return False
        member.resume_first_stop()
        self.members.append(member)
        self._count += 1
        self.followed.add(member)
        return True

    def sample(self, stop: StopFlag) -> Reading:
        if not self._ready:
            self._check_left()
            self._ready = self._tick(stop)
        return self._ready.pop(0)

    def _check_left(self) -> None:
        if not self.members and self.config.exe is None:
            raise self._none_left()

    def _discover(self, every_s: float = 0.0) -> None:
        """--exe: take in each process that started running the program: at once when the kernel
        tells of its exec, else when /proc is looked at (at most every ``every_s``)."""
        if self.config.exe is None or self.make is None:
            return
        found: list[int] = []
        if self.execs is not None:
            self._hear()
            fresh, self._heard = self._heard, {}
            for pid in fresh:
                self._settling.pop(pid, None)  # it exec'd again: judged anew
            if fresh:
                try:
                    found = pgrep.running(self.config.exe, None, self.config.users, among=list(fresh))
                except UsageError:
                    pass  # the file is being replaced: looked at in /proc again soon
                if len(self._exec_at) > execs.MAX_PENDING:
                    self._exec_at.clear()
                self._exec_at.update({pid: fresh[pid] for pid in found})
        now = time.monotonic()
        if now - self._scanned >= every_s:
            if now - self._rescanned > RESCAN_EVERY_S:  # a process that exec'd into the program since
                self._rescanned = now
                self._judged = {member.config.pid for member in self.members}
            self._scanned = now
            try:
                found += [pid for pid in pgrep.running(self.config.exe, self._judged, self.config.users)
                          if pid not in found]
            except UsageError:
                pass  # the file is being replaced: looked at again next time
        found += [pid for pid in self._settling if pid not in found]
        for pid in found:
            if any(member.config.pid == pid for member in self.members):
                self._settling.pop(pid, None)
                continue  # a child followed at its fork
            waited = pid in self._settling
            if not self._settled(pid):
                continue
            try:
                if waited and not pgrep.running(self.config.exe, None, self.config.users, among=[pid]):
                    self._exec_at.pop(pid, None)
                    continue  # while it settled it exec'd another program (or changed user)
                if procfs.tracer_pid(pid) == os.getpid():  # a child at its fork, this worker's still
                    self._judged.discard(pid)
                    continue
            except (UsageError, ProcessNotFound):
                pass  # gone: make() says so
            try:
                member = self.make(pid, self._modules())
            except ENDS_A_PROCESS as e:
                notice.say(f"PID {pid} (started running {self.config.exe}): {_said(e)}; not sampled")
                self.not_joined += 1
                continue
            self._take_in(member)
            if member not in self.members:  # gone (or refused) while it was attached
                self.not_joined += 1
            else:
                exec_at = self._exec_at.pop(pid, None)
                age = time.monotonic() - exec_at if exec_at is not None else procfs.age_s(pid)
                self.joined_after.append(age or 0.0)
                self.joined_at_exec += exec_at is not None
                if not self.config.quiet:
                    when = "" if age is None else \
                        f" {_ms(age)} ms ago (its exec)" if exec_at is not None else f" about {_ms(age)} ms ago"
                    notice.say(f"PID {pid} started running {self.config.exe}{when}"
                               + ": sampling it too from now (its calls before were not traced)")

    def _hear(self) -> None:
        """Keep the execs the kernel told of since (called by the router's sleep when it did)."""
        if self.execs is not None:
            self._heard.update(self.execs.take())
            if len(self._heard) > execs.MAX_PENDING:  # a storm of execs: /proc is looked at instead
                self._heard.clear()
                self.execs.lost = True

    def _listen_for_execs(self) -> None:
        """--exe, tracing: subscribe to the kernel's process events, once."""
        if not self._wants_execs:
            return
        self._wants_execs = False
        self.execs = execs.open_events()
        if self.execs is not None:
            self._told_of_execs = True
            self.router.wakeups.also[self.execs.fileno()] = self._hear

    def _settled(self, pid: int) -> bool:
        """Whether a new process of the program can join now: its dynamic loader is done (its
        mappings the same for SETTLED_S), or it was old when found. A process caught in its
        loader has no libraries yet, or libraries not relocated (an IFUNC's slot unresolved)."""
        now = time.monotonic()
        text = procfs.maps_text(pid)
        if not text:  # gone (a zombie maps nothing)
            if self._settling.pop(pid, None) is not None:
                self.not_joined += 1  # it ran the program, ended before it could join
                self._exec_at.pop(pid, None)
                return False
            return True  # make() says so
        seen = self._settling.get(pid)
        if seen is None:
            exec_at = self._exec_at.get(pid)
            age = now - exec_at if exec_at is not None else procfs.age_s(pid)
            if age is None or age >= OLD_S:
                return True
            self._settling[pid] = (now, now, text)
            return False
        found, changed, before = seen
        if text != before:
            self._settling[pid] = (found, now, text)
            return now - found >= SETTLE_AT_MOST_S
        if now - changed < SETTLED_S and now - found < SETTLE_AT_MOST_S:
            return False
        del self._settling[pid]
        return True

    def _take_in(self, member: PtraceBackend) -> None:
        self.members.append(member)
        self._count += 1
        self._each(member, member.attach, at_attach=True, alone=True)
        if member in self.members and self.config.every_hit and self._armed:
            self._each(member, member.arm_all)

    def _tick(self, stop: StopFlag) -> list[Reading]:
        """A sample of each probe in every process (a child followed meanwhile joins at the next)."""
        members = list(self.members)
        readings: list[Reading] = []
        for _ in range(self._probes):
            readings += self._turn(members, stop)
        return readings

    def _turn(self, members: list[PtraceBackend], stop: StopFlag) -> list[Reading]:
        """One probe's sample in each of ``members`` at once."""
        self._began = time.monotonic()
        if self._zero_stop:
            read = {member: self._each(member, member.read_globals) for member in members}
            return [self._tagged(member, read[member]) for member in members]
        turns: dict[PtraceBackend, Turn] = {}
        readings: dict[PtraceBackend, Reading] = {}
        for member in members:
            if member not in self.members:
                continue  # its part ended in the tick's turn before
            turn = self._each(member, member.begin_turn)
            if turn is not None:
                turns[member] = turn
        deadline = time.monotonic() + self.config.hit_timeout_s
        while turns and not stop.is_set():
            self.router.drain()
            for member in self._with_events(list(turns)):
                reading = self._each(member, partial(member.take_turn, turns[member], 0.0, stop))
                if reading is not None or member not in self.members:
                    turns.pop(member)
                    if reading is not None:
                        readings[member] = reading
            self._serve(exclude=turns)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            if turns and not self.router.busy():
                self.router.sleep(remaining)
        for member, turn in turns.items():
            reading = self._each(member, partial(member.end_turn, turn, stop))
            if reading is not None:
                readings[member] = reading
        return [self._tagged(member, readings.get(member)) for member in members]

    def _tagged(self, member: PtraceBackend, reading: Reading | None) -> Reading:
        """The reading with its process's PID (and the probe column, where other processes
        have one); a process whose part ended in the tick gets a row that says why."""
        if reading is None:
            width = len(self.config.expressions) + (1 if self.probe_column else 0)
            why = next((why for pid, why in self.ended if pid == member.config.pid), "its part of the run ended")
            return Reading((None,) * width, error=why, pid=member.config.pid, began=self._began)
        if self.probe_column and not member.probe_column:
            reading = dataclasses.replace(reading, values=(member.config.location, *reading.values))
        return dataclasses.replace(reading, pid=member.config.pid, began=self._began)

    def _with_events(self, waiting: list[PtraceBackend]) -> list[PtraceBackend]:
        """Of ``waiting``, those with events to serve (a hit among them)."""
        return [member for member in waiting if member.tracer is not None and member.tracer.has_events()]

    def _serve(self, exclude: dict[PtraceBackend, Turn] | None = None) -> None:
        """Pass on the signals and follow the new tasks of every process not waiting for a hit."""
        for member in list(self.members):
            if (exclude is None or member not in exclude) and member.tracer is not None \
                    and member.tracer.has_events():
                self._each(member, partial(member.tracer.serve_until, 0.0, StopFlag()))

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if self._zero_stop:
            raise UsageError("every-hit tracing needs --at")
        if not self._armed:  # at the start, and after the breakpoints were out for a while
            for member in list(self.members):
                self._each(member, member.arm_all)
            self._armed = True
            self._since = time.monotonic()
        self._listen_for_execs()
        self._discover(DISCOVER_EVERY_S)
        if not self.members and self.config.exe is not None:  # none runs the program now
            self._wait_for_exec(stop, max(0.0, min(until - time.monotonic(), DISCOVER_EVERY_S)))
            return None
        while not stop.is_set() and self.members:
            self.router.drain()
            members = self.members[self._next:] + self.members[:self._next]
            for member in self._with_events(members):
                reading = self._each(member, partial(member.trace, stop, 0.0))
                if reading is not None:
                    self._next = (self.members.index(member) + 1) % len(self.members) \
                        if member in self.members else 0
                    # a process's own wait is from its turn here (microseconds): the run's is from
                    # the row before, as in a run of one
                    now = time.monotonic()
                    waited = max(reading.wait_us, (now - self._since) * 1e6 - reading.pause_us)
                    self._since = now
                    return self._tagged(member, dataclasses.replace(reading, wait_us=waited))
            remaining = until - time.monotonic()
            if remaining <= 0:
                return None
            if not self.router.busy():
                self.router.sleep(min(remaining, SETTLED_S) if self._settling else remaining)
            if self._heard or self._settling:
                self._discover(DISCOVER_EVERY_S)  # a process that exec'd the program joins at once
        self._check_left()
        return None

    def _wait_for_exec(self, stop: StopFlag, seconds: float) -> None:
        """No process runs the program: wait ``seconds``, or until the kernel tells of an exec."""
        if self.execs is None:
            stop.wait(seconds)
            return
        deadline = time.monotonic() + seconds
        while not stop.is_set() and time.monotonic() < deadline:
            if waits.readable([self.execs.fileno()], min(SETTLED_S if self._settling else 0.05,
                                                         deadline - time.monotonic())) or self._settling:
                self._hear()
                return

    def idle(self, seconds: float, stop: StopFlag) -> None:
        self._check_left()
        if self._zero_stop:
            stop.wait(seconds)
            return
        if self.config.every_hit:  # the breakpoints out for a while (--max-overhead)
            for member in list(self.members):
                self._each(member, member.disarm_all)
            self._armed = False
        deadline = time.monotonic() + seconds
        if not self.members:  # --exe, none runs the program now
            stop.wait(seconds)
            return
        while not stop.is_set():
            self.router.drain()
            self._serve()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if not self.router.busy():
                self.router.sleep(remaining)

    def detach(self) -> None:
        failed: BaseException | None = None
        for member in list(self.members):  # each, whatever another's did
            try:
                member.detach()
            except ENDS_A_PROCESS as e:
                self._notes.append(Note(f"PID {member.config.pid}: {_said(e)}", matters=True))
            except BaseException as e:
                failed = failed or e
            self._tally += member.tally
        for member in self.members:
            self._close_modules(member, every=True)
        self.members.clear()
        if self.execs is not None:
            self.router.wakeups.also.pop(self.execs.fileno(), None)
            self.execs.close()
            self.execs = None
        if failed is not None:  # some bytes may be in still: the guardian puts them back when the worker ends
            raise failed
        if self.company.guardian is not None:  # only once every byte is back
            guardian, self.company.guardian = self.company.guardian, None
            guardian.dismiss()

    def _modules(self) -> list[Modules]:
        """The modules the processes still sampled use, each once."""
        return _modules_of(self.members)

    def _close_modules(self, member: PtraceBackend, every: bool = False) -> None:
        """Close the process's modules unless another process still uses them (``every``: at the end)."""
        modules = member.modules
        if id(modules) in self._closed or (not every and any(m.modules is modules for m in self.members)):
            return
        self._closed.add(id(modules))
        modules.close()

    def notes(self) -> list[Note]:
        said = list(self._notes)
        said += self._tally.notes(self.config.every_hit, many=True)
        if self.config.follow_forks:
            said.append(Note(f"--follow-forks: {len(self.followed)} child process(es) followed from their first "
                        f"instruction, {self.followed_ended} of them ended before the run did"
                        + (f"; {self.not_followed} could not be and were let go clean (calls in them were not "
                           "traced: missed)" if self.not_followed else ""), matters=bool(self.not_followed)))
        if self.joined_after:
            joined = sorted(self.joined_after)
            exact = self.joined_at_exec == len(joined)
            unseen = ("each process was looked at when the kernel told of its exec (one that ended before "
                      "sampler could look at it is not counted)"
                      + ("; the kernel dropped process events (too many execs): some were looked at "
                         "only in /proc" if self.execs is not None and self.execs.lost else "")
                      if self._told_of_execs else
                      f"a process that starts and ends between two looks for new ones (every "
                      f"{DISCOVER_EVERY_S:g} s tracing, every tick sampling) is not seen at all")
            said.append(Note(f"--exe: {len(joined)} process(es) joined the run after they started, "
                        f"{_ms(joined[0])}-{_ms(joined[-1])} ms after (median {_ms(statistics.median(joined))} ms"
                        f"{', from its exec' if exact else ', to 10 ms'}): the calls they made before were "
                        f"missed; {unseen}"
                        + (f"; {self.not_joined} found were gone before they could join" if self.not_joined else ""),
                             matters=True))
        elif self.not_joined:
            said.append(Note(f"--exe: {self.not_joined} process(es) of the program were gone before they could "
                             "join (their calls were missed)", matters=True))
        if self.ended:
            said.append(Note(f"{len(self.ended)} of {self._count} process(es) ended before the run did: "
                        + "; ".join(f"{pid} ({why})" for pid, why in self.ended[:5])
                        + (f" and {len(self.ended) - 5} more" if len(self.ended) > 5 else "")))
        return said

    # -- one process's part ------------------------------------------------------

    def _each(self, member: PtraceBackend, call: Callable[[], T], at_attach: bool = False,
              alone: bool = False) -> T | None:
        """``call()`` for one process; what ends its part ends only its part (one line). A
        question wrong for the program ends the run, unless the process came ``alone`` (found
        running the program during the run: it may have exec'd into another since)."""
        try:
            return call()
        except ENDS_A_PROCESS as e:
            if not alone and (isinstance(e, ENDS_THE_RUN) or (isinstance(e, UsageError) and not at_attach)):
                raise
            self._end(member, e)
            return None

    def _end(self, member: PtraceBackend, error: BaseException) -> None:
        why = _said(error)
        if member in self.members:
            self.members.remove(member)
        if member.modules.pid == member.config.pid:  # others share them: read from one still there
            heir = next((m for m in self.members if m.modules is member.modules), None)
            if heir is not None:
                member.modules.move_to(heir.config.pid)
        try:
            member.detach()
        except ENDS_A_PROCESS as e:
            why += f"; then {_said(e)}"
        self._tally += member.tally
        self._close_modules(member)
        self._last_error = error
        if member in self.followed:  # a worker's exit is no news: counted for the summary
            self.followed_ended += 1
            return
        self.ended.append((member.config.pid, why))
        if self.members or self.config.exe is not None:
            notice.say(f"PID {member.config.pid}: {why}; sampling goes on in {len(self.members)} other process(es)")

    def _none_left(self) -> SamplerError:
        error = self._last_error
        if isinstance(error, SamplerError) and self._count == 1:
            return error
        if isinstance(error, SamplerError):
            error.message = f"none of the {self._count} processes is left (the last: {error.message})"
            return error
        return TargetExited(f"none of the {self._count} processes is left")


def _modules_of(members: list[PtraceBackend]) -> list[Modules]:
    """The modules ``members`` use, each once (processes of one program share theirs)."""
    return list({id(member.modules): member.modules for member in members}.values())


def _said(error: BaseException) -> str:
    if isinstance(error, SamplerError):
        return error.message
    return f"{type(error).__name__}: {error}"


def _ms(seconds: float) -> str:
    """Milliseconds to one decimal below 10 ms, whole above."""
    return f"{seconds * 1000:.1f}" if seconds < 0.01 else f"{seconds * 1000:.0f}"
