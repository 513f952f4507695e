"""Folded stacks as speedscope's file format (https://www.speedscope.app/file-format-schema.json).

One profile of type "sampled": each distinct stack is one sample, a list of indexes into
``shared.frames`` (outermost first), weighted by its count; the unit is "none" (samples), from 0
to the total. speedscope (https://www.speedscope.app, or its npm package offline) opens it as is.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sampler import __version__
from sampler.profile.names import clean

SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def document(stacks: Mapping[str, int], name: str) -> str:
    """The speedscope JSON of ``stacks`` (folded stack -> samples), its profile called ``name``."""
    frames: list[dict[str, str]] = []
    index: dict[str, int] = {}
    samples: list[list[int]] = []
    weights: list[int] = []
    for stack, count in sorted(stacks.items()):
        if count <= 0 or not stack:
            continue
        sample = []
        for frame in stack.split(";"):
            shown = clean(frame, limit=None)  # not cut: two long names must stay two frames
            if shown not in index:
                index[shown] = len(frames)
                frames.append({"name": shown})
            sample.append(index[shown])
        samples.append(sample)
        weights.append(count)
    total = sum(weights)
    title = clean(name)
    profile: dict[str, Any] = {"type": "sampled", "name": title, "unit": "none", "startValue": 0,
                               "endValue": total, "samples": samples, "weights": weights}
    return json.dumps({"$schema": SCHEMA, "shared": {"frames": frames}, "profiles": [profile], "name": title,
                       "activeProfileIndex": 0, "exporter": f"sampler@{__version__}"}, separators=(",", ":")) + "\n"
