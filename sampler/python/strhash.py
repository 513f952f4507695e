"""CPython's hash of a str, as the process computes it: SipHash (2-4 before 3.11, 1-3 from 3.11)
keyed by the process's own _Py_HashSecret, so that a dict's item is found by the interpreter's
probing, a few reads, not by comparing every key (a dict of 10,000 keys). Checked against a key
whose hash the process cached before it is trusted (objects.py); any other build (FNV) falls back
to comparing keys."""

from __future__ import annotations

import struct

MASK = (1 << 64) - 1


def _rotl(x: int, b: int) -> int:
    return ((x << b) | (x >> (64 - b))) & MASK


def siphash(k0: int, k1: int, data: bytes, c_rounds: int, d_rounds: int) -> int:
    v0 = k0 ^ 0x736F6D6570736575
    v1 = k1 ^ 0x646F72616E646F6D
    v2 = k0 ^ 0x6C7967656E657261
    v3 = k1 ^ 0x7465646279746573

    def rounds(n: int) -> None:
        nonlocal v0, v1, v2, v3
        for _ in range(n):
            v0 = (v0 + v1) & MASK
            v1 = _rotl(v1, 13) ^ v0
            v0 = _rotl(v0, 32)
            v2 = (v2 + v3) & MASK
            v3 = _rotl(v3, 16) ^ v2
            v0 = (v0 + v3) & MASK
            v3 = _rotl(v3, 21) ^ v0
            v2 = (v2 + v1) & MASK
            v1 = _rotl(v1, 17) ^ v2
            v2 = _rotl(v2, 32)

    whole = len(data) // 8 * 8
    for (m,) in struct.iter_unpack("<Q", data[:whole]):
        v3 ^= m
        rounds(c_rounds)
        v0 ^= m
    b = ((len(data) & 0xFF) << 56) | int.from_bytes(data[whole:], "little")
    v3 ^= b
    rounds(c_rounds)
    v0 ^= b
    v2 ^= 0xFF
    rounds(d_rounds)
    return v0 ^ v1 ^ v2 ^ v3


def str_hash(version: tuple[int, int], k0: int, k1: int, text: str) -> int:
    """hash(text) in a process whose secret is (k0, k1): a signed 64-bit number."""
    if not text:
        return 0
    widest = max(map(ord, text))
    data = text.encode("latin-1") if widest < 256 else text.encode("utf-16-le", "surrogatepass") \
        if widest < 65536 else text.encode("utf-32-le", "surrogatepass")
    c, d = (1, 3) if version >= (3, 11) else (2, 4)
    x = siphash(k0, k1, data, c, d)
    x = x - (1 << 64) if x >= 1 << 63 else x
    return -2 if x == -1 else x


def int_hash(value: int) -> int:
    """hash(value) for an int: its value modulo 2**61 - 1, the sign kept (-1 is -2)."""
    modulus = (1 << 61) - 1
    x = abs(value) % modulus
    x = -x if value < 0 else x
    return -2 if x == -1 else x
