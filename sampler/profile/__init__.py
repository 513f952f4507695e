"""Sampled stacks out (issue 35): folded text, an SVG flame graph, speedscope's JSON.

A profile here is a mapping of folded stacks (``main;work;hot``, outermost first, innermost
last, ``;`` between frames, as flamegraph.pl reads them) to their sample counts. Used by
`sampler profile` (cli.py's ``profile``: render.to_file by the --out file's suffix) and by
`sampler report FILE.folded` (render.report_folded, with --plot). Nothing here knows a process
or a backend: every name in a stack is text the target chose (its symbol tables), read as
hostile input (names.py).

- folded.py: the ``STACK COUNT`` lines flamegraph.pl and inferno read, written and read back
- flamegraph.py: the SVG flame graph, drawn by sampler itself
- speedscope.py: speedscope's file format (one sampled profile)
- render.py: a file by its suffix, and what `sampler report` prints of a .folded file
"""

from __future__ import annotations

__all__: list[str] = []  # import the modules themselves: nothing heavy is loaded here
