"""Text the target controls, made safe to print: no byte of it reaches a terminal raw.

A value (a ``char *``, a Go string, an enumerator's name), a file name, a process's comm
or command line: the target chooses them, and escape sequences in them would drive the
user's terminal (retitle it, clear it, forge lines; through ``kubectl sampler`` too).
Every control character (C0, DEL, C1), every lone surrogate left by undecodable bytes and
the invisible formatting characters that reorder text (bidi overrides, zero-width) are
written as escapes: ``\\n``, ``\\t``, ``\\r``, ``\\xNN``, ``\\uNNNN``. A backslash already in
the text stays as it is: the escaped form is for reading, not for a round trip.
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}


def printable(text: str) -> str:
    """``text`` with every character that could act on a terminal escaped."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escape, text)


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    code = ord(char)
    if char in _NAMED:
        return _NAMED[char]
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"
