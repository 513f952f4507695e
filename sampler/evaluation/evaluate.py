"""Expression -> value, over DWARF types and the target's memory, with C/Go arithmetic.

Names resolve through a Scope: parameters and locals at the breakpoint first,
then globals (Go's package-qualified names such as ``main.ring`` included).
``.`` on a pointer dereferences it; ``[i]`` works on arrays, pointers and Go
slices. Integer arithmetic wraps at the width of its operands, as in C and Go.
"""

from __future__ import annotations

import ast
import operator
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Optional

from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.locations import Computed, InBytes, InMemory, InRegister, Location, OptimizedOut
from sampler.debuginfo.types import Array, Enum, Pointer, Scalar, Struct, Type, is_interface
from sampler.errors import ExpressionError
from sampler.evaluation.golang import Dynamic
from sampler.evaluation.plan import PlanMiss
from sampler.evaluation.wrappers import MAX_TEXT, text_fields, unwrap
from sampler.language import casts
from sampler.language.expr import (
    ADDRESS_OF,
    BUILTINS,
    MAX_BYTES,
    REGISTER_PREFIX,
    SAMPLER_ONLY,
    register_name,
    source_name,
)
from sampler.process.reads import Read, UnreadableMemory
from sampler.sample import Value

TEXT_BUILTINS = SAMPLER_ONLY
"""str(), buf(), startswith(): built-ins whose result is text (or a test of text)."""


class SampleError(Exception):
    """This sample cannot be evaluated (null pointer, unreadable, optimized out)."""


@dataclass(frozen=True)
class Object:
    """A typed thing in the target: where it is, or its value when it has no address."""

    type: Type
    location: Location


@dataclass(frozen=True)
class Num:
    value: int | float
    bits: int = 0
    """0 for an untyped literal: it takes the other operand's type."""
    signed: bool = True
    is_bool: bool = False
    is_address: bool = False
    """&x, and &x plus or minus a number: printed in hex, as pointers are."""


@dataclass(frozen=True)
class Text:
    """A string made by the expression: a literal, str(), buf()."""

    value: str


Resolve = Callable[[str], Optional[Object]]
RegisterValue = Callable[[str], int]
DynamicType = Callable[[int], Optional[Dynamic]]


