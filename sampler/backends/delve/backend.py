"""The delve backend: the sampling cycle, spoken through Delve's terminal client.

Per sample with a location: halt (SIGINT to dlv), ``break sampler LOC``,
``continue`` until it is hit, ``print`` each expression, ``clear sampler``,
``continue``. Without a location: halt, print, continue. Delve stops every
thread of the target for each stop.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import ClassVar

from sampler.backends.base import Capabilities
from sampler.backends.delve import parse
from sampler.backends.delve.transport import DelveTerminal
from sampler.config import SessionConfig
from sampler.errors import BackendUnavailable, DebuggerError, TargetExited, UnsupportedTarget
from sampler.process import TargetProcess
from sampler.sample import Reading, Value

HALT_TIMEOUT_S = 5.0
POLL_S = 0.05
SETTLE_S = 0.05
"""After clearing an armed breakpoint at shutdown, let the target run this long before
the final halt, so Delve absorbs traps already pending on other threads (../FACTS)."""


class DelveBackend:
    name: ClassVar[str] = "delve"
    capabilities: ClassVar[Capabilities] = Capabilities(stops_all_threads=True, languages=("go",))

    def __init__(self, config: SessionConfig, terminal: DelveTerminal,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self.term = terminal
        self.clock = clock
        self._stopped = False  # target halted, dlv at its prompt
        self._armed = False  # our breakpoint is set
        self._attached = False
        self._exited = False  # dlv said the target process ended

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess, dlv: str | None) -> DelveBackend:
        if dlv is None:
            raise BackendUnavailable("the delve backend needs dlv, which is not on PATH")
        if not target.is_go:
            raise UnsupportedTarget(f"process {target.pid} ({target.exe}) is not a Go program",
                                    "the delve backend samples Go programs only")
        if not target.has_debug_info:
            raise UnsupportedTarget(f"{target.exe} has no DWARF debug info (built with -ldflags=-s -w?)",
                                    "rebuild without stripping, or sample an unstripped build")
        return cls(config, DelveTerminal(dlv, target.pid))

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        self.term.start()
        self._attached = self._stopped = True
        try:
            self.term.run("config source-list-line-count 0")
            if self.config.location is not None:
                self._arm()  # refuse an unknown location before the first tick
                self._disarm()
            else:
                self._evaluate()  # refuse an unknown global before the first tick
            self._resume()
        except BaseException:
            self.detach()
            raise

    def sample(self, stop: threading.Event) -> Reading:
        if self.config.location is None:
            return self._sample_here()
        return self._sample_at_location(stop)

    def detach(self) -> None:
        if not self._attached:
            return
        self._attached = False
        try:
            if not self.term.alive:
                return
            try:
                if not self._exited and not self._stopped:
                    self._halt()
                if not self._exited and self._armed:
                    self._disarm()
                    self._resume()
                    time.sleep(SETTLE_S)
                    self._halt()
            except TargetExited:
                pass
            self.term.quit_leaving_target()
        finally:
            self.term.close()

    # -- the steps of a sample -----------------------------------------------

    def _sample_here(self) -> Reading:
        start = self.clock()
        self._halt()
        values, errors = self._evaluate()
        self._resume()
        return Reading(values, pause_us=(self.clock() - start) * 1e6, error="; ".join(errors))

    def _sample_at_location(self, stop: threading.Event) -> Reading:
        start = self.clock()
        self._halt()
        self._arm()
        self._resume()
        resumed = self.clock()
        text = self._wait_for_stop(resumed + self.config.hit_timeout_s, stop)
        if text is None:  # not hit in time: halt it ourselves (it may still be a hit)
            self.term.interrupt()
            text = self._expect_stop()
        stopped = self.clock()
        self._stopped_with(text)
        where = parse.parse_stop(text)
        values: tuple[Value, ...] = (None,) * len(self.config.expressions)
        if where.breakpoint == parse.BREAKPOINT:
            values, errors = self._evaluate()
            error = "; ".join(errors)
        elif stop.is_set():
            error = "stopped before the breakpoint was hit"
        elif text and "received SIGINT" in text:
            error = f"breakpoint not hit within {self.config.hit_timeout_s:g}s"
        else:
            error = f"target stopped at {where.function} ({where.file_line}) instead"
        self._disarm()
        self._resume()
        done = self.clock()
        return Reading(values, thread=where.goroutine, pause_us=((resumed - start) + (done - stopped)) * 1e6,
                       wait_us=(stopped - resumed) * 1e6, error=error)

    def _wait_for_stop(self, deadline: float, stop: threading.Event) -> str | None:
        while not stop.is_set():
            remaining = deadline - self.clock()
            if remaining <= 0:
                return None
            text = self.term.wait(min(POLL_S, remaining))
            if text is not None:
                return text
        return None

    def _halt(self) -> None:
        """Stop the running target. Raises TargetExited if it ended meanwhile."""
        text = self.term.wait(0)  # did it stop on its own (exited, crashed)?
        if text is None:
            self.term.interrupt()
            text = self._expect_stop()
        self._stopped_with(text)

    def _stopped_with(self, text: str) -> None:
        """Note that dlv is at its prompt after ``text``; raise TargetExited if the target ended."""
        self._stopped = True
        try:
            parse.check_exited(text)
        except TargetExited:
            self._exited = True
            raise

    def _expect_stop(self) -> str:
        text = self.term.wait(HALT_TIMEOUT_S)
        if text is None:
            raise DebuggerError(f"dlv did not halt the target within {HALT_TIMEOUT_S:g}s")
        return text

    def _arm(self) -> None:
        location = self.config.location or ""
        text = self.term.run(f"break {parse.BREAKPOINT} {location}")
        self._stopped_with(text)
        parse.parse_breakpoint_set(text, location)
        self._armed = True

    def _disarm(self) -> None:
        text = self.term.run(f"clear {parse.BREAKPOINT}")
        self._stopped_with(text)
        self._armed = False

    def _resume(self) -> None:
        self.term.send("continue")
        self._stopped = False

    def _evaluate(self) -> tuple[tuple[Value, ...], list[str]]:
        values: list[Value] = []
        errors: list[str] = []
        for expression in self.config.expressions:
            text = self.term.run(f"print {expression.text}")
            self._stopped_with(text)
            value, error = parse.parse_value(text, expression.text)
            values.append(value)
            if error:
                errors.append(f"{expression.name}: {error}")
        return tuple(values), errors
