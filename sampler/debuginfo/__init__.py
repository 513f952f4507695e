"""Debug info: what a program's files say about it, read without controlling the process.

Offers, from the bottom up:

- ``untrusted``, ``leb128``: the guard for hostile input, DWARF's variable-length integers;
- ``elffile``: one ELF file (build-id, debuglink, symbols, sections), ``gopclntab``: Go's
  function table, ``demangle``: C++ and Rust names as people write them;
- DWARF: ``dies`` (safe DIE walks), ``dwarfscan`` (the fast walk over a unit), ``types``
  (the type model and DIE-to-type conversion), ``locations`` (the location model and the
  DW_OP interpreter, which takes registers and memory as functions), ``cfi`` (CFA rules),
  ``dwarf`` (one module's index, lines and scopes);
- ``debugfiles`` and ``debuginfod``: where a module's separate debug file is;
- ``modules``: what a process has mapped (from /proc/PID/maps), each module with its load
  bias and its debug info; ``locate`` and ``prologue``: names to breakpoint places.

Used by the ptrace backend (backends/ptrace), the short-form field search both Delve drives
share (evaluation/fields.py), bench/debuginfo.py and bench/limit.py. It imports no backend, no
configuration and no expression code (tests/unit/test_layout.py keeps that rule); it reads
the target only through /proc (``modules`` reads its maps and files).
"""
