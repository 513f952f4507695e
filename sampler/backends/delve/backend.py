"""The delve backend: the sampling cycle, spoken through Delve's terminal client.

Per sample with a location: halt (SIGINT to dlv), ``break sampler LOC``,
``continue`` until it is hit, ``print`` each expression, ``clear sampler``,
``continue``. Without a location: halt, print, continue. Delve stops every
thread of the target for each stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sampler.backends.cycle import miss
from sampler.backends.delve import parse
from sampler.backends.delve.drive import POLL_S, DelveDrive, await_halt
from sampler.backends.delve.leave import settle_before_detach
from sampler.backends.delve.suggest import with_suggestion
from sampler.backends.delve.target import check
from sampler.backends.delve.transport import DelveTerminal
from sampler.config import SessionConfig
from sampler.errors import LocationNotFound, TargetExited
from sampler.safety.guardian import Guardian
from sampler.sample import Reading, Value
from sampler.stop import StopFlag
from sampler.target.process import TargetProcess


class DelveBackend(DelveDrive):

    def __init__(self, config: SessionConfig, terminal: DelveTerminal,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(config)
        self.term = terminal
        self.clock = clock
        self._stopped = False  # target halted, dlv at its prompt
        self._armed = False  # our breakpoint is set
        self._pointers: list[bool] | None = None
        """Which expressions are pointers (dlv prints the struct a pointer points to: sampler asks
        for ``&*(EXPR)`` instead, which dlv prints with the address); learnt at the first stop."""

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess, dlv: str | None) -> DelveBackend:
        return cls(config, DelveTerminal(check(target, dlv), target.pid))

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        self.term.start()
        self._attached = self._stopped = True
        if self.config.guardian:
            self.guardian = Guardian(self.term.rescue())
        self._batch(["config source-list-line-count 0"])
        if self.config.location is not None:  # refuse an unknown location before the first tick
            self._armed = True
            answer, _ = self._batch([self._break_command(), self._clear_command()])
            self._armed = False
            try:
                parse.parse_breakpoint_set(answer, self.config.location)
            except LocationNotFound as e:
                raise with_suggestion(e, self.config.pid, self.config.location) from None
        else:  # refuse an unknown global before the first tick
            outputs = self._batch(self._prints())
            if any(parse.NO_CONTEXT in text for text in outputs):  # halted where no name can be looked up
                outputs = self._batch([f"goroutine {parse.MAIN_GOROUTINE} {c}" for c in self._prints()])
            self._values(outputs)
        self._batch([], then_continue=True)

    def sample(self, stop: StopFlag) -> Reading:
        if self.config.location is None:
            return self._sample_here()
        return self._sample_at_location(stop)

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if not self._armed:  # first call: halt, set the breakpoint, go
            self._halt()
            self._armed = True
            [answer] = self._batch([self._break_command()], then_continue=True)
            parse.parse_breakpoint_set(answer, self.config.location or "")
        waiting = self.clock()
        text = self._wait_for_stop(until, stop)
        if text is None:
            return None
        stopped = self.clock()
        self._stopped_with(text)
        where = parse.parse_stop(text)
        hit = where.breakpoint == parse.BREAKPOINT
        outputs = self._batch(self._prints() if hit else [], then_continue=True)
        done = self.clock()
        if not hit:
            return None
        values, errors = self._values(outputs)
        return Reading(values, thread=where.goroutine, pause_us=(done - stopped) * 1e6,
                       wait_us=(stopped - waiting) * 1e6, error="; ".join(errors))

    def _leave(self) -> None:
        if not self.term.alive:
            return
        if not self._exited:
            settle_before_detach(running=not self._stopped, armed=self._armed, halt=self._halt,
                                 clear_and_resume=self._clear_and_resume)
        self.term.quit_leaving_target()

    def _close(self) -> None:
        self.term.close()

    def _clear_and_resume(self) -> None:
        self._batch([self._clear_command()], then_continue=True)
        self._armed = False

    # -- the steps of a sample -----------------------------------------------
    # Commands that need no decision in between go to dlv in one write: each
    # round trip saved is about a millisecond less of stopped target.

    def _sample_here(self) -> Reading:
        start = self._halt()
        outputs = self._batch(self._prints(), then_continue=True)
        done = self.clock()
        values, errors = self._values(outputs)
        return Reading(values, pause_us=(done - start) * 1e6, error="; ".join(errors))

    def _sample_at_location(self, stop: StopFlag) -> Reading:
        start = self._halt()
        self._armed = True  # from here on, until dlv says it is cleared
        [answer] = self._batch([self._break_command()], then_continue=True)
        resumed = self.clock()
        parse.parse_breakpoint_set(answer, self.config.location or "")
        text = self._wait_for_stop(resumed + self.config.hit_timeout_s, stop)
        if text is None:  # not hit in time: halt it ourselves (it may still be a hit)
            self.term.interrupt()
            text = self._expect_stop()
        stopped = self.clock()
        self._stopped_with(text)
        where = parse.parse_stop(text)
        hit = where.breakpoint == parse.BREAKPOINT
        outputs = self._batch([*(self._prints() if hit else []), self._clear_command()],
                              then_continue=True)
        done = self.clock()
        self._armed = False
        values: tuple[Value, ...] = (None,) * len(self.config.expressions)
        if hit:
            values, errors = self._values(outputs[:-1])  # the last is the clear's
            error = "; ".join(errors)
        elif stop.is_set() or "received SIGINT" in text:
            error = miss(stop, self.config.hit_timeout_s)
        else:
            error = f"target stopped at {where.function} ({where.file_line}) instead"
        return Reading(values, thread=where.goroutine, pause_us=((resumed - start) + (done - stopped)) * 1e6,
                       wait_us=(stopped - resumed) * 1e6, error=error)

    def _wait_for_stop(self, deadline: float, stop: StopFlag) -> str | None:
        while not stop.is_set():
            remaining = deadline - self.clock()
            if remaining <= 0:
                return None
            text = self.term.wait(min(POLL_S, remaining))
            if text is not None:
                return text
        return None

    def _halt(self) -> float:
        """Stop the running target; return when it was asked to stop.

        Raises TargetExited if it ended meanwhile.
        """
        text = self.term.wait(0)  # did it stop on its own (exited, crashed)?
        start = self.clock()
        if text is None:
            self.term.interrupt()
            text = self._expect_stop()
        self._stopped_with(text)
        return start

    def _stopped_with(self, text: str) -> None:
        """Note that dlv is at its prompt after ``text``; raise TargetExited if the target ended."""
        self._stopped = True
        try:
            parse.check_exited(text)
        except TargetExited:
            self._exited = True
            raise

    def _expect_stop(self) -> str:
        try:
            return await_halt(self.config.pid, self.term.wait)
        except TargetExited:
            self._exited = True
            raise

    def _batch(self, commands: list[str], then_continue: bool = False) -> list[str]:
        """Send ``commands`` (and ``continue``) in one write; return each command's output."""
        try:
            outputs = self.term.batch(commands, then_continue)
        except parse.ForgedReply:
            self._stopped = not then_continue  # dlv ran every command: the target runs on
            raise
        except TargetExited:
            self._exited = True
            raise
        for text in outputs:
            self._stopped_with(text)
        self._stopped = not then_continue
        return outputs

    def _break_command(self) -> str:
        return f"break {parse.BREAKPOINT} {self.config.location}"

    def _clear_command(self) -> str:
        return f"clear {parse.BREAKPOINT}"

    def _prints(self) -> list[str]:
        texts = [expression.text for expression in self.config.expressions]
        if self._pointers is None:  # the first stop: what each is, its value, and its value as an address
            return [*(f"whatis {t}" for t in texts), *(f"print {t}" for t in texts),
                    *(f"print &*({t})" for t in texts)]
        return [f"print &*({t})" if pointer else f"print {t}" for t, pointer in zip(texts, self._pointers)]

    def _values(self, outputs: list[str]) -> tuple[tuple[Value, ...], list[str]]:
        count = len(self.config.expressions)
        if self._pointers is None:
            whatis, printed, addressed = outputs[:count], outputs[count:2 * count], outputs[2 * count:3 * count]
            self._pointers = [parse.failure(text) is None and parse.is_pointer_type(text) for text in whatis]
            outputs = [a if pointer else p for pointer, p, a in zip(self._pointers, printed, addressed)]
        values: list[Value] = []
        errors: list[str] = []
        for expression, text, pointer in zip(self.config.expressions, outputs, self._pointers or [False] * count):
            message = parse.failure(text)
            value: Value
            if pointer and message is not None and "nil pointer" in message:
                value, error = "0x0", ""  # &*(p) of a nil p: dlv refuses; the value is the null address
            else:
                value, error = parse.parse_value(text, expression.text)
            values.append(value)
            if error:
                errors.append(f"{expression.name}: {error}")
        return tuple(values), errors
