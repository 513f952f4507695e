"""Evaluation, apart from any mechanism: what an expression's names mean at a place (scope),
its evaluation over a read function and registers (evaluate; Go's and C/C++/Rust's value
layouts in golang and wrappers), the read plans learnt from it (plan), and the short form
(fields). It reads the target's memory and registers only through reads.py's protocols: the
ptrace backend, stacks, in-process probes' read plans and Python values all evaluate here. It
imports no backend (fields.expand_config, for the Delve drives, reads the program's DWARF through
debuginfo.modules itself).
"""