class Evaluator:
    def __init__(self, resolve: Resolve, read: Read, register: RegisterValue, where: str,
                 name_hint: str = "check the spelling", dynamic: DynamicType | None = None,
                 on_branch: Callable[[], None] | None = None) -> None:
        self.resolve = resolve
        self.on_branch = on_branch or (lambda: None)
        """Told when the data chooses what is read next (an interface, a C string)."""
        self.dynamic = dynamic
        """Go: the dynamic type of an interface, from its runtime type descriptor."""
        self.read = read
        self.register = register
        self.where = where
        """Where names were looked up, for the error when one is missing."""
        self.name_hint = name_hint
        """What to do about a missing name."""

    def value(self, tree: ast.Expression) -> Value:
        """Evaluate; SampleError for problems of this sample, ExpressionError for unknown names."""
        try:
            result = self._eval(tree.body)
            if isinstance(result, Object):
                return self._present(result)
            if isinstance(result, Text):
                return result.value
            return _present_num(result)
        except (UnreadableMemory, OptimizedOut) as e:
            raise SampleError(str(e)) from None
        except PlanMiss as e:
            raise SampleError(f"{e}: the next sample is read in full") from None
        except Malformed as e:  # a type read lazily (an interface's dynamic type)
            raise SampleError(f"the debug info is corrupted ({e})") from None
        except ZeroDivisionError:
            raise SampleError("division by zero") from None
        except OverflowError:
            raise SampleError("a number too large for a float") from None

    def number(self, node: ast.AST) -> Num:
        """The number a part of an expression is (its width and sign with it); the errors as ``_eval``'s."""
        return self._num(self._eval(node))

    def operand(self, node: ast.AST) -> Object | Num | Text:
        """What a part of an expression is before it is loaded (an object: its type and location)."""
        return self._eval(node)

    # -- the tree ---------------------------------------------------------------

    def _eval(self, node: ast.AST) -> Object | Num | Text:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Text(node.value)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return Num(node.value)
        if isinstance(node, ast.Name) and node.id.startswith(REGISTER_PREFIX):
            return Num(self.register(register_name(node.id)), 64, signed=False)
        if isinstance(node, ast.Name):
            return self._name(source_name(node.id))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and isinstance(node.left, ast.Name):
            cast = casts.decode(node.left.id)
            if cast is None:
                raise ExpressionError(f"unsupported expression {ast.unparse(node)!r}")
            return self._cast(cast, self._eval(node.right))
        if isinstance(node, ast.Attribute):
            dotted = dotted_name(node)
            if dotted is not None:
                found = self.resolve(dotted)
                if found is not None:
                    return found
            return self._field(self._object(node.value), source_name(node.attr))
        if isinstance(node, ast.Subscript):
            container = self._object(node.value)
            if _is_go_map(container.type):
                return self._map_index(container, self._eval(node.slice))
            return self._index(container, self._int(self._eval(node.slice)))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in TEXT_BUILTINS:
            return self._text_builtin(node.func.id, node.args)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BUILTINS:
            return self._builtin(node.func.id, self._object(node.args[0]))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == ADDRESS_OF:
            # &x is a number (its address): arithmetic on it counts bytes, as for a data symbol
            return Num(self._address(self._object(node.args[0])), 64, signed=False, is_address=True)
        if isinstance(node, ast.Call):  # only __deref__ and the built-ins pass expr's checks
            return self._deref(self._object(node.args[0]))
        if isinstance(node, ast.UnaryOp):
            operand = self._num(self._eval(node.operand))
            if isinstance(node.op, ast.Not):
                return Num(not operand.value, is_bool=True)
            if isinstance(node.op, ast.USub):
                return _wrap(-operand.value, operand)
            if isinstance(node.op, ast.Invert):
                return _wrap(~self._int(operand), operand)
            return operand
        if isinstance(node, ast.BinOp):
            left, right = self._num(self._eval(node.left)), self._num(self._eval(node.right))
            result = _binary(node.op, left, right)
            if (left.is_address != right.is_address) and isinstance(node.op, (ast.Add, ast.Sub)):
                result = replace(result, is_address=True)  # an address and a number of bytes
            return result
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(isinstance(side, ast.Constant) and isinstance(side.value, str) for side in sides):
                return self._compare_texts(node)
            left = self._num(self._eval(node.left))
            for op, right_node in zip(node.ops, node.comparators):
                right = self._num(self._eval(right_node))
                if not _COMPARE[type(op)](left.value, right.value):
                    return Num(False, is_bool=True)
                left = right
            return Num(True, is_bool=True)
        if isinstance(node, ast.BoolOp):
            want = isinstance(node.op, ast.Or)
            for operand_node in node.values:
                if bool(self._num(self._eval(operand_node)).value) == want:
                    return Num(want, is_bool=True)
            return Num(not want, is_bool=True)
        raise ExpressionError(f"unsupported expression {ast.unparse(node)!r}")

    def _builtin(self, name: str, obj: Object) -> Num:
        """Go's len() and cap() of a string, slice, array, map or channel."""
        obj = self._concrete(obj)
        t = obj.type
        if isinstance(t, Array) and t.count is not None:
            return Num(t.count, 64)
        if isinstance(t, Struct) and (t.name == "string" or t.name.startswith("[]")):
            if name == "cap" and t.name == "string":
                raise ExpressionError("cap() of a string: a string has only a len()")
            return self._load(self._field(obj, "len" if name == "len" else "cap"))
        if isinstance(t, Pointer) and isinstance(t.target, Struct) and t.target.name.startswith(("hash<", "hchan<")):
            field = {("len", True): "count", ("len", False): "qcount", ("cap", False): "dataqsiz"}.get(
                (name, t.target.name.startswith("hash<")))
            if field is None:
                raise ExpressionError("cap() of a map: a map has only a len()")
            if self._int(self._load(obj)) == 0:
                return Num(0, 64)  # a nil map or channel
            return self._load(self._field(obj, field))
        raise ExpressionError(f"{name}() of {t.name}: it takes a string, slice, array, map or channel")

    def _compare_texts(self, node: ast.Compare) -> Num:
        """``==`` and ``!=`` with a string literal on a side: every side read as text."""
        left = self._as_text(self._eval(node.left))
        for op, right_node in zip(node.ops, node.comparators):
            right = self._as_text(self._eval(right_node))
            if (left == right) != isinstance(op, ast.Eq):
                return Num(False, is_bool=True)
            left = right
        return Num(True, is_bool=True)

    def _text_builtin(self, name: str, args: list[ast.expr]) -> Object | Num | Text:
        """str(x), str(x, n), buf(x, n), startswith(x, "text")."""
        if name == "startswith":
            whole = self._as_text(self._eval(args[0]))
            return Num(whole.startswith(self._as_text(self._eval(args[1]))), is_bool=True)
        limit = None
        if len(args) == 2:
            limit = self._int(self._eval(args[1]))
            if not 0 <= limit <= MAX_BYTES:
                raise SampleError(f"{name}(): {limit} bytes asked; between 0 and {MAX_BYTES}")
        operand = self._eval(args[0])
        if name == "buf":
            assert limit is not None
            return Text(self._bytes_at(operand, limit).hex())
        if isinstance(operand, Object) and (text_fields(operand.type) is not None or is_interface(operand.type)):
            whole = self._as_text(operand)  # a string with a length: at most ``limit`` of it
            return Text(whole if limit is None else whole[:limit])
        if limit is None:
            return Text(self._as_text(operand)) if isinstance(operand, Object) and \
                isinstance(operand.type, Array) else Text(self._c_string(self._pointer_of(operand)))
        data = self._bytes_at(operand, limit)
        end = data.find(b"\0")
        return Text((data if end < 0 else data[:end]).decode("utf-8", "replace"))

    def _pointer_of(self, value: Object | Num | Text) -> int:
        """The address a pointer or an integer holds (str(), buf())."""
        if isinstance(value, Text):
            raise ExpressionError("str() and buf() take a pointer or an address, not a string literal")
        if isinstance(value, Object) and isinstance(value.type, (Struct, Array, Untyped)):
            return self._address(value)  # the bytes of the thing itself
        address = self._int(value) & (1 << 64) - 1
        if address == 0:
            raise SampleError("null pointer")
        return address

    def _bytes_at(self, value: Object | Num | Text, size: int) -> bytes:
        """``size`` bytes where ``value`` points (or of the array or struct itself)."""
        self.on_branch()  # the address is data: what is read next depends on it
        if size == 0:
            return b""
        if isinstance(value, Object) and not isinstance(value.location, InMemory) \
                and isinstance(value.type, (Struct, Array)):
            return self._bytes(value, 0, min(size, value.type.size))
        address = self._pointer_of(value)
        try:
            return self.read(address, size)
        except UnreadableMemory:  # up to the end of what is mapped, page by page
            data = b""
            while len(data) < size:
                at = address + len(data)
                try:
                    data += self.read(at, min(size - len(data), 4096 - at % 4096))
                except UnreadableMemory:
                    if not data:
                        raise
                    break
            return data

    def _as_text(self, value: Object | Num | Text) -> str:
        """What a side of a string comparison reads as: a literal, a string (C's char * and
        char arrays, std::string, Go and Rust strings), str() and buf()."""
        if isinstance(value, Text):
            return value.value
        if isinstance(value, Num):
            raise ExpressionError("a number compared with a string: compare numbers with numbers")
        t = value.type
        if is_interface(t):  # only one that holds a string is text (not "nil" or a type's name)
            dynamic = self._dynamic_type(value)
            if dynamic is None:
                raise SampleError("a nil interface is not a string")
            if text_fields(dynamic.type) is None:
                raise SampleError(f"the interface holds a {dynamic.name}, not a string")
            return self._as_text(self._inside(value, dynamic))
        if text_fields(t) is not None or isinstance(t, TextPointer):
            found = self._present(value)
            assert isinstance(found, str)
            return found
        if isinstance(t, Pointer) and isinstance(t.target, Scalar) and t.target.size == 1:
            return self._c_string(self._pointer_of(value))
        if isinstance(t, Array) and isinstance(t.element, Scalar) and t.element.size == 1 and t.count:
            data = self._bytes(value, 0, min(t.count, MAX_BYTES))
            end = data.find(b"\0")
            return (data if end < 0 else data[:end]).decode("utf-8", "replace")
        raise ExpressionError(f"{t.name} is not a string: read one with str(p) or str(p, n)")

    def _cast(self, cast: casts.Cast, operand: Object | Num | Text) -> Object | Num:
        """A C cast: a pointer of the named type (a read only happens through it), or the
        value converted to the named scalar type."""
        if isinstance(operand, Text):
            raise ExpressionError("a string literal cannot be cast")
        if cast.stars:
            if isinstance(operand, Object) and isinstance(operand.type, (Struct, Array)):
                address = self._address(operand)  # (T *)array: its first element
            else:
                address = self._int(operand) & (1 << 64) - 1
            target: Type = Type("void", 0) if cast.kind == "void" else Scalar(cast.base, cast.size, cast.kind)
            for _ in range(cast.stars - 1):
                target = Pointer(f"{target.name}*", 8, target)
            kind = TextPointer if cast.stars == 1 and cast.base.endswith("char") else Pointer
            return Object(kind(cast.name, 8, target), Computed(address))
        value = self._num(operand)
        if cast.kind == "float":
            return Num(float(value.value), cast.size * 8)
        if cast.kind == "bool":
            return Num(bool(value.value), 8, signed=False, is_bool=True)
        whole = int(value.value)
        bits = cast.size * 8
        whole &= (1 << bits) - 1
        if cast.kind == "signed" and whole >= 1 << (bits - 1):
            whole -= 1 << bits
        return Num(whole, bits, cast.kind == "signed")

    def _name(self, name: str) -> Object:
        found = self.resolve(name)
        if found is None:
            raise ExpressionError(f"no variable {name!r} {self.where}", self.name_hint)
        return found

    def _object(self, node: ast.AST) -> Object:
        result = self._eval(node)
        if not isinstance(result, Object):
            raise ExpressionError(f"{ast.unparse(node)!r} is a number, not a variable")
        return result

    def _field(self, obj: Object, name: str) -> Object:
        if isinstance(obj.type, Untyped):
            raise untyped(obj.type)
        if isinstance(obj.type, Pointer):
            obj = self._deref(obj)
        dynamic = is_interface(obj.type)
        if dynamic:
            obj = self._concrete(obj)
            if isinstance(obj.type, Pointer):
                obj = self._deref(obj)
        if not isinstance(obj.type, Struct):
            if dynamic:  # the next sample's dynamic type may have it
                raise SampleError(f"the interface holds a {obj.type.name}, which has no field {name!r}")
            raise ExpressionError(f"{obj.type.name} has no field {name!r} (it is not a struct)")
        found = obj.type.member(name)
        if found is None and dynamic:
            raise SampleError(f"the interface holds a {obj.type.name}, which has no field {name!r}")
        if found is None:
            raise ExpressionError(f"{obj.type.name} has no field {name!r}",
                                  f"its fields are: {', '.join(obj.type.members) or 'none'}")
        base, member = found
        return self._part(obj, base + member.offset, member.type)

    def _deref(self, obj: Object) -> Object:
        if not isinstance(obj.type, Pointer) or obj.type.target is None:
            raise ExpressionError(f"cannot dereference {obj.type.name}: it is not a pointer")
        address = self._int(self._load(obj))
        if address == 0:
            raise SampleError(f"null pointer ({obj.type.name})")
        return Object(obj.type.target, InMemory(address))

    def _index(self, obj: Object, index: int) -> Object:
        obj = self._concrete(obj)
        t = obj.type
        if isinstance(t, Array) and t.element is not None:
            if t.count is not None and not 0 <= index < t.count:
                raise SampleError(f"index {index} out of range [0, {t.count})")
            return self._part(obj, index * t.element.size, t.element)
        if isinstance(t, Pointer) and t.target is not None:
            base = self._int(self._load(obj))
            if base == 0:
                raise SampleError(f"null pointer ({t.name})")
            return Object(t.target, InMemory(base + index * t.target.size))
        if isinstance(t, Struct) and t.name.startswith("[]") and {"array", "len"} <= set(t.members):
            length = self._int(self._load(self._field(obj, "len")))
            if not 0 <= index < length:
                raise SampleError(f"index {index} out of range [0, {length})")
            return self._index(self._field(obj, "array"), index)
        raise ExpressionError(f"cannot index {t.name}")

    def _map_index(self, obj: Object, key: Object | Num | Text) -> Object:
        """``m[key]`` of a Go map (string or integer keys), read from the runtime's own layout:
        the hmap's 2^B buckets (and, while the map grows, the old ones not yet moved), each
        eight cells and an overflow chain, scanned for the key (Go 1.18-1.23's buckets; Go
        1.24's Swiss tables are another layout). No hash is computed: the seed is the
        process's own, so every cell is compared, up to MAX_MAP_CELLS."""
        self.on_branch()  # what is read depends on the map's contents
        address = self._int(self._load(obj))
        if address == 0:
            raise SampleError("key not found (a nil map)")
        hmap = Object(obj.type.target, InMemory(address)) if isinstance(obj.type, Pointer) and \
            obj.type.target is not None else obj
        buckets = self._field(hmap, "buckets")
        bucket_type = buckets.type.target if isinstance(buckets.type, Pointer) else None
        if not isinstance(bucket_type, Struct) or not {"tophash", "keys", "values", "overflow"} <= \
                set(bucket_type.members):
            raise ExpressionError(f"{obj.type.name}: not the map layout sampler reads (Go 1.18-1.23 buckets)")
        keys, values = bucket_type.members["keys"], bucket_type.members["values"]
        if not isinstance(keys.type, Array) or not isinstance(values.type, Array) or keys.type.element is None \
                or values.type.element is None:
            raise ExpressionError(f"{obj.type.name}: its buckets have no key and value arrays")
        key_type, value_type = keys.type.element, values.type.element
        wanted = self._map_key(key_type, key)
        count = 1 << min(self._int(self._load(self._field(hmap, "B"))), 30)
        same_size = self._int(self._load(self._field(hmap, "flags"))) & SAME_SIZE_GROW
        seen = 0
        for field, buckets_there in (("buckets", count), ("oldbuckets", count if same_size else count // 2)):
            first = self._int(self._load(self._field(hmap, field)))
            for index in range(buckets_there if first else 0):
                bucket = first + index * bucket_type.size
                while bucket:
                    seen += 8
                    if seen > MAX_MAP_CELLS:
                        raise SampleError(f"the map has over {MAX_MAP_CELLS} cells to look through: not read")
                    data = self.read(bucket, bucket_type.size)  # one read: tophashes, keys, overflow
                    for cell in range(8):
                        if data[cell] == EMPTY_REST:  # this cell and every later one (and overflow) empty
                            break
                        if data[cell] < MIN_TOP_HASH:  # empty, or moved to the new buckets
                            continue
                        at = keys.offset + cell * key_type.size
                        if self._map_key_is(key_type, data[at:at + key_type.size], bucket + at, wanted):
                            return Object(value_type, InMemory(bucket + values.offset + cell * value_type.size))
                    else:
                        overflow = bucket_type.members["overflow"].offset
                        bucket = int.from_bytes(data[overflow:overflow + 8], "little")
                        continue
                    break
        raise SampleError("key not found")

    def _map_key_is(self, key_type: Type, raw: bytes, address: int, wanted: str | int) -> bool:
        """The key stored at ``address`` (its bytes ``raw``, read with its bucket) is ``wanted``:
        a string's length is compared before its bytes are read."""
        fields = text_fields(key_type)
        if fields is not None and isinstance(wanted, str):
            length = int.from_bytes(raw[fields[1]:fields[1] + 8], "little")
            if length != len(wanted.encode("utf-8", "surrogatepass")) and "\ufffd" not in wanted:
                return False
        return self._map_key(key_type, Object(key_type, InBytes(raw))) == wanted if fields is None else \
            self._map_key(key_type, Object(key_type, InMemory(address))) == wanted

    def _map_key(self, key_type: Type, key: Object | Num | Text) -> str | int:
        """A map key as a comparable: a string's text or an integer."""
        if text_fields(key_type) is not None:
            if isinstance(key, Num):
                raise ExpressionError("the map's keys are strings: index it with a string, m[\"key\"]")
            return self._as_text(key)
        if isinstance(key_type, (Scalar, Enum)) and not (isinstance(key_type, Scalar) and key_type.kind == "float"):
            if isinstance(key, Text):
                raise ExpressionError("the map's keys are integers: index it with a number")
            return self._int(key)
        raise ExpressionError(f"maps keyed by {key_type.name}: sampler indexes maps by string or integer keys")

    # -- loading ----------------------------------------------------------------

    def _address(self, obj: Object) -> int:
        if isinstance(obj.location, InMemory):
            return obj.location.address
        raise SampleError(f"a {obj.type.name} held in a register has no address")

    def _part(self, obj: Object, offset: int, t: Type) -> Object:
        """The part of ``obj`` at ``offset``, of type ``t`` (a field, an element)."""
        where = obj.location
        if isinstance(where, InMemory):
            return Object(t, InMemory(where.address + offset))
        if isinstance(where, (InRegister, Computed)):  # a small struct in one register
            where = InBytes(self._bytes(obj, 0, 8))
        if isinstance(where, InBytes) and offset + t.size <= len(where.data):
            return Object(t, InBytes(where.data[offset:offset + t.size]))
        raise SampleError(f"a {obj.type.name} held in registers has no part at offset {offset}")

    def _bytes(self, obj: Object, offset: int, size: int) -> bytes:
        """``size`` bytes of ``obj`` from ``offset``, wherever it is."""
        where = obj.location
        if isinstance(where, InMemory):
            return self.read(where.address + offset, size)
        if isinstance(where, InBytes):
            data = where.data
        elif isinstance(where, InRegister):
            data = self.register(where.register).to_bytes(8, "little")
        else:
            data = (where.value & (1 << 64) - 1).to_bytes(8, "little")
        if offset + size > len(data):
            raise SampleError(f"a {obj.type.name} held in registers has no bytes at offset {offset}")
        return data[offset:offset + size]

    def _word(self, obj: Object, offset: int) -> int:
        return int.from_bytes(self._bytes(obj, offset, 8), "little")

    def _load(self, obj: Object) -> Num:
        t = obj.type
        if isinstance(t, Untyped):
            raise untyped(t)
        wrapped = unwrap(t)
        if wrapped is not None:  # std::atomic<T>, AtomicU64, Cell<T>: their T
            return self._load(self._part(obj, wrapped[0], wrapped[1]))
        if isinstance(t, (Struct, Array)) or t.size == 0:
            raise ExpressionError(f"{t.name} is not a number: pick a field or an element")
        size = t.size
        if size > MAX_NUMBER:  # hostile DWARF: a 4096-byte "int"
            raise SampleError(f"{t.name} is a {size}-byte number: at most {MAX_NUMBER} bytes are read as one")
        raw = self._bytes(obj, 0, size)
        if isinstance(t, Scalar) and t.kind == "float":
            if len(raw) not in _FLOAT_FORMATS:
                raise ExpressionError(f"{t.name}: {size}-byte floats are not supported")
            return Num(struct.unpack(_FLOAT_FORMATS[len(raw)], raw)[0], size * 8)
        signed = (isinstance(t, Scalar) and t.kind == "signed") or (isinstance(t, Enum) and t.signed)
        value = int.from_bytes(raw, "little", signed=signed)
        return Num(value, size * 8, signed, is_bool=isinstance(t, Scalar) and t.kind == "bool")

    def _num(self, value: Object | Num | Text) -> Num:
        if isinstance(value, Text):
            raise ExpressionError("a string is not a number: compare it with == or != \"text\"")
        return self._load(value) if isinstance(value, Object) else value

    def _int(self, value: Object | Num | Text) -> int:
        num = self._num(value)
        if isinstance(num.value, float):
            raise ExpressionError("a float cannot be used as an index or in a bitwise operation")
        return int(num.value)

    def _present(self, obj: Object) -> Value:
        if is_interface(obj.type):  # Go: a basic dynamic value as itself, else its type's name
            dynamic = self._dynamic_type(obj)
            if dynamic is None:
                return "nil"
            if dynamic.basic:
                return self._present(self._inside(obj, dynamic))
            return dynamic.name
        fields = text_fields(obj.type)
        if fields is not None:  # std::string, String, &str: the text
            pointer, length = self._word(obj, fields[0]), self._word(obj, fields[1])
            return self._text(pointer, min(length, MAX_TEXT), length > MAX_TEXT)
        if isinstance(obj.type, TextPointer):  # (char *)EXPR: the NUL-terminated string
            pointer = self._int(self._load(obj))
            if pointer == 0:
                raise SampleError("null pointer (char *)")
            return self._c_string(pointer)
        num = self._load(obj)
        if isinstance(obj.type, Pointer):
            return hex(int(num.value))
        if isinstance(obj.type, Enum):
            return obj.type.names.get(int(num.value), int(num.value))
        return _present_num(num)


    def _dynamic_type(self, obj: Object) -> Dynamic | None:
        """The dynamic type of a Go interface; None for a nil one."""
        self.on_branch()
        first = self._word(obj, 0)
        if first == 0:
            return None
        descriptor = first if obj.type.name == "runtime.eface" else \
            int.from_bytes(self.read(first + 8, 8), "little")  # itab._type
        found = self.dynamic(descriptor) if self.dynamic is not None else None
        if found is None:
            raise SampleError(f"the dynamic type of this interface (runtime type at {descriptor:#x}) "
                              "is not in the debug info")
        return found

    def _inside(self, obj: Object, dynamic: Dynamic) -> Object:
        """The value a Go interface holds."""
        if dynamic.direct:  # the data word is the value
            return self._part(obj, 8, dynamic.type)
        return Object(dynamic.type, InMemory(self._word(obj, 8)))

    def _concrete(self, obj: Object) -> Object:
        """The value inside a Go interface (other objects as they are)."""
        if not is_interface(obj.type):
            return obj
        dynamic = self._dynamic_type(obj)
        if dynamic is None:
            raise SampleError("nil interface")
        return self._inside(obj, dynamic)

    def _text(self, pointer: int, length: int, cut: bool) -> str:
        if length == 0:
            return ""
        if pointer == 0:
            raise SampleError("null pointer (string data)")
        text = self.read(pointer, length).decode("utf-8", "replace")
        return text + "..." if cut else text

    def _c_string(self, pointer: int) -> str:
        """Up to MAX_C_STRING bytes up to the NUL, read page by page (no read past a page
        that does not exist)."""
        self.on_branch()
        data = b""
        while len(data) < MAX_C_STRING:
            at = pointer + len(data)
            chunk = min(MAX_C_STRING - len(data), 64, 4096 - at % 4096)
            piece = self.read(at, chunk)
            end = piece.find(b"\0")
            if end >= 0:
                return (data + piece[:end]).decode("utf-8", "replace")
            data += piece
        return data.decode("utf-8", "replace") + "..."


@dataclass
class Untyped(Type):
    """A data symbol the debug info does not describe (a stripped program's global, from its
    symbol table): it has an address and a size, no type."""

    lacking: str = ""
    """Why its file has no debug info, when it has none."""


def untyped(t: Type) -> ExpressionError:
    where = f" ({t.lacking}; " if isinstance(t, Untyped) and t.lacking else " in the debug info ("
    return ExpressionError(f"{t.name!r} has no type{where}a data symbol of {t.size} bytes): "
                           f"read it through a cast of its address, as gdb asks: *(uint64_t *)&{t.name}",
                           f"or *(int32_t *)(&{t.name} + 8) (bytes past it), or its bytes: "
                           f"buf(&{t.name}, {min(max(t.size, 1), 64)})")


MAX_MAP_CELLS = 1 << 16
"""Cells of a Go map looked through for one key (a hostile or huge map is refused, not scanned)."""
SAME_SIZE_GROW = 8
"""hmap.flags: the map grows to as many buckets (else to twice as many: the old ones are half)."""
MIN_TOP_HASH = 5
EMPTY_REST = 0
"""Go's emptyRest: this cell and every one after it, overflow buckets included, are empty."""
"""Go's minTopHash: a cell whose tophash is below it is empty or has been moved."""


def _is_go_map(t: Type) -> bool:
    """A Go map: a pointer to the runtime's hash<K,V>."""
    return isinstance(t, Pointer) and isinstance(t.target, Struct) and t.target.name.startswith("hash<")


class TextPointer(Pointer):
    """``(char *)EXPR``: a pointer that reads as the string it points to."""


MAX_NUMBER = 16
"""The widest number read (__int128)."""
MAX_C_STRING = 256
"""Bytes read of a NUL-terminated string."""


def _present_num(num: Num) -> Value:
    if num.is_bool:
        return "true" if num.value else "false"
    if num.is_address and isinstance(num.value, int):
        return hex(num.value & (1 << 64) - 1)
    return num.value


def dotted_name(node: ast.AST) -> str | None:
    """``main.ring.w`` for an attribute chain on a name (a Go package-qualified global?)."""
    if isinstance(node, ast.Name):
        return source_name(node.id)
    if isinstance(node, ast.Attribute):
        prefix = dotted_name(node.value)
        return None if prefix is None else f"{prefix}.{source_name(node.attr)}"
    return None


def _wrap(value: int | float, like: Num) -> Num:
    if isinstance(value, float) or like.bits == 0:
        return Num(value, like.bits, like.signed)
    value &= (1 << like.bits) - 1
    if like.signed and value >= 1 << (like.bits - 1):
        value -= 1 << like.bits
    return Num(value, like.bits, like.signed)


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _c_mod(a: int, b: int) -> int:
    return a - b * _c_div(a, b)


_INT_OPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: _c_div,
    ast.Mod: _c_mod,
    ast.BitOr: operator.or_, ast.BitXor: operator.xor, ast.BitAnd: operator.and_,
}
_FLOAT_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
}
_COMPARE: dict[type, Callable[[object, object], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,  # type: ignore[dict-item]
    ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,  # type: ignore[dict-item]
}


_FLOAT_FORMATS = {4: "<f", 8: "<d"}
UNTYPED_BITS = 64
"""The width a shift of two untyped numbers (literals) works at."""


def _shift(op: ast.operator, value: int, count: int, like: Num) -> int:
    """A shift as Go defines it: a negative count is an error of this sample; a count of the
    operand's width or more shifts every bit out (0, or -1 for a negative value shifted right)."""
    if count < 0:
        raise SampleError(f"negative shift count {count}")
    width = like.bits or UNTYPED_BITS
    if count >= width:
        return -1 if isinstance(op, ast.RShift) and value < 0 else 0
    return value << count if isinstance(op, ast.LShift) else value >> count


def _binary(op: ast.operator, a: Num, b: Num) -> Num:
    if isinstance(a.value, float) or isinstance(b.value, float):
        float_op = _FLOAT_OPS.get(type(op))
        if float_op is None:
            raise ExpressionError("that operator does not apply to floats")
        return Num(float_op(float(a.value), float(b.value)), 64)
    if a.bits == 0:
        like = b
    elif b.bits == 0 or a.bits > b.bits:
        like = a
    elif b.bits > a.bits:
        like = b
    else:
        like = Num(0, a.bits, a.signed and b.signed)
    if isinstance(op, (ast.LShift, ast.RShift)):  # the result has the left operand's type
        return _wrap(_shift(op, int(a.value), int(b.value), a), a)
    return _wrap(_INT_OPS[type(op)](int(a.value), int(b.value)), like)
