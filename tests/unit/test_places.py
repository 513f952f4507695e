"""The syntax of --at (sampler/places.py): which kind of place a location's text names."""

from __future__ import annotations

import pytest

from sampler import places


@pytest.mark.parametrize("location, kind", [
    ("ring_read", ""),
    ("main.(*Ring).Read", ""),                       # a Go method: its * is the name's own
    ("rb::Ring::read(unsigned long*)", ""),           # a C++ signature
    ("core::slice::<impl [T]>::len", ""),            # a Rust impl
    ("ring.c:42", ""),
    ("*0x401000", ""),
    ("libc:malloc", ""),
    ("ngx_http_*_handler", "a pattern"),
    ("libc:str*", "a pattern"),
    ("ring_rea?", "a pattern"),
    ("ring_[rw]*", "a pattern"),
    ("ngx_unix_recv+0x9a", "FUNCTION+OFFSET"),
    ("libc:malloc+4", "FUNCTION+OFFSET"),
    ("nginx:0x4e03a", "MODULE:0xADDR"),
    ("usdt:postgresql:query__start", "a USDT probe"),
    ("usdt:libstdc++:libstdcxx:throw", "a USDT probe"),
    ("usdt:postgresql:transaction__*", "a USDT probe"),
])
def test_each_kind_is_told_from_its_text(location: str, kind: str) -> None:
    assert places.ptrace_only(location) == kind


@pytest.mark.parametrize("name", ["main.Sum[go.shape.int]", "operator[]", "std::vector<int>::operator[]"])
def test_brackets_of_a_name_are_no_pattern(name: str) -> None:
    assert not places.is_pattern(name)
