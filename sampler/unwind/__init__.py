"""User stacks: unwinding a stopped thread's registers and stack into frames (issue 35).

It reads through process/reads.py's ``Read`` (a snapshot of the stack taken while the thread
was stopped, and the live memory past it) and the modules' call frame information, symbols,
DWARF and Go tables (debuginfo): it knows no ptrace.
"""
