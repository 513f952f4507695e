"""Where CPython keeps what sampler reads, per version: the offsets of the fields of its
interpreter, thread and frame states, code objects and the objects `py:` values read.

3.8 to 3.12 keep no table of their own: TABLES holds theirs, made from the interpreters' own DWARF
by scripts/python-layouts.py (pyenv's 3.8.18, 3.9.18, 3.10.13, 3.11.7, 3.12.1 and 3.13.0 here) and
checked by the tests against every interpreter here with DWARF, Debian's python3.11 among them
(its debug file from python3.11-dbg): the same offsets for 3.11.2 and 3.11.7. 3.13 and later start
_PyRuntime with _Py_DebugOffsets (cookie "xdebugpy"): what it gives is taken from the process,
over 3.13's table (a patch release that moved a field is read right). Release builds only: a debug
build (Py_DEBUG, Py_TRACE_REFS: its objects have two more words) or a free-threaded one (3.13t)
is refused by name (python3.Xd, python3.Xt).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

Layout = dict[str, int]

OLDEST = (3, 8)
NEWEST = (3, 13)

TABLES: dict[tuple[int, int], Layout] = {
    (3, 8): {
        "runtime.interpreters_head": 32, "interp.next": 0, "interp.threads_head": 8, "interp.modules": 56,
        "runtime.gil": 1152, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8, "tstate.interp": 16,
        "tstate.thread_id": 176, "tstate.frame": 24, "frame.back": 24, "frame.code": 32, "frame.lasti": 104,
        "frame.localsplus": 360, "frame.stacktop": 72, "code.filename": 104, "code.name": 112,
        "code.firstlineno": 40, "code.argcount": 16, "code.flags": 36, "code.consts": 56,
        "code.linetable": 120, "code.code": 48, "code.varnames": 72, "code.nlocals": 28, "function.code": 16,
        "method.function": 16, "type.name": 24, "type.basicsize": 32, "type.flags": 168,
        "type.dictoffset": 288, "type.dict": 264, "type.mro": 344, "heaptype.cached_keys": 872,
        "dict.used": 16, "dict.keys": 32, "dict.values": 40, "keys.nentries": 32, "keys.indices": 40,
        "keys.size": 8, "unicode.length": 16, "unicode.state": 32, "unicode.ascii_size": 48,
        "unicode.compact_size": 72, "long.size": 16, "long.digits": 24, "var.size": 16, "tuple.items": 24,
        "list.items": 24, "bytes.data": 32, "float.value": 16,
    },
    (3, 9): {
        "runtime.interpreters_head": 32, "interp.next": 0, "interp.threads_head": 8, "interp.modules": 856,
        "runtime.gil": 352, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8, "tstate.interp": 16,
        "tstate.thread_id": 176, "tstate.frame": 24, "frame.back": 24, "frame.code": 32, "frame.lasti": 104,
        "frame.localsplus": 360, "frame.stacktop": 72, "code.filename": 104, "code.name": 112,
        "code.firstlineno": 40, "code.argcount": 16, "code.flags": 36, "code.consts": 56,
        "code.linetable": 120, "code.code": 48, "code.varnames": 72, "code.nlocals": 28, "function.code": 16,
        "method.function": 16, "type.name": 24, "type.basicsize": 32, "type.flags": 168,
        "type.dictoffset": 288, "type.dict": 264, "type.mro": 344, "heaptype.cached_keys": 864,
        "dict.used": 16, "dict.keys": 32, "dict.values": 40, "keys.nentries": 32, "keys.indices": 40,
        "keys.size": 8, "unicode.length": 16, "unicode.state": 32, "unicode.ascii_size": 48,
        "unicode.compact_size": 72, "long.size": 16, "long.digits": 24, "var.size": 16, "tuple.items": 24,
        "list.items": 24, "bytes.data": 32, "float.value": 16,
    },
    (3, 10): {
        "runtime.interpreters_head": 32, "interp.next": 0, "interp.threads_head": 8, "interp.modules": 856,
        "runtime.gil": 352, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8, "tstate.interp": 16,
        "tstate.thread_id": 176, "tstate.frame": 24, "frame.back": 24, "frame.code": 32, "frame.lasti": 96,
        "frame.localsplus": 352, "frame.state": 108, "code.filename": 104, "code.name": 112,
        "code.firstlineno": 40, "code.argcount": 16, "code.flags": 36, "code.consts": 56,
        "code.linetable": 120, "code.code": 48, "code.varnames": 72, "code.nlocals": 28, "function.code": 48,
        "method.function": 16, "type.name": 24, "type.basicsize": 32, "type.flags": 168,
        "type.dictoffset": 288, "type.dict": 264, "type.mro": 344, "heaptype.cached_keys": 872,
        "dict.used": 16, "dict.keys": 32, "dict.values": 40, "keys.nentries": 32, "keys.indices": 40,
        "keys.size": 8, "unicode.length": 16, "unicode.state": 32, "unicode.ascii_size": 48,
        "unicode.compact_size": 72, "long.size": 16, "long.digits": 24, "var.size": 16, "tuple.items": 24,
        "list.items": 24, "bytes.data": 32, "float.value": 16,
    },
    (3, 11): {
        "runtime.interpreters_head": 40, "interp.next": 0, "interp.threads_head": 16, "interp.modules": 888,
        "runtime.gil": 360, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8, "tstate.interp": 16,
        "tstate.thread_id": 152, "tstate.native_thread_id": 160, "tstate.cframe": 56,
        "cframe.current_frame": 8, "iframe.code": 32, "iframe.previous": 48, "iframe.instr": 56,
        "iframe.owner": 69, "iframe.localsplus": 72, "iframe.is_entry": 68, "gen.iframe": 80,
        "gen.frame_state": 75, "code.filename": 112, "code.name": 120, "code.firstlineno": 72,
        "code.argcount": 56, "code.flags": 48, "code.consts": 24, "code.linetable": 136, "code.qualname": 128,
        "code.code_adaptive": 184, "code.localsplusnames": 96, "code.nlocalsplus": 76, "function.code": 48,
        "method.function": 16, "type.name": 24, "type.basicsize": 32, "type.flags": 168,
        "type.dictoffset": 288, "type.dict": 264, "type.mro": 344, "heaptype.cached_keys": 872,
        "dict.used": 16, "dict.keys": 32, "dict.values": 40, "keys.nentries": 24, "keys.indices": 32,
        "keys.log2_size": 8, "keys.log2_index_bytes": 9, "keys.kind": 10, "unicode.length": 16,
        "unicode.state": 32, "unicode.ascii_size": 48, "unicode.compact_size": 72, "long.size": 16,
        "long.digits": 24, "var.size": 16, "tuple.items": 24, "list.items": 24, "bytes.data": 32,
        "float.value": 16,
    },
    (3, 12): {
        "runtime.interpreters_head": 40, "interp.next": 0, "interp.threads_head": 72, "interp.modules": 944,
        "interp.gil": 384, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8, "tstate.interp": 16,
        "tstate.thread_id": 136, "tstate.native_thread_id": 144, "tstate.cframe": 56,
        "cframe.current_frame": 0, "iframe.code": 0, "iframe.previous": 8, "iframe.instr": 56,
        "iframe.owner": 70, "iframe.localsplus": 72, "gen.iframe": 72, "gen.frame_state": 67,
        "code.filename": 112, "code.name": 120, "code.firstlineno": 68, "code.argcount": 52, "code.flags": 48,
        "code.consts": 24, "code.linetable": 136, "code.qualname": 128, "code.code_adaptive": 192,
        "code.localsplusnames": 96, "code.nlocalsplus": 72, "function.code": 48, "method.function": 16,
        "type.name": 24, "type.basicsize": 32, "type.flags": 168, "type.dictoffset": 288, "type.dict": 264,
        "type.mro": 344, "heaptype.cached_keys": 880, "dict.used": 16, "dict.keys": 32, "dict.values": 40,
        "keys.nentries": 24, "keys.indices": 32, "keys.log2_size": 8, "keys.log2_index_bytes": 9,
        "keys.kind": 10, "unicode.length": 16, "unicode.state": 32, "unicode.ascii_size": 40,
        "unicode.compact_size": 56, "long.size": 16, "long.digits": 24, "var.size": 16, "tuple.items": 24,
        "list.items": 24, "bytes.data": 32, "float.value": 16,
    },
    (3, 13): {
        "runtime.interpreters_head": 632, "interp.next": 7264, "interp.threads_head": 7344,
        "interp.modules": 7656, "interp.gil": 16, "gil.locked": 16, "gil.last_holder": 8, "tstate.next": 8,
        "tstate.interp": 16, "tstate.thread_id": 152, "tstate.native_thread_id": 160,
        "tstate.current_frame": 72, "iframe.code": 0, "iframe.previous": 8, "iframe.instr": 56,
        "iframe.owner": 70, "iframe.localsplus": 72, "gen.iframe": 72, "gen.frame_state": 67,
        "code.filename": 112, "code.name": 120, "code.firstlineno": 68, "code.argcount": 52, "code.flags": 48,
        "code.consts": 24, "code.linetable": 136, "code.qualname": 128, "code.code_adaptive": 200,
        "code.localsplusnames": 96, "code.nlocalsplus": 72, "function.code": 48, "method.function": 16,
        "type.name": 24, "type.basicsize": 32, "type.flags": 168, "type.dictoffset": 288, "type.dict": 264,
        "type.mro": 344, "heaptype.cached_keys": 880, "dict.used": 16, "dict.keys": 32, "dict.values": 40,
        "keys.nentries": 24, "keys.indices": 32, "keys.log2_size": 8, "keys.log2_index_bytes": 9,
        "keys.kind": 10, "unicode.length": 16, "unicode.state": 32, "unicode.ascii_size": 40,
        "unicode.compact_size": 56, "long.size": 16, "long.digits": 24, "var.size": 16, "tuple.items": 24,
        "list.items": 24, "bytes.data": 32, "float.value": 16,
    },
}

COOKIE = b"xdebugpy"
DEBUG_OFFSETS_313: dict[str, int] = {
    "runtime.interpreters_head": 40, "interp.next": 64, "interp.threads_head": 72, "interp.modules": 88,
    "interp.gil": 112, "tstate.next": 168, "tstate.interp": 176, "tstate.current_frame": 184,
    "tstate.thread_id": 192, "tstate.native_thread_id": 200, "iframe.previous": 232, "iframe.code": 240,
    "iframe.instr": 248, "iframe.localsplus": 256, "iframe.owner": 264, "code.filename": 280, "code.name": 288,
    "code.qualname": 296, "code.linetable": 304, "code.firstlineno": 312, "code.argcount": 320,
    "code.localsplusnames": 328, "code.code_adaptive": 344, "type.name": 376, "type.flags": 392,
    "tuple.items": 408, "list.items": 432, "dict.keys": 456, "dict.values": 464, "float.value": 480,
    "long.size": 496, "long.digits": 504, "bytes.data": 528, "unicode.state": 544, "unicode.length": 552,
    "unicode.ascii_size": 560,
}
"""Where 3.13's _Py_DebugOffsets holds each field's offset (its own layout, from 3.13.0's DWARF)."""
DEBUG_OFFSETS_SIZE = 584


class Unsupported(Exception):
    """A CPython sampler has no layout for (one line)."""


def layout(version: tuple[int, int], read_runtime: Callable[[int], bytes]) -> Layout:
    """The layout of ``version``; ``read_runtime(n)``: the first n bytes of the process's _PyRuntime."""
    if version < OLDEST:
        raise Unsupported(f"CPython {version[0]}.{version[1]} is older than sampler reads (3.8 to 3.13)")
    if version > NEWEST:
        raise Unsupported(f"CPython {version[0]}.{version[1]} is newer than sampler reads (3.8 to 3.13): its "
                          "_Py_DebugOffsets may have moved")
    table = dict(TABLES[version])
    if version >= (3, 13):
        head = read_runtime(DEBUG_OFFSETS_SIZE)
        if head[:8] != COOKIE:
            raise Unsupported("_PyRuntime does not start with _Py_DebugOffsets (no 'xdebugpy'): not a CPython "
                              "3.13 that sampler knows")
        found = struct.unpack_from("<Q", head, 8)[0]
        if found >> 16 != (version[0] << 8 | version[1]):
            raise Unsupported(f"_Py_DebugOffsets says version {found:#x}, the interpreter {version}")
        if struct.unpack_from("<Q", head, 16)[0]:
            raise Unsupported("a free-threaded CPython (no GIL): its objects' layout is not read by sampler")
        for key, at in DEBUG_OFFSETS_313.items():
            value = struct.unpack_from("<Q", head, at)[0]
            if value > 1 << 20:
                raise Unsupported(f"_Py_DebugOffsets gives {key} at {value}: not believed")
            table[key] = value
    return table
