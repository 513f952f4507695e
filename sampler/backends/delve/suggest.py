"""'did you mean' for a location dlv cannot find: the nearest function names of the
program's symbol tables, as the ptrace backend suggests them (debuginfo/locate.py)."""

from __future__ import annotations

import re

from sampler.errors import LocationNotFound, SamplerError


def with_suggestion(error: LocationNotFound, pid: int, location: str) -> LocationNotFound:
    """``error`` with the nearest names as its hint, when there are any (only on this error path:
    the program's symbols are read here, not before)."""
    from sampler.debuginfo.debugfiles import DebugFinder
    from sampler.debuginfo.locate import nearest
    from sampler.debuginfo.modules import Modules

    if re.fullmatch(r"[^:]+:\d+", location.strip()) or location.strip().startswith("*"):
        return error  # FILE:LINE or an address: no name to be near
    try:
        modules = Modules(pid, DebugFinder(pid, (), lambda _: None, lambda _: None))
        try:
            near = nearest(location.strip(), modules.main.function_names())
        finally:
            modules.close()
    except (SamplerError, OSError):
        return error
    if near:
        error.hint = f"did you mean {' or '.join(repr(name) for name in near)}?"
    return error
