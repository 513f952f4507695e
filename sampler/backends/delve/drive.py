"""What the two Delve drives (the terminal, backend.py; JSON-RPC, rpc_backend.py) share of
the Backend interface: one --at at most, so no probe column and one sample a tick; nothing
to serve between samples (dlv does); and the end of a run: the target settled (running, no
breakpoint), dlv told to detach, its connection closed, the guardian dismissed."""

from __future__ import annotations

from sampler.config import SessionConfig
from sampler.safety.guardian import Guardian
from sampler.stop import StopFlag


class DelveDrive:
    def __init__(self, config: SessionConfig) -> None:
        self.config = config
        self.columns = [e.name for e in config.expressions]
        """One --at at most (select.py gives several to ptrace): no probe column."""
        self._attached = False
        self._exited = False
        """dlv said the target process ended."""
        self.guardian: Guardian | None = None

    def begin_tick(self) -> int:
        return 1

    def notes(self) -> list[str]:
        return []

    def idle(self, seconds: float, stop: StopFlag) -> None:
        stop.wait(seconds)

    def detach(self) -> None:
        if not self._attached:
            return
        self._attached = False
        try:
            self._leave()
        finally:
            self._close()
            if self.guardian is not None:
                guardian, self.guardian = self.guardian, None
                guardian.dismiss()

    def _leave(self) -> None:
        """The target left running with no breakpoint, dlv detached from it."""
        raise NotImplementedError

    def _close(self) -> None:
        """dlv's connection closed (dlv ends with it)."""
        raise NotImplementedError
