"""Python programs as Python (issue 39): CPython's interpreter read from outside.

layouts.py holds where each version keeps what is read (tables made from DWARF by
dwarflayout.py, 3.13's _Py_DebugOffsets); interpreter.py finds the interpreter and reads each
thread's Python frames; lines.py turns an instruction into its line; objects.py reads objects
(values, dict items, attributes).
"""
