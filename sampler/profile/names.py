"""A frame's name made safe to draw: the target's symbol tables chose it.

Control characters (C0, DEL, C1), lone surrogates (bytes that were not UTF-8), the invisible
characters that reorder or hide text (bidi overrides, zero-width) and the two code points XML
forbids (U+FFFE, U+FFFF) are taken out; a name longer than the limit is cut, with "..". What
remains is plain text: each writer escapes it for its own format (XML, JSON).
"""

from __future__ import annotations

import re

_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufffe\uffff"
                     "\ud800-\udfff]")
TOOLTIP_CHARS = 300
"""The longest name a tooltip or a report line shows (C++ templates run to thousands)."""


def clean(name: str, limit: int | None = TOOLTIP_CHARS) -> str:
    """``name`` without the characters that could hide, reorder or break text, at most
    ``limit`` characters long (None: no limit)."""
    name = _UNSAFE.sub("", name)
    if limit is not None and len(name) > limit:
        return name[:max(limit - 2, 1)] + ".."
    return name
