"""Fetch a package's source archive from the package index (PEP 503's simple page), checked against
the sha256 the page gives, without building it: make dist builds numpy from its source in a container
that reaches no network (``pip download --no-binary`` would build it here first, for this Python).

    python deploy/dist/sdist.py numpy 2.0.2 DIR     # DIR/numpy-2.0.2.tar.gz
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
import urllib.request
from pathlib import Path

LINK = re.compile(r'<a href="([^"#]+)#sha256=([0-9a-f]{64})"[^>]*>([^<]+)</a>')


def fetch(name: str, version: str, folder: Path) -> Path:
    index = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
    with urllib.request.urlopen(f"{index}/{name}/", timeout=60) as page:
        html = page.read().decode()
    wanted = f"{name}-{version}.tar.gz"
    found = [(url, digest) for url, digest, text in LINK.findall(html) if text == wanted]
    if not found:
        raise SystemExit(f"sdist: {index}/{name}/ lists no {wanted}")
    url, digest = found[0]
    target = folder / wanted
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == digest:
        return target
    with urllib.request.urlopen(urllib.request.Request(url), timeout=300) as response:
        data = response.read()
    if hashlib.sha256(data).hexdigest() != digest:
        raise SystemExit(f"sdist: {wanted} from {url} does not match the index's sha256")
    folder.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return target


if __name__ == "__main__":
    print(fetch(sys.argv[1], sys.argv[2], Path(sys.argv[3])))
