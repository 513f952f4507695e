"""A run's probes resolved to sites: each --at (a name, a pattern, FILE:LINE, an address, usdt:, py:) to its
places (clones and inlined copies each a site), each site's slots in the row, and --latency's calls (what
each probe reads at its returns). Read from the program before anything is seized."""

from __future__ import annotations

import dataclasses
import os
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sampler import notice
from sampler.backends.ptrace.latency import Latency, names_retval
from sampler.backends.ptrace.pylatency import PyLatency
from sampler.backends.ptrace.site import Site
from sampler.backends.ptrace.stackcopy import StackCopier
from sampler.config import Probe, SessionConfig
from sampler.debuginfo.locate import Place, resolve_all
from sampler.debuginfo.modules import Modules
from sampler.errors import ProcessNotFound, UsageError
from sampler.evaluation.scope import Scope
from sampler.language.expr import Expression, ustack_depth
from sampler.places import is_python
from sampler.process.reads import UnreadableMemory
from sampler.target import permission, procfs

if TYPE_CHECKING:  # (loaded by a run with a Python probe: _python_places)
    from sampler.python.probes import PyProbe


@dataclass
class Resolved:
    probes: list[list[Site]]
    """The sites of each probe, in the order of the --at options (zero-stop reads: one site, no place)."""
    probe_column: bool
    """Rows say which probe and site they came from (a 'probe' column first)."""
    stacks: StackCopier | None
    """What reads the stack of a hit, when an expression is ``ustack``."""
    latency: Latency | None
    """--latency and --to: the open calls, and where they end."""


def resolve(config: SessionConfig, modules: Modules, is_go: bool) -> Resolved:
    probes = config.probe_list()
    placed: list[tuple[Probe, list[tuple[Place, PyProbe | None]]]] = [
        (probe, _python_places(modules, config.pid, probe.location, config.quiet) if is_python(probe.location)
         else [(place, None) for place in resolve_all(modules, probe.location, config.max_probes)])
        for probe in probes]
    probe_column = len(probes) > 1 or any(len(places) > 1 for _, places in placed)
    offset = 1 if probe_column else 0
    width = offset + len(config.expressions)
    columns = {e.name: offset + index for index, e in enumerate(config.expressions)}
    timed = config.timing is not None
    at_return: dict[int, list[tuple[int, Expression]]] = {}
    """--latency: each probe's expressions that name retval (read at the return), with their slot."""
    if timed:
        width += 1  # latency_us, last
    stacks = StackCopier(config.pid, modules) \
        if any(ustack_depth(e.tree) is not None for e in config.expressions) else None
    sites: list[list[Site]] = []
    for number, (probe, places) in enumerate(placed):
        at_entry = tuple(e for e in probe.expressions if not names_retval(e))
        at_return[number] = [(columns[e.name], e) for e in probe.expressions if names_retval(e)]
        scoped = dataclasses.replace(config, location=probe.location, expressions=at_entry, probes=())
        slots = [columns[e.name] for e in at_entry]
        sites.append([Site(Scope(scoped, modules, place, is_go, python),
                           _label(probe, place, len(places)) if probe_column else "", slots, width, stacks)
                      for place, python in places])
    labels = Counter(site.label for each in sites for site in each)
    for each in sites:
        for site in each:
            if labels[site.label] > 1 and site.address is not None:  # two static functions of one name
                site.label += f" at {site.address:#x}"
    if not probes:  # zero-stop reads: one site with no place
        sites.append([Site(Scope(config, modules, None, is_go), "", range(len(config.expressions)), width)])
    every = [site for each in sites for site in each]
    latency: Latency | None = None
    python = [site for site in every if site.python is not None]
    if timed and python:
        if any(at_return.values()) or len(python) < len(every) or len(sites) > 1:
            raise UsageError("--latency of a Python function: one --at py:..., and no retval yet",
                             "e.g. sampler trace --pid P --at py:app.handle --latency")
        latency = PyLatency(width - 1, python)
    elif timed and probes:
        latency = Latency(width - 1, {site: at_return[number] for number, each in enumerate(sites) for site in each},
                          is_go, config.latency_to is not None)
    return Resolved(sites, probe_column, stacks, latency)


def _python_places(modules: Modules, pid: int, location: str, quiet: bool) -> list[tuple[Place, PyProbe | None]]:
    """``--at py:module.function``: the interpreter's frame start, each place with its filter (the
    function is found in the process's memory before it is seized; at a hit the filter reads through
    the hit's own reads)."""
    from sampler.process.snapshot import pread_exactly
    from sampler.python import probes as python_probes

    try:
        fd = procfs.open_mem(pid)
    except (FileNotFoundError, ProcessLookupError):
        raise ProcessNotFound(f"process {pid} exited while sampler looked at it") from None
    except PermissionError:
        raise permission.denied(pid, "read the memory of") from None

    def read(address: int, size: int) -> bytes:
        if fd < 0:
            raise UnreadableMemory("the process's memory is read at a hit only")
        return pread_exactly(fd, address, size)

    try:
        found = python_probes.resolve(modules, read, location, notice.quiet if quiet else notice.say)
    finally:
        os.close(fd)
        fd = -1
    return list(found)


def _label(probe: Probe, place: Place, places: int) -> str:
    """The probe column: the location as given, and which of its breakpoints when it has several."""
    if places > 1 and place.symbol:
        return f"{probe.location} [{place.symbol}]"
    return probe.location
