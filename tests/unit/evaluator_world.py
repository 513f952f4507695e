"""A small made-up program for the evaluator's unit and property tests: types, globals, memory."""

from __future__ import annotations

from sampler.debuginfo.locations import Computed, InMemory, InRegister
from sampler.debuginfo.types import Array, Enum, Member, Pointer, Scalar, Struct
from sampler.evaluation.evaluate import Evaluator, Object, Untyped
from sampler.process.reads import UnreadableMemory

U64 = Scalar("uint64_t", 8, "unsigned")
I32 = Scalar("int", 4, "signed")
I8 = Scalar("int8_t", 1, "signed")
F64 = Scalar("double", 8, "float")
F32 = Scalar("float", 4, "float")
F128 = Scalar("long double", 16, "float")
BOOL = Scalar("bool", 1, "bool")
COLOUR = Enum("colour", 4, False, {0: "RED", 1: "GREEN"})
RING = Struct("ring", 40, {})
RING_P = Pointer("ring*", 8, RING)
RING.members.update({
    "r": Member("r", 0, U64), "w": Member("w", 8, U64), "n": Member("n", 16, I32),
    "c": Member("c", 20, COLOUR), "next": Member("next", 24, RING_P), "f": Member("f", 32, F64),
})
ARRAY = Array("int[4]", 16, I32, 4)
SLICE = Struct("[]uint64", 24, {"array": Member("array", 0, Pointer("*uint64", 8, U64)),
                                "len": Member("len", 8, U64), "cap": Member("cap", 16, U64)})
VOIDP = Pointer("void*", 8, None)
U8 = Scalar("unsigned char", 1, "unsigned")
ATOMIC = Struct("atomic<long unsigned int>", 8, {}, [
    Member("", 0, Struct("__atomic_base<long unsigned int>", 8, {"_M_i": Member("_M_i", 0, U64)}))])
RUST_STRING = Struct("String", 24, {"vec": Member("vec", 0, Struct("Vec<u8, alloc::alloc::Global>", 24, {
    "buf": Member("buf", 0, Struct("RawVec<u8, alloc::alloc::Global>", 16, {
        "ptr": Member("ptr", 0, Struct("Unique<u8>", 8, {
            "pointer": Member("pointer", 0, Pointer("*const u8", 8, U8))})),
        "cap": Member("cap", 8, U64)})),
    "len": Member("len", 16, U64)}))})
STR = Struct("&str", 16, {"data_ptr": Member("data_ptr", 0, Pointer("*const u8", 8, U8)),
                          "length": Member("length", 8, U64)})

GO_STRING = Struct("string", 16, {"str": Member("str", 0, Pointer("*uint8", 8, U8)), "len": Member("len", 8, U64)})
BUCKET = Struct("bucket<string,int>", 208, {})
BUCKET.members.update({
    "tophash": Member("tophash", 0, Array("[8]uint8", 8, U8, 8)),
    "keys": Member("keys", 8, Array("[8]string", 128, GO_STRING, 8)),
    "values": Member("values", 136, Array("[8]int", 64, Scalar("int", 8, "signed"), 8)),
    "overflow": Member("overflow", 200, Pointer("*bucket<string,int>", 8, BUCKET)),
})
HMAP = Struct("hash<string,int>", 48, {
    "count": Member("count", 0, U64), "flags": Member("flags", 8, U8), "B": Member("B", 9, U8),
    "buckets": Member("buckets", 16, Pointer("*bucket<string,int>", 8, BUCKET)),
    "oldbuckets": Member("oldbuckets", 24, Pointer("*bucket<string,int>", 8, BUCKET)),
})

