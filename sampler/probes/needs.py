"""What a run needs of its backend, and what each backend can do: one table, read by the config builder
(a backend named with --backend that cannot is refused before anything is touched), by select.py (auto
picks the backend that can) and by run.py."""

from __future__ import annotations

from enum import Enum


class Need(Enum):
    """What a run may need that not every backend does."""

    PLACES = "several --at"
    TIMED = "--latency and --to"
    PYTHON = "a Python function's probe (py:)"
    PROCESSES = "several processes, or --follow-forks"
    INPROCESS = "in-process probes"
    REST = "--max-overhead with trace (the breakpoints out for a while)"
    PTRACE_PLACES = "places only the ptrace backend reads (usdt:, *ADDR, a library's function)"
    OWN_FUNCTIONS = "sampler's own functions in an expression"


CAN: dict[str, frozenset[Need]] = {
    "ptrace": frozenset(Need),
    "delve": frozenset(),
    "delve-rpc": frozenset(),
}
"""Each backend's capabilities. Delve's drives break at one place of one Go process with Delve's
breakpoints, an int3 each, and evaluate with Delve's own functions."""


def can(backend: str | None, need: Need) -> bool:
    """Whether ``backend`` (None or auto: not chosen yet, so any that can) meets ``need``."""
    return backend not in CAN or need in CAN[backend]


def timing(latency: bool, to: str | None) -> str | None:
    """How a run's rows are timed: "--latency" (each call to its return), "--to" (from a hit of --at to the
    next hit of --to), or None."""
    if latency:
        return "--latency"
    return "--to" if to is not None else None
