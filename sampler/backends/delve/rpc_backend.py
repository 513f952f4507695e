"""The delve-rpc backend: the same sampling cycle as ``delve``, spoken through Delve's
published JSON-RPC API (headless dlv on loopback) instead of its terminal.
"""

from __future__ import annotations

import time
from typing import Any

from sampler import notice
from sampler.backends.cycle import miss
from sampler.backends.delve import parse
from sampler.backends.delve.drive import CALL_TIMEOUT_S, POLL_S, DelveDrive, await_halt
from sampler.backends.delve.leave import settle_before_detach
from sampler.backends.delve.rescue import DlvRescue, rescue_rpc
from sampler.backends.delve.rpc import DelveRpc, RpcError
from sampler.backends.delve.suggest import with_suggestion
from sampler.backends.delve.target import check
from sampler.config import SessionConfig
from sampler.errors import DebuggerError, LocationNotFound, TargetExited
from sampler.safety.guardian import Guardian
from sampler.sample import Reading, Value
from sampler.stop import StopFlag
from sampler.target.process import TargetProcess

SCOPE = {"GoroutineID": -1, "Frame": 0, "DeferredCall": 0}
LOAD = {"FollowPointers": True, "MaxVariableRecurse": 1, "MaxStringLen": 64, "MaxArrayValues": 16,
        "MaxStructFields": -1}


