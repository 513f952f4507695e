"""make test-long (SAMPLER_LONG=1): the exhaustive forms of a few tests whose short form make test runs
(every real program's every function, every trial), to keep the default run under 15 minutes."""

from __future__ import annotations

import os

LONG = os.environ.get("SAMPLER_LONG") == "1"
