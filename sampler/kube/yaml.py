"""Just enough YAML to print a manifest for review (dicts, lists, strings, numbers, bools);
kubectl and podman read it, and so does any YAML parser."""

from __future__ import annotations

import json
import re
from typing import Any

_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
_RESERVED = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def dump(documents: list[dict[str, Any]]) -> str:
    return "---\n".join(_block(doc, 0) for doc in documents)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    text = str(value)
    if _PLAIN.match(text) and text.lower() not in _RESERVED:
        return text
    return json.dumps(text)  # a JSON string is a YAML double-quoted scalar


def _block(value: Any, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                out.append(f"{pad}{_scalar(key)}:\n{_block(item, indent + 2)}")
            else:
                out.append(f"{pad}{_scalar(key)}: {_inline(item)}\n")
        return "".join(out)
    if isinstance(value, list):
        out = []
        for item in value:
            if isinstance(item, dict) and item:
                inner = _block(item, indent + 2)
                out.append(f"{pad}- {inner[indent + 2:]}")
            elif isinstance(item, list) and item:
                out.append(f"{pad}-\n{_block(item, indent + 2)}")
            else:
                out.append(f"{pad}- {_inline(item)}\n")
        return "".join(out)
    return pad + _scalar(value) + "\n"


def _inline(value: Any) -> str:
    if isinstance(value, dict):
        return "{}"
    if isinstance(value, list):
        return "[]"
    return _scalar(value)