class DelveRpcBackend(DelveDrive):

    def __init__(self, config: SessionConfig, rpc: DelveRpc) -> None:
        super().__init__(config)
        self.rpc = rpc
        self._continuing: int | None = None  # id of the pending continue request
        self._breakpoint: int | None = None  # id of our breakpoint while it is set
        self._address = 0

    @classmethod
    def create(cls, config: SessionConfig, target: TargetProcess, dlv: str | None) -> DelveRpcBackend:
        return cls(config, DelveRpc(check(target, dlv), target.pid))

    # -- the Backend interface -------------------------------------------------

    def attach(self) -> None:
        self.rpc.start()
        self._attached = True
        if self.rpc.shared_network:
            notice.say(f"dlv's API listens on the host's loopback ({self.rpc.address}), where any local "
                       f"process can drive it: no network of its own ({self.rpc.shared_network}); "
                       "run sampler as root, or use --backend ptrace")
        if self.config.guardian:
            pid, dlv_pid, address = self.config.pid, self.rpc.dlv_pid, self.rpc.address
            self.guardian = Guardian(DlvRescue(pid, dlv_pid, lambda: rescue_rpc(pid, dlv_pid, address)))
        if self.config.location is not None:
            try:
                found = self.rpc.call("FindLocation", {"Scope": SCOPE, "Loc": self.config.location})
            except RpcError as e:
                raise with_suggestion(LocationNotFound(f"dlv cannot break at {self.config.location!r}: {e}"),
                                      self.config.pid, self.config.location) from None
            locations = found.get("Locations") or []
            if not locations:
                raise LocationNotFound(f"dlv cannot break at {self.config.location!r}")
            self._address = int(locations[0]["pc"])
        else:  # refuse an unknown global before the first tick
            _, problems = self._evaluate()
            if any(parse.NO_CONTEXT in problem for problem in problems):  # halted where no name can be looked up
                self._evaluate({**SCOPE, "GoroutineID": parse.MAIN_GOROUTINE})
        self._continue()

    def sample(self, stop: StopFlag) -> Reading:
        start = time.monotonic()
        self._halt()
        if self.config.location is None:
            found, problems = self._evaluate()
            self._continue()
            return Reading(found, pause_us=(time.monotonic() - start) * 1e6, error="; ".join(problems))
        created = self.rpc.call("CreateBreakpoint", {"Breakpoint": {"addr": self._address,
                                                                     "name": parse.BREAKPOINT}})
        self._breakpoint = int(created["Breakpoint"]["id"])
        self._continue()
        resumed = time.monotonic()
        state = self._wait_for_stop(resumed + self.config.hit_timeout_s, stop)
        if state is None:
            state = self._halt()
        stopped = time.monotonic()
        thread = state.get("currentThread") or {}
        hit = (thread.get("breakPoint") or {}).get("name") == parse.BREAKPOINT
        values: tuple[Value, ...] = (None,) * len(self.config.expressions)
        if hit:
            values, errors = self._evaluate()
            error = "; ".join(errors)
        else:
            error = miss(stop, self.config.hit_timeout_s)
        self._clear()
        self._continue()
        done = time.monotonic()
        return Reading(values, thread=str(thread.get("goroutineID") or "") if hit else "",
                       pause_us=((resumed - start) + (done - stopped)) * 1e6,
                       wait_us=(stopped - resumed) * 1e6, error=error)

    def trace(self, stop: StopFlag, until: float) -> Reading | None:
        if self._breakpoint is None:  # first call: halt, set the breakpoint, go
            self._halt()
            created = self.rpc.call("CreateBreakpoint", {"Breakpoint": {"addr": self._address,
                                                                         "name": parse.BREAKPOINT}})
            self._breakpoint = int(created["Breakpoint"]["id"])
            self._continue()
        waiting = time.monotonic()
        state = self._wait_for_stop(until, stop)
        if state is None:
            return None
        stopped = time.monotonic()
        thread = state.get("currentThread") or {}
        hit = (thread.get("breakPoint") or {}).get("name") == parse.BREAKPOINT
        values, errors = self._evaluate() if hit else ((), [])
        self._continue()
        done = time.monotonic()
        if not hit:
            return None
        return Reading(values, thread=str(thread.get("goroutineID") or ""), pause_us=(done - stopped) * 1e6,
                       wait_us=(stopped - waiting) * 1e6, error="; ".join(errors))

    def _leave(self) -> None:
        if not self._exited:
            settle_before_detach(running=self._continuing is not None, armed=self._breakpoint is not None,
                                 halt=self._halt, clear_and_resume=self._clear_and_resume)
        try:
            self.rpc.detach()
        except (RpcError, DebuggerError):
            pass  # dlv is gone, or the target is: nothing left to detach from

    def _close(self) -> None:
        self.rpc.close()

    # -- steps ------------------------------------------------------------------

    def _continue(self) -> None:
        self._continuing = self.rpc.send("Command", {"name": "continue"})

    def _wait_for_stop(self, deadline: float, stop: StopFlag) -> dict[str, Any] | None:
        assert self._continuing is not None
        while not stop.is_set() and time.monotonic() < deadline:
            result = self.rpc.answer(self._continuing, min(POLL_S, deadline - time.monotonic()))
            if result is not None:
                self._continuing = None
                return self._state(result)
        return None

    def _halt(self) -> dict[str, Any]:
        """Stop the target; return the state the pending continue ended with."""
        self.rpc.call("Command", {"name": "halt"})
        if self._continuing is None:
            return {}
        continuing = self._continuing
        try:
            result = await_halt(self.config.pid, lambda s: self.rpc.answer(continuing, s))
        except TargetExited:
            self._exited = True
            raise
        self._continuing = None
        return self._state(result)

    def _state(self, result: dict[str, Any]) -> dict[str, Any]:
        state = result.get("State") or {}
        if state.get("exited"):
            self._exited = True
            raise TargetExited(f"target process {self.config.pid} exited with status {state.get('exitStatus')}")
        return dict(state)

    def _clear_and_resume(self) -> None:
        self._clear()
        self._continue()

    def _clear(self) -> None:
        if self._breakpoint is not None:
            self.rpc.call("ClearBreakpoint", {"Id": self._breakpoint})
            self._breakpoint = None

    def _evaluate(self, scope: dict[str, int] = SCOPE) -> tuple[tuple[Value, ...], list[str]]:
        requests = [self.rpc.send("Eval", {"Scope": scope, "Expr": e.text, "Cfg": LOAD})
                    for e in self.config.expressions]
        values: list[Value] = []
        errors: list[str] = []
        for expression, request in zip(self.config.expressions, requests):
            try:
                result = self.rpc.answer(request, CALL_TIMEOUT_S)
            except RpcError as e:
                values.append(None)
                errors.append(f"{expression.name}: {parse.classify_failure(str(e), expression.text)}")
                continue
            if result is None:
                raise DebuggerError(f"dlv did not evaluate {expression.text!r} within {CALL_TIMEOUT_S:g}s")
            values.append(parse.rpc_value(result.get("Variable") or {}))
        return tuple(values), errors
