"""What sampler learns about a target process before touching it (read-only): debuginfo/program.py
fills it in."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TargetProcess:
    pid: int
    exe: str
    """Path of the program, as /proc/PID/exe shows it."""
    is_go: bool
    """Built by the Go toolchain (has a Go pclntab or build-info section)."""
    has_debug_info: bool
    """Carries DWARF (.debug_info), which every backend needs to find names."""
