"""The syntax of ``--at``: which kind of place a location names, read from its text alone (no
program is read here: debuginfo/locate.py finds the place; configure.py and the backend's choice
only need its kind)."""

from __future__ import annotations

import re

ADDRESS = re.compile(r"^\*\s*(0x[0-9a-fA-F]+|\d+)$")
"""*ADDR: an address at run time."""
FILE_LINE = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+)$")
IN_LIBRARY = re.compile(r"^(?P<library>[^:]+):(?!:)(?P<rest>.+)$")
FILE_ADDRESS = re.compile(r"^(?P<library>[^:]+):(?P<address>0x[0-9a-fA-F]+)$")
"""MODULE:0xADDR, an address as the module's file has it (objdump -d, nm; bpftrace's uprobe:/path:0x...)."""
OFFSET = re.compile(r"^(?P<function>[^*+][^+]*?)\s*\+\s*(?P<offset>0x[0-9a-fA-F]+|\d+)$")
"""FUNCTION+OFFSET (gdb's and bpftrace's), LIBRARY:FUNCTION+OFFSET too."""
USDT = "usdt:"
_WILDCARDS = re.compile(r"[*?]|\[[^].,\]]+\]")
"""``*``, ``?`` or a class of characters (``[rw]``; not ``[]`` of operator[], nor Go's ``[go.shape.int]``)."""
_NOT_IN_PATTERNS = re.compile(r"[()<>]")
"""A name with these is a Go method (``main.(*Ring).Read``), a C++ signature (``f(char*)``) or a Rust
impl (``<impl [T]>``): its ``*`` and ``[`` are the name's own."""


def is_python(location: str) -> bool:
    """``py:module.function``: a Python function (not built yet: configure.py says so)."""
    return location.strip().startswith("py:")


def is_usdt(location: str) -> bool:
    return location.strip().startswith(USDT)


def is_pattern(location: str) -> bool:
    """A function name with wildcards (``ngx_http_*_handler``, ``libc:str*``), not an address, a USDT
    probe (its own patterns: usdtsites.py), a Go method nor a C++ signature."""
    text = location.strip()
    return not text.startswith("*") and not is_usdt(text) and bool(_WILDCARDS.search(text)) \
        and not _NOT_IN_PATTERNS.search(text)


def ptrace_only(location: str) -> str:
    """What in a location only the ptrace backend reads ('' when Delve can take it too)."""
    text = location.strip()
    if is_usdt(text):
        return "a USDT probe"
    if FILE_ADDRESS.match(text):
        return "MODULE:0xADDR"
    if OFFSET.match(text):
        return "FUNCTION+OFFSET"
    if is_pattern(text):
        return "a pattern"
    return ""
