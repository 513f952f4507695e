"""The native backend: sampler as its own debugger, with python-ptrace and pyelftools.

tracer.py (threads, waits, breakpoints), symbols.py (ELF, load bias), dwarf.py
(types, locations, CFA, lines), evaluate.py (expression -> value), memory.py
(reading the target), backend.py (the sampling cycle).
"""
