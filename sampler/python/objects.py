"""CPython's objects read from another process's memory: their type's name, and the value of the
ones sampler shows (int of any size, float, bool, None, str, bytes; the length of a list, tuple,
dict, set or deque); a dict's item by key, an object's attribute.

Everything read is the target's and may be torn or hostile: every length is bounded, every
pointer is read through ``read`` (which raises UnreadableMemory), and what cannot be believed is an
Unreadable with one line, never a Python exception of sampler's own.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Union

from sampler.process.reads import UnreadableMemory
from sampler.python.layouts import Layout
from sampler.python.strhash import int_hash, str_hash

Read = Callable[[int, int], bytes]

MAX_TEXT = 1 << 16
"""Characters of a str (bytes of a bytes) read at most; a longer one is cut and said."""
MAX_DIGITS = 1 << 12
"""An int of more digits than this (30 bits each: 36,000 decimal digits) is not read."""
MAX_ENTRIES = 1 << 20
"""A dict's table of more entries than this is not believed."""
MAX_LOG2_SIZE = 21
"""A dict's table holds at most 2^21 slots here: CPython sizes a table of n entries at the power of two
above 3n/2, and sampler reads MAX_ENTRIES entries at most (a forged 2^36 probed for days)."""
PROBES_ONE_BY_ONE = 64
"""Slots of a dict's index read one at a time while probing; past them (no real lookup gets there),
the whole index in one read, and the probe goes on in sampler's memory (the entries too, past as many)."""
MAX_NAME = 256
CHUNK = 4096
"""Entries of a dict read in one go."""
MANAGED_DICT = 1 << 4
INLINE_VALUES = 1 << 2
"""3.13's Py_TPFLAGS_INLINE_VALUES: an object's attributes follow its fixed part."""


class Unreadable(Exception):
    """An object sampler cannot read (one line: what and why)."""


class Missing(Unreadable):
    """A key or attribute the object does not have."""


class Described:
    """An object shown as its type and address (no value sampler reads)."""

    def __init__(self, type_name: str, address: int) -> None:
        self.type_name = type_name
        self.address = address

    def __str__(self) -> str:
        return f"<{self.type_name} at {self.address:#x}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Described) and (self.type_name, self.address) == (other.type_name, other.address)

    def __hash__(self) -> int:
        return hash((self.type_name, self.address))


Value = Union[int, float, bool, str, bytes, None, Described]  # (3.9: no X | Y at run time)