GLOBALS = {
    "ring": Object(RING_P, InMemory(0x1000)),
    "r0": Object(RING, InMemory(0x2000)),
    "arr": Object(ARRAY, InMemory(0x3000)),
    "s": Object(SLICE, InMemory(0x4000)),
    "small": Object(I8, InMemory(0x5000)),
    "flag": Object(BOOL, InMemory(0x5001)),
    "half": Object(F32, InMemory(0x5004)),
    "wide": Object(F128, InMemory(0x5010)),
    "v": Object(VOIDP, InMemory(0x5020)),
    "inreg": Object(U64, InRegister("rdi")),
    "konst": Object(I32, Computed(-7)),
    "main.ring": Object(RING_P, InMemory(0x1000)),
    "w_atomic": Object(ATOMIC, InMemory(0x2008)),
    "rust_name": Object(RUST_STRING, InMemory(0x7100)),
    "tag": Object(STR, InMemory(0x7200)),
    "sym": Object(Untyped("sym", 16), InMemory(0x2000)),  # a data symbol without DWARF, over r0
    "m": Object(Pointer("map[string]int", 8, HMAP), InMemory(0x9000)),  # {"ring": 41, "ri": 42, "rin": 43}
    "loop": Object(Pointer("map[string]int", 8, HMAP), InMemory(0x9008)),  # a bucket that overflows into itself
}
NAMES = sorted(GLOBALS)
FIELDS = sorted(RING.members)


def standard_memory() -> dict[int, int]:
    """ring -> r0 {r=5, w=12, n=-3, c=GREEN, next=null, f=2.5}; arr = 1,2,3,4; s = 3 elements."""
    memory: dict[int, int] = {}

    def put(address: int, value: int | bytes, size: int = 8) -> None:
        data = value if isinstance(value, bytes) else value.to_bytes(size, "little", signed=value < 0)
        for i, byte in enumerate(data):
            memory[address + i] = byte

    import struct

    put(0x1000, 0x2000)
    put(0x2000, 5)
    put(0x2008, 12)
    put(0x2010, -3, 4)
    put(0x2014, 1, 4)
    put(0x2018, 0)
    put(0x2020, struct.pack("<d", 2.5))
    for i in range(4):
        put(0x3000 + 4 * i, i + 1, 4)
    put(0x4000, 0x6000)
    put(0x4008, 3)
    put(0x4010, 3)
    for i in range(3):
        put(0x6000 + 8 * i, 100 + i)
    put(0x5000, -128, 1)
    put(0x5001, 1, 1)
    put(0x5004, struct.pack("<f", 0.5))
    put(0x5010, bytes(16))
    put(0x5020, 0x1234)
    put(0x7000, b"ring\0".ljust(64, b"?"))
    put(0x7100, 0x7000)
    put(0x7108, 16)
    put(0x7110, 4)
    put(0x7200, 0x7000)
    put(0x7208, 3)
    # a Go map[string]int: hmap at 0x9100, B=0, one bucket at 0x9200 overflowing into 0x9400
    put(0x9000, 0x9100)
    put(0x9100, 3)
    put(0x9108, 0, 1)
    put(0x9109, 0, 1)
    put(0x9110, 0x9200)
    put(0x9118, 0)
    put(0x9200, bytes(208)), put(0x9400, bytes(208)), put(0x9700, bytes(208))
    put(0x9200, bytes([10, 11, 1, 1, 1, 1, 1, 1]))  # two keys, then empty (emptyOne) cells
    put(0x9208, 0x7000), put(0x9210, 4)  # "ring"
    put(0x9218, 0x7000), put(0x9220, 2)  # "ri"
    put(0x9288, 41), put(0x9290, 42)
    put(0x92C8, 0x9400)
    put(0x9400, bytes([3, 9, 0, 0, 0, 0, 0, 0]))  # cell 0 moved away (3: evacuated), cell 1 "rin", the rest empty
    put(0x9408, 0x7000), put(0x9410, 4)  # a moved "ring": never read
    put(0x9418, 0x7000), put(0x9420, 3)
    put(0x9488, 99), put(0x9490, 43)
    put(0x94C8, 0)
    # a hostile map: hmap at 0x9600 whose only bucket (0x9700) names itself as its overflow
    put(0x9008, 0x9600)
    put(0x9600, 1), put(0x9608, 0, 1), put(0x9609, 0, 1), put(0x9610, 0x9700), put(0x9618, 0)
    put(0x9700, bytes([5] * 8)), put(0x97C8, 0x9700)  # eight empty-string keys, overflowing into itself
    return memory


def evaluator(memory: dict[int, int], registers: dict[str, int] | None = None) -> Evaluator:
    def read(address: int, size: int) -> bytes:
        try:
            return bytes(memory[address + i] for i in range(size))
        except KeyError:
            raise UnreadableMemory(f"cannot read {size} bytes at {address:#x}") from None

    regs = registers if registers is not None else {"rdi": 41}
    return Evaluator(GLOBALS.get, read, lambda name: regs[name], "among the globals")
