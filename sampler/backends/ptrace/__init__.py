"""The native backend: sampler as its own debugger, with python-ptrace and pyelftools.

tracer.py (threads, waits, breakpoints, the step over one), children.py (processes the
target forks: cleaned of the breakpoints and let go), prologue.py (where a function's
breakpoint is reached once per call), locate.py (names to places), dwarf.py (types,
locations, CFA, lines), evaluate.py (expression -> value), memory.py (reading the
target), backend.py (the sampling cycle).
"""
