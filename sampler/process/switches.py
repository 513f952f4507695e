"""What the benchmarks and the tests turn off or on in the tracer (read from the environment once, by
the config builder)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Switches:
    """What the benchmarks and the tests turn off or on in the tracer to measure what a mechanism
    is worth: read from the environment once, by the config builder (configure.py), not at import."""

    let_run_s: float = 20e-6
    """How long the worker steps off the CPU after letting the hitting thread go (tracer.let_run);
    SAMPLER_LET_RUN=0 makes it 0 (bench/stall.py)."""
    emulate: bool = True
    """SAMPLER_EMULATE=0: every every-hit hit is single-stepped, never emulated (bench/limit.py)."""
    check_emulation: bool = False
    """SAMPLER_CHECK_EMULATION=1: every emulated instruction is run on the CPU too (a single-step)
    and compared (tests/integration/test_emulate.py); no hit goes to an out-of-line copy then."""
    outofline: bool = True
    """SAMPLER_OUTOFLINE=0: no int3's instruction is copied out of line (outofline.py): each hit is
    emulated or stepped, and a tracer killed while a thread is at an int3 kills the target (bench, tests)."""

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> Switches:
        return cls(let_run_s=0.0 if environ.get("SAMPLER_LET_RUN") == "0" else cls.let_run_s,
                   emulate=environ.get("SAMPLER_EMULATE") != "0",
                   check_emulation=environ.get("SAMPLER_CHECK_EMULATION") == "1",
                   outofline=environ.get("SAMPLER_OUTOFLINE") != "0" and environ.get("SAMPLER_CHECK_EMULATION") != "1")