class Objects:
    """The objects of one interpreter: its version and layout, and a way to read its memory."""

    def __init__(self, version: tuple[int, int], layout: Layout, read: Read) -> None:
        self.version = version
        self.layout = layout
        self._read = read
        self.reading: Read | None = None
        """What reads while a row is evaluated (the row's own read, checked for tearing), else ``read``."""
        self._type_names: dict[int, str] = {}
        self.secret: tuple[int, int] | None = None
        """The process's _Py_HashSecret (k0, k1) once checked (trust_secret)."""
        self.deadline: float | None = None
        """When reading must stop (time.monotonic()): every read after it is Unreadable (a collection's
        budget: a target's data can make any walk over it long)."""

    # -- memory ------------------------------------------------------------------

    def read(self, address: int, size: int) -> bytes:
        if address <= 0 or size < 0:
            raise Unreadable(f"a pointer to {address:#x}")
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise Unreadable("the time for reading this process ran out (the target's data made it long)")
        try:
            return (self.reading or self._read)(address, size)
        except UnreadableMemory as e:
            raise Unreadable(str(e)) from None

    def word(self, address: int) -> int:
        return int.from_bytes(self.read(address, 8), "little")

    def signed(self, address: int) -> int:
        return int.from_bytes(self.read(address, 8), "little", signed=True)

    def field(self, obj: int, key: str) -> int:
        """The pointer-sized word at ``obj`` + the layout's ``key``."""
        return self.word(obj + self.layout[key])

    # -- types --------------------------------------------------------------------

    def type_of(self, obj: int) -> int:
        return self.word(obj + 8)

    def type_name(self, obj: int) -> str:
        t = self.type_of(obj)
        name = self._type_names.get(t)
        if name is None:
            name = self.c_string(self.field(t, "type.name"), MAX_NAME)
            if len(self._type_names) < 4096:
                self._type_names[t] = name
        return name

    def c_string(self, address: int, limit: int) -> str:
        raw = b""
        while len(raw) < limit:
            page_left = 4096 - (address + len(raw)) % 4096
            part = self.read(address + len(raw), min(page_left, limit - len(raw)))
            end = part.find(b"\0")
            if end >= 0:
                return (raw + part[:end]).decode("utf-8", "replace")
            raw += part
        return raw.decode("utf-8", "replace")

    # -- values -------------------------------------------------------------------

    def value(self, obj: int) -> Value:
        """What ``obj`` holds, for the types sampler shows; others as their type and address."""
        if obj == 0:
            raise Unreadable("a NULL object")
        name = self.type_name(obj)
        if name == "NoneType":
            return None
        if name == "bool":
            return self.integer(obj) != 0
        if name == "int":
            return self.integer(obj)
        if name == "float":
            return float(struct.unpack("<d", self.read(obj + self.layout["float.value"], 8))[0])
        if name == "str":
            return self.text(obj)
        if name == "bytes":
            return self.bytes_of(obj)
        return Described(name, obj)

    def integer(self, obj: int) -> int:
        if self.version >= (3, 12):
            tag = self.word(obj + self.layout["long.size"])
            count, sign = tag >> 3, 1 - (tag & 3)
        else:
            size = self.signed(obj + self.layout["long.size"])
            count, sign = abs(size), (1 if size > 0 else -1 if size < 0 else 0)
        if count > MAX_DIGITS:
            raise Unreadable(f"an int of {count} digits (sampler reads {MAX_DIGITS} at most)")
        raw = self.read(obj + self.layout["long.digits"], 4 * count) if count else b""
        total = 0
        for i in range(count - 1, -1, -1):
            total = (total << 30) | (int.from_bytes(raw[4 * i:4 * i + 4], "little") & 0x3FFFFFFF)
        return sign * total

    def text(self, obj: int, limit: int = MAX_TEXT) -> str:
        """A str's characters (at most ``limit``, a longer one cut and marked with '...')."""
        lay = self.layout
        length = self.signed(obj + lay["unicode.length"])
        state = int.from_bytes(self.read(obj + lay["unicode.state"], 4), "little")
        kind, compact, ascii_only = (state >> 2) & 7, (state >> 5) & 1, (state >> 6) & 1
        if length < 0 or kind not in (1, 2, 4):
            raise Unreadable(f"a str of length {length} and kind {kind}: not believed")
        if compact:
            data = obj + (lay["unicode.ascii_size"] if ascii_only else lay["unicode.compact_size"])
        else:
            data = self.word(obj + lay["unicode.compact_size"])  # (a legacy string: its data elsewhere)
        count = min(length, limit)
        raw = self.read(data, count * kind) if count else b""
        encoding = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[kind]
        shown = raw.decode("latin-1") if kind == 1 else _decode(raw, encoding)
        return shown + ("..." if length > limit else "")

    def bytes_of(self, obj: int, limit: int = MAX_TEXT) -> bytes:
        size = self.signed(obj + self.layout["var.size"])
        if size < 0:
            raise Unreadable(f"a bytes of size {size}")
        return self.read(obj + self.layout["bytes.data"], min(size, limit)) if size else b""

    def length(self, obj: int) -> int:
        """len() of a str, bytes, tuple, list, dict, set, frozenset or deque."""
        name = self.type_name(obj)
        if name == "str":
            return self.signed(obj + self.layout["unicode.length"])
        if name in ("bytes", "tuple", "list", "collections.deque", "bytearray"):
            return self.signed(obj + self.layout["var.size"])
        if name == "dict" or self._is_dict(obj):
            return self.signed(obj + self.layout["dict.used"])
        if name in ("set", "frozenset"):
            return self.signed(obj + SET_USED)
        raise Unreadable(f"len() of a {name}: sampler reads the length of str, bytes, tuple, list, dict, set and "
                         "deque")

    def _is_dict(self, obj: int) -> bool:
        flags = self.word(self.type_of(obj) + self.layout["type.flags"])
        return bool(flags & DICT_SUBCLASS)

    # -- containers ---------------------------------------------------------------

    def item(self, obj: int, key: str | int) -> int:
        """``obj[key]``: a dict's item, or a list's or tuple's by index."""
        name = self.type_name(obj)
        if name in ("list", "tuple") and isinstance(key, int):
            size = self.signed(obj + self.layout["var.size"])
            index = key + size if key < 0 else key
            if not 0 <= index < size:
                raise Missing(f"index {key} is out of the {name}'s {size} items")
            items = obj + self.layout["tuple.items"] if name == "tuple" else self.field(obj, "list.items")
            return self.word(items + 8 * index)
        if name != "dict" and not self._is_dict(obj):
            raise Unreadable(f"a {name} is not read by key (sampler reads dicts, lists and tuples)")
        found = self.dict_get(obj, key)
        if found is None:
            raise Missing(f"no key {key!r}")
        return found

    def dict_get(self, d: int, key: str | int) -> int | None:
        """The value of ``key`` (a str or an int) in dict ``d``: found as the interpreter finds it, by
        the key's hash, where the process's hash secret is known (``secret``); else by comparing keys."""
        keys = self.field(d, "dict.keys")
        values = self.field(d, "dict.values")
        if self.secret is not None:
            index, value = self._probe(keys, key)
            if index is None:
                return None
            return (self._split_value(values, index) if values else value) or None
        for index, entry_key, value in self._entries(keys):
            if self._key_is(entry_key, key):
                return (self._split_value(values, index) if values else value) or None  # (0: a split dict's key
        return None                                                                 # with no value here)

    def hash_of(self, key: str | int) -> int:
        assert self.secret is not None
        return str_hash(self.version, *self.secret, key) if isinstance(key, str) else int_hash(key)

    def _probe(self, keys: int, key: str | int) -> tuple[int | None, int]:
        """(entry index, value) of ``key`` in a dict's keys object, probed as CPython's lookdict
        probes; (None, 0) when it is not there."""
        lay = self.layout
        if self.version >= (3, 11):
            log2_size, log2_index_bytes, kind = self.read(keys + lay["keys.log2_size"], 3)
            if log2_size > MAX_LOG2_SIZE or log2_index_bytes > MAX_LOG2_SIZE + 3 or log2_index_bytes < log2_size:
                raise Unreadable(f"a dict of 2^{log2_size} slots: not believed (sampler reads {MAX_ENTRIES} "
                                 "entries at most)")
            size = 1 << log2_size
            width = (1 << log2_index_bytes) >> log2_size
            entries = keys + lay["keys.indices"] + (1 << log2_index_bytes)
            entry_size, key_at, stored_hash = (24, 8, True) if kind == 0 else (16, 0, False)
        else:
            size = self.signed(keys + lay["keys.size"])
            if not 0 < size <= 2 * MAX_ENTRIES or size & (size - 1):
                raise Unreadable(f"a dict of {size} slots: not believed")
            width = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            entries = keys + lay["keys.indices"] + size * width
            entry_size, key_at, stored_hash = 24, 8, True
        if width not in (1, 2, 4, 8):
            raise Unreadable(f"a dict's index of {width}-byte slots: not believed")
        wanted = self.hash_of(key)
        mask = size - 1
        perturb = wanted & ((1 << 64) - 1)
        i = perturb & mask
        nentries = self.signed(keys + lay["keys.nentries"])
        if not 0 <= nentries <= size:  # (CPython uses 2/3 of a table's slots at most)
            raise Unreadable(f"a dict of {nentries} entries in {size} slots: not believed")
        table: bytes | None = None
        all_entries: bytes | None = None
        met: set[int] = set()
        for step in range(size + 14):  # (perturb is 0 after 13 shifts; then i -> 5i + 1 meets every slot once)
            if step == PROBES_ONE_BY_ONE:
                table = self.read(keys + lay["keys.indices"], size * width)
            raw_index = table[i * width:(i + 1) * width] if table is not None else \
                self.read(keys + lay["keys.indices"] + i * width, width)
            index = int.from_bytes(raw_index, "little", signed=True)
            if index == -1:  # DKIX_EMPTY
                return None, 0
            if index >= nentries:
                raise Unreadable(f"a dict's index {index} past its {nentries} entries: not believed")
            if index >= 0 and index not in met:  # (a probe may come back to a slot it saw: nothing new there)
                met.add(index)
                if len(met) == PROBES_ONE_BY_ONE:
                    all_entries = self.read(entries, nentries * entry_size)
                raw = all_entries[index * entry_size:(index + 1) * entry_size] if all_entries is not None else \
                    self.read(entries + index * entry_size, entry_size)
                entry_key = int.from_bytes(raw[key_at:key_at + 8], "little")
                value = int.from_bytes(raw[key_at + 8:key_at + 16], "little")
                held = int.from_bytes(raw[0:8], "little", signed=True) if stored_hash else \
                    (self.signed(entry_key + STR_HASH) if entry_key else None)
                if entry_key and held == wanted and self._key_is(entry_key, key):
                    return index, value
            perturb >>= 5
            i = (i * 5 + perturb + 1) & mask
        raise Unreadable("a dict whose probing never ends: not believed")

    def trust_secret(self, secret: tuple[int, int], d: int) -> bool:
        """Take ``secret`` as the process's hash secret when it gives the hash the process cached
        for the first str keys of dict ``d`` (sys.modules); else keys are compared one by one."""
        checked = 0
        for _, key, _ in self._entries(self.field(d, "dict.keys"))[:8]:
            if self.type_name(key) != "str":
                continue
            cached = self.signed(key + STR_HASH)
            if cached == -1:
                continue
            if str_hash(self.version, *secret, self.text(key)) != cached:
                return False
            checked += 1
        if checked:
            self.secret = secret
        return checked > 0

    def dict_items(self, d: int, limit: int) -> list[tuple[int, int]]:
        """(key, value) objects of a dict, in table order, ``limit`` at most."""
        keys = self.field(d, "dict.keys")
        values = self.field(d, "dict.values")
        found = []
        for index, entry_key, value in self._entries(keys):
            if values:
                value = self._split_value(values, index)
            if value:
                found.append((entry_key, value))
                if len(found) >= limit:
                    break
        return found

    def _split_value(self, values: int, index: int) -> int:
        start = values + (8 if self.version >= (3, 13) else 0)  # (3.13's PyDictValues has a header)
        return self.word(start + 8 * index)

    def _entries(self, keys: int) -> list[tuple[int, int, int]]:
        """(index, key, value) of every used entry of a dict's keys object."""
        lay = self.layout
        nentries = self.signed(keys + lay["keys.nentries"])
        if self.version >= (3, 11):
            head = self.read(keys + lay["keys.log2_size"], 3)
            log2_size, log2_index_bytes, kind = head[0], head[1], head[2]
            if log2_size > MAX_LOG2_SIZE or log2_index_bytes > MAX_LOG2_SIZE + 3:
                raise Unreadable(f"a dict of 2^{log2_size} slots: not believed (sampler reads {MAX_ENTRIES} "
                                 "entries at most)")
            entries = keys + lay["keys.indices"] + (1 << log2_index_bytes)
            entry_size = 24 if kind == 0 else 16
            key_at = 8 if kind == 0 else 0
        else:
            size = self.signed(keys + lay["keys.size"])
            if not 0 < size <= 2 * MAX_ENTRIES:
                raise Unreadable(f"a dict of {size} slots: not believed")
            width = 1 if size <= 0xFF else 2 if size <= 0xFFFF else 4 if size <= 0xFFFFFFFF else 8
            entries = keys + lay["keys.indices"] + size * width
            entry_size, key_at = 24, 8
        if not 0 <= nentries <= MAX_ENTRIES:
            raise Unreadable(f"a dict of {nentries} entries: not believed (sampler reads {MAX_ENTRIES} at most)")
        found = []
        for first in range(0, nentries, CHUNK):
            count = min(CHUNK, nentries - first)
            raw = self.read(entries + first * entry_size, count * entry_size)
            for i in range(count):
                base = i * entry_size
                key = int.from_bytes(raw[base + key_at:base + key_at + 8], "little")
                value = int.from_bytes(raw[base + key_at + 8:base + key_at + 16], "little")
                if key:
                    found.append((first + i, key, value))
        return found

    def _key_is(self, obj: int, wanted: str | int) -> bool:
        try:
            name = self.type_name(obj)
            if isinstance(wanted, str):
                if name != "str" or self.signed(obj + self.layout["unicode.length"]) != len(wanted):
                    return False
                return self.text(obj) == wanted
            return name in ("int", "bool") and self.integer(obj) == wanted
        except Unreadable:
            return False

    # -- attributes ---------------------------------------------------------------

    def attribute(self, obj: int, name: str) -> int:
        """``obj.name``: from the object's own attributes (its __dict__, or the values 3.11 and later
        keep beside it), then its class's and the classes of its MRO."""
        found = self._own_attribute(obj, name)
        if found:
            return found
        cls = self.type_of(obj)
        found = self._class_attribute(cls, name)
        if found:
            return found
        if self.type_name(obj) == "type":  # a class itself: its own and its bases' attributes
            found = self._class_attribute(obj, name)
            if found:
                return found
        raise Missing(f"no attribute {name!r}")

    def _own_attribute(self, obj: int, name: str) -> int | None:
        lay = self.layout
        cls = self.type_of(obj)
        flags = self.word(cls + lay["type.flags"])
        if self.version >= (3, 13) and flags & INLINE_VALUES:
            values = obj + self.signed(cls + lay["type.basicsize"])
            if self.read(values + 3, 1)[0]:  # valid: the attributes are here, not in a dict
                return self._cached_key_value(cls, values, name)
        if self.version >= (3, 11) and flags & MANAGED_DICT:
            pointer = self.word(obj - 24)
            if self.version == (3, 12) and pointer & 1:
                return self._cached_key_value(cls, pointer + 1, name)  # (stored as values - 1)
            if pointer:
                return self.dict_get(pointer, name)
            if self.version == (3, 11):
                values = self.word(obj - 32)
                return self._cached_key_value(cls, values, name) if values else None
            return None
        offset = self.signed(cls + lay["type.dictoffset"])
        if offset > 0:
            d = self.word(obj + offset)
            return self.dict_get(d, name) if d else None
        if offset < 0:
            raise Unreadable(f"a {self.type_name(obj)}'s attributes (its __dict__ after its variable part) are "
                             "not read")
        return None

    def _cached_key_value(self, cls: int, values: int, name: str) -> int | None:
        """An attribute kept in values beside the object: its index is its key's in the class's
        shared keys."""
        keys = self.word(cls + self.layout["heaptype.cached_keys"])
        if not keys:
            return None
        for index, key, _ in self._entries(keys):
            if self._key_is(key, name):
                return self._split_value(values, index)
        return None

    def _class_attribute(self, cls: int, name: str) -> int | None:
        mro = self.word(cls + self.layout["type.mro"])
        classes = [cls]
        if mro and self.type_name(mro) == "tuple":
            size = self.signed(mro + self.layout["var.size"])
            if 0 < size <= 256:
                raw = self.read(mro + self.layout["tuple.items"], 8 * size)
                classes = [int.from_bytes(raw[8 * i:8 * i + 8], "little") for i in range(size)]
        for each in classes:
            d = self.word(each + self.layout["type.dict"])
            if d:
                found = self.dict_get(d, name)
                if found:
                    return found
        return None


def _decode(raw: bytes, encoding: str) -> str:
    """UCS-2 and UCS-4 text as CPython holds it: a lone surrogate kept (as the program's own str has it)."""
    try:
        return raw.decode(encoding, "surrogatepass")
    except UnicodeDecodeError:
        return raw.decode(encoding, "replace")


STR_HASH = 24
"""PyASCIIObject's cached hash (-1: not computed yet), the same in 3.8-3.13."""
SET_USED = 24
"""PySetObject's ``used`` (after the header and ``fill``), the same in 3.8-3.13."""
DICT_SUBCLASS = 1 << 29
"""Py_TPFLAGS_DICT_SUBCLASS."""
