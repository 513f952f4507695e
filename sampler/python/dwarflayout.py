"""CPython's layouts read from an interpreter's own DWARF: where each field sampler reads lies.

Used to make the tables of layouts.py (scripts/python-layouts.py) and, in the tests, to check
those tables against every interpreter here that has DWARF (pyenv's builds, Debian's python3.11
through python3.11-dbg's debug file). The structures are taken from a few compilation units that
see them all (ceval.c holds the interpreter's, dictobject.c the dict's...), by name.
"""

from __future__ import annotations

from elftools.dwarf.die import DIE
from elftools.elf.elffile import ELFFile

UNITS = ("Python/ceval.c", "Objects/dictobject.c", "Objects/typeobject.c", "Objects/unicodeobject.c",
         "Objects/longobject.c", "Python/pystate.c", "Python/bltinmodule.c")
"""The compilation units whose types are read (their names as the DWARF gives them)."""


class Structs:
    """The named structures of UNITS: name -> {member: (offset, type DIE)}."""

    def __init__(self, elf: ELFFile) -> None:
        self.found: dict[str, DIE] = {}
        self.sizes: dict[str, int] = {}
        info = elf.get_dwarf_info()
        for cu in info.iter_CUs():
            name = cu.get_top_DIE().attributes.get("DW_AT_name")
            if name is None or not name.value.decode(errors="replace").endswith(UNITS):
                continue  # (Debian's build names them "../Python/ceval.c")
            for die in cu.get_top_DIE().iter_children():
                if die.tag in ("DW_TAG_structure_type", "DW_TAG_typedef") and "DW_AT_name" in die.attributes:
                    key = die.attributes["DW_AT_name"].value.decode()
                    if die.tag == "DW_TAG_typedef" or "DW_AT_declaration" not in die.attributes:
                        self.found.setdefault(("" if die.tag == "DW_TAG_typedef" else "struct ") + key, die)

    def struct(self, name: str) -> DIE:
        die = self.found.get(name)
        if die is None:
            raise KeyError(name)
        return _strip(die)

    def offset(self, name: str, path: str) -> int:
        """The offset of ``path`` (members of nested structs, "a.b.c") in the structure ``name``."""
        offset, _ = self.member(self.struct(name), path)
        return offset

    def member(self, die: DIE, path: str) -> tuple[int, DIE]:
        offset = 0
        for part in path.split("."):
            for child in die.iter_children():
                if child.tag == "DW_TAG_member" and _name(child) == part:
                    offset += child.attributes["DW_AT_data_member_location"].value if \
                        "DW_AT_data_member_location" in child.attributes else 0
                    die = _strip(child.get_DIE_from_attribute("DW_AT_type"))
                    break
            else:
                raise KeyError(f"{_name(die)}.{part}")
        return offset, die

    def pointed(self, name: str, path: str) -> DIE:
        """The structure a pointer member points to."""
        _, die = self.member(self.struct(name), path)
        if die.tag != "DW_TAG_pointer_type":
            raise KeyError(f"{name}.{path} is no pointer")
        return _strip(die.get_DIE_from_attribute("DW_AT_type"))

    def size(self, name: str) -> int:
        return int(self.struct(name).attributes["DW_AT_byte_size"].value)


def _name(die: DIE) -> str | None:
    attr = die.attributes.get("DW_AT_name")
    return attr.value.decode() if attr is not None else None


def _strip(die: DIE) -> DIE:
    """Through typedefs and qualifiers to the type itself."""
    for _ in range(16):
        if die.tag not in ("DW_TAG_typedef", "DW_TAG_const_type", "DW_TAG_volatile_type") or \
                "DW_AT_type" not in die.attributes:
            return die
        die = die.get_DIE_from_attribute("DW_AT_type")
    return die


