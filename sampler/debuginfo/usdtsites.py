"""``--at usdt:[MODULE:]PROVIDER:NAME``: where a USDT probe's sites are in a process.

The program and every library it has loaded are looked in (their notes are read once: usdt.py),
or only MODULE when it is given (a library as ``LIBRARY:FUNCTION`` names one: ``libstdc++``,
``libstdc++.so.6``, a path). PROVIDER and NAME may be patterns (``*``, ``?``, ``[...]``), as
bpftrace's ``usdt:/path:postgresql:transaction__*``; ``usdt:NAME`` is a name of any provider.
Every site of every probe matched is one breakpoint (a probe the compiler put in several places
is several sites), up to ``limit``.
"""

from __future__ import annotations

import fnmatch
from collections import Counter

from sampler import places
from sampler.debuginfo.modules import Module, Modules
from sampler.debuginfo.usdt import Probe
from sampler.errors import LocationNotFound

PREFIX = places.USDT
is_usdt = places.is_usdt


def split(location: str) -> tuple[str | None, str, str]:
    """(module or None, provider pattern, name pattern) of ``usdt:[MODULE:]PROVIDER:NAME``."""
    parts = location.strip()[len(PREFIX):].split(":")
    if len(parts) == 1:
        return None, "*", parts[0]
    if len(parts) == 2:
        return None, parts[0], parts[1]
    if len(parts) == 3:
        return parts[0], parts[1], parts[2]
    # a module path may not hold ':', but be generous: everything before the last two parts
    return ":".join(parts[:-2]), parts[-2], parts[-1]


def matching(modules: list[Module], provider: str, name: str) -> list[tuple[Module, Probe]]:
    return [(module, probe) for module in modules for probe in module.usdt()
            if fnmatch.fnmatchcase(probe.provider, provider) and fnmatch.fnmatchcase(probe.name, name)]


def sites(modules: Modules, location: str, limit: int) -> list[tuple[Module, Probe, str]]:
    """(module, probe, label) of every site the location means, the label naming the probe (and the
    site, when the probe has several); a clear LocationNotFound when there is none, or more than
    ``limit``."""
    text = location.strip()
    module_name, provider, name = split(text)
    if not provider or not name:
        raise LocationNotFound(f"--at {text}: give usdt:PROVIDER:NAME (or usdt:LIBRARY:PROVIDER:NAME)",
                               "e.g. --at usdt:python:function__entry; sampler list --pid PID 'usdt:*' lists them")
    searched = [modules.library(module_name)] if module_name is not None else modules.everything()
    found = matching(searched, provider, name)
    if not found and module_name is None:  # the libraries loaded since (dlopen)
        searched += modules.refresh()
        found = matching(searched, provider, name)
    usable = [(module, probe) for module, probe in found if not probe.problem]
    bad = [(module, probe) for module, probe in found if probe.problem]
    for module, probe in bad[:3]:
        modules.finder.say(f"--at {text}: {module.name}'s probe {probe.full_name} at {probe.address:#x} "
                           f"is left out: {probe.problem}")
    if len(bad) > 3:
        modules.finder.say(f"--at {text}: {len(bad) - 3} more site(s) left out for such reasons")
    if not found:
        where = module_name or f"the program or the {len(modules.libraries)} libraries it has loaded"
        known = sorted({p.full_name for m in searched for p in m.usdt()})
        raise LocationNotFound(f"--at {text}: no USDT probe {provider}:{name} in {where}"
                               + (f" ({len(known)} probes there: {', '.join(known[:6])}"
                                  f"{', ...' if len(known) > 6 else ''})" if known else " (none has a USDT probe)"),
                               "sampler list --pid PID 'usdt:*' lists them; a library's: usdt:LIBRARY:PROVIDER:NAME")
    if not usable:
        raise LocationNotFound(f"--at {text}: no site of it can be used ({found[0][1].problem})",
                               "sampler list --pid PID 'usdt:*' shows the probes and their arguments")
    if len(usable) > limit:
        raise LocationNotFound(f"--at {text}: {len(usable)} USDT sites, over --max-probes {limit}",
                               "name fewer (a narrower pattern), or raise --max-probes")
    count = Counter(probe.full_name for _, probe in usable)
    return [(module, probe, probe.full_name + (f" at {module.name}+{probe.address:#x}"
                                               if count[probe.full_name] > 1 else ""))
            for module, probe in usable]