def layout_of(elf: ELFFile, version: tuple[int, int]) -> dict[str, int]:
    """Every field of layouts.FIELDS this version has, from the DWARF of ``elf``."""
    s = Structs(elf)
    v = version
    out: dict[str, int] = {}

    def put(key: str, struct: str, *paths: str) -> None:
        """The first of ``paths`` the structure has (a field moved between versions)."""
        for path in paths[:-1]:
            try:
                out[key] = s.offset(struct, path)
                return
            except KeyError:
                pass
        out[key] = s.offset(struct, paths[-1])

    runtime, interp, tstate = "_PyRuntimeState", "PyInterpreterState", "PyThreadState"
    put("runtime.interpreters_head", runtime, "interpreters.head")
    put("interp.next", interp, "next")
    put("interp.threads_head", interp, "threads.head", "tstate_head")
    put("interp.modules", interp, "imports.modules", "modules")
    if v >= (3, 12):
        put("interp.gil", interp, "ceval.gil")
        put("gil.locked", "struct _gil_runtime_state", "locked")
        put("gil.last_holder", "struct _gil_runtime_state", "last_holder")
    else:
        put("runtime.gil", runtime, "ceval.gil")
        put("gil.locked", "struct _gil_runtime_state", "locked")
        put("gil.last_holder", "struct _gil_runtime_state", "last_holder")
    put("tstate.next", tstate, "next")
    put("tstate.interp", tstate, "interp")
    put("tstate.thread_id", tstate, "thread_id")
    if v >= (3, 11):
        put("tstate.native_thread_id", tstate, "native_thread_id")
    if v >= (3, 13):
        put("tstate.current_frame", tstate, "current_frame")
    elif v >= (3, 11):
        put("tstate.cframe", tstate, "cframe")
        put("cframe.current_frame", "_PyCFrame", "current_frame")
    else:
        put("tstate.frame", tstate, "frame")
        put("frame.back", "struct _frame", "f_back")
        put("frame.code", "struct _frame", "f_code")
        put("frame.lasti", "struct _frame", "f_lasti")
        put("frame.localsplus", "struct _frame", "f_localsplus")
        if v >= (3, 10):
            put("frame.state", "struct _frame", "f_state")
        else:
            put("frame.stacktop", "struct _frame", "f_stacktop")
    if v >= (3, 11):
        iframe = "struct _PyInterpreterFrame"
        put("iframe.code", iframe, "f_executable" if v >= (3, 13) else "f_code")
        put("iframe.previous", iframe, "previous")
        put("iframe.instr", iframe, "instr_ptr" if v >= (3, 13) else "prev_instr")
        put("iframe.owner", iframe, "owner")
        put("iframe.localsplus", iframe, "localsplus")
        if v == (3, 11):
            put("iframe.is_entry", iframe, "is_entry")
        put("gen.iframe", "PyGenObject", "gi_iframe")
        put("gen.frame_state", "PyGenObject", "gi_frame_state")
    code = "PyCodeObject"
    for key, member in (("filename", "co_filename"), ("name", "co_name"), ("firstlineno", "co_firstlineno"),
                        ("argcount", "co_argcount"), ("flags", "co_flags"), ("consts", "co_consts")):
        put(f"code.{key}", code, member)
    put("code.linetable", code, "co_lnotab" if v < (3, 10) else "co_linetable")
    if v >= (3, 11):
        put("code.qualname", code, "co_qualname")
        put("code.code_adaptive", code, "co_code_adaptive")
        put("code.localsplusnames", code, "co_localsplusnames")
        put("code.nlocalsplus", code, "co_nlocalsplus")
    else:
        put("code.code", code, "co_code")
        put("code.varnames", code, "co_varnames")
        put("code.nlocals", code, "co_nlocals")
    put("function.code", "PyFunctionObject", "func_code")
    put("method.function", "PyMethodObject", "im_func")
    put("type.name", "PyTypeObject", "tp_name")
    put("type.basicsize", "PyTypeObject", "tp_basicsize")
    put("type.flags", "PyTypeObject", "tp_flags")
    put("type.dictoffset", "PyTypeObject", "tp_dictoffset")
    put("type.dict", "PyTypeObject", "tp_dict")
    put("type.mro", "PyTypeObject", "tp_mro")
    put("heaptype.cached_keys", "PyHeapTypeObject", "ht_cached_keys")
    put("dict.used", "PyDictObject", "ma_used")
    put("dict.keys", "PyDictObject", "ma_keys")
    put("dict.values", "PyDictObject", "ma_values")
    keys = "struct _dictkeysobject"
    put("keys.nentries", keys, "dk_nentries")
    put("keys.indices", keys, "dk_indices")
    if v >= (3, 11):
        put("keys.log2_size", keys, "dk_log2_size")
        put("keys.log2_index_bytes", keys, "dk_log2_index_bytes")
        put("keys.kind", keys, "dk_kind")
    else:
        put("keys.size", keys, "dk_size")
    put("unicode.length", "PyASCIIObject", "length")
    put("unicode.state", "PyASCIIObject", "state")
    out["unicode.ascii_size"] = s.size("PyASCIIObject")
    out["unicode.compact_size"] = s.size("PyCompactUnicodeObject")
    put("long.size", "struct _longobject", "long_value.lv_tag" if v >= (3, 12) else "ob_base.ob_size")
    put("long.digits", "struct _longobject", "long_value.ob_digit" if v >= (3, 12) else "ob_digit")
    put("var.size", "PyVarObject", "ob_size")
    put("tuple.items", "PyTupleObject", "ob_item")
    put("list.items", "PyListObject", "ob_item")
    put("bytes.data", "PyBytesObject", "ob_sval")
    put("float.value", "PyFloatObject", "ob_fval")
    return out

