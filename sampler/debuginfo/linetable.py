"""One unit's line table (.debug_line), read directly: the file and line of an address.

pyelftools decodes a line program through construct and a state object copied for each
row, about 10 us a row: a Rust std unit has 45,000 rows, and one ``sampler stack`` of a
small Rust program spent 4 s there. This decodes the same rows with plain loops over the
bytes (DWARF versions 2 to 5, 32- and 64-bit) and keeps only what names a place: each row's
address, file and line. dwarf.py's Debug.line_at keeps one Table a unit.

The bytes are the target's: every length and offset is checked against them before use,
the header's tables and the rows are capped, and whatever is wrong raises Malformed (one
message saying where), never another error.
"""

from __future__ import annotations

import bisect
import posixpath
import struct
from dataclasses import dataclass
from typing import Union

from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.leb128 import sleb128, uleb128

MAX_ROWS = 2_000_000
"""Rows of one unit decoded (the largest units seen have 45,000: Rust's std); more is refused."""
MAX_ENTRIES = 100_000
"""Directories, or files, in one header (libc's units name a few dozen, Go's a few hundred)."""
MAX_PATH = 4096
"""Bytes of one directory or file name (Linux's PATH_MAX)."""
MAX_TEXT = 16 << 20
"""Bytes of names one header may hold, counting each file's path joined to its directory (a few
KiB in real units): 100,000 files in a directory of 4 KiB would be 400 MB."""

END = -1
"""The file index of a sequence's end: no line from that address on (until the next row)."""
Value = Union[int, bytes, None]

# DW_FORM_* of the v5 header's directory and file entries
_STRING, _LINE_STRP, _STRP = 0x08, 0x1F, 0x0E
_UDATA, _SDATA, _DATA1, _DATA2, _DATA4, _DATA8, _DATA16 = 0x0F, 0x0D, 0x0B, 0x05, 0x06, 0x07, 0x1E
_BLOCK, _BLOCK1, _BLOCK2, _BLOCK4, _FLAG = 0x09, 0x0A, 0x03, 0x04, 0x0C
_FIXED = {_DATA1: 1, _DATA2: 2, _DATA4: 4, _DATA8: 8, _DATA16: 16, _FLAG: 1}
# DW_LNCT_*
_PATH, _DIRECTORY_INDEX = 1, 2


@dataclass(frozen=True)
class Header:
    """What a unit's line program header says, as far as names and the decoding need."""

    version: int
    start: int
    """Where the program's opcodes start in the section (after header_length)."""
    end: int
    """Where the unit ends in the section (after unit_length)."""
    minimum_instruction_length: int
    maximum_operations_per_instruction: int
    line_base: int
    line_range: int
    opcode_base: int
    standard_opcode_lengths: bytes
    """Operands (ULEB128 each) of standard opcodes 1 .. opcode_base - 1."""
    names: dict[int, str]
    """Paths by the index the program's DW_LNS_set_file uses, as dies.file_names gives them
    (the directory joined; from 1 before DWARF 5, from 0 in it)."""


@dataclass(frozen=True)
class Table:
    """A unit's line table: its rows sorted by address (rows of one address in the program's
    order), in three lists of one length (a tuple a row would cost 50 bytes more each)."""

    addresses: list[int]
    files: list[int]
    """Each row's file index; END at a sequence's end."""
    lines: list[int]
    """Each row's line (0 at a sequence's end)."""
    names: dict[int, str]
    """Paths by file index, the header's (DW_LNE_define_file, which no compiler writes, is ignored)."""
    prologue_ends: frozenset[int] = frozenset()
    """The addresses of the rows marked prologue_end (where a function's breakpoint goes)."""

    def __len__(self) -> int:
        return len(self.addresses)

    def row(self, address: int) -> tuple[int, int] | None:
        """(file index, line) of the last row at or below ``address``; None before the first
        row, or from a sequence's end to the next row."""
        index = bisect.bisect_right(self.addresses, address) - 1
        if index < 0 or self.files[index] == END:
            return None
        return self.files[index], self.lines[index]

    def place(self, address: int) -> tuple[str, int] | None:
        """FILE, LINE of ``address``, as row() (FILE "" for an index the header does not name)."""
        index = bisect.bisect_right(self.addresses, address) - 1
        if index < 0 or self.files[index] == END:
            return None
        return self.names.get(self.files[index], ""), self.lines[index]


class _Cursor:
    """Reads a header's fields, each checked against where the header ends, and its paths, each
    charged to the header's budget of MAX_TEXT bytes."""

    def __init__(self, data: bytes, at: int, end: int) -> None:
        self.data, self.at, self.end = data, at, end
        self.text_left = MAX_TEXT

    def take(self, size: int) -> int:
        at = self.at
        if size < 0 or at + size > self.end:
            raise Malformed(f"a line table header is cut short at {at:#x} (needs {size} bytes more)")
        self.at = at + size
        return at

    def unsigned(self, size: int) -> int:
        at = self.take(size)
        return int.from_bytes(self.data[at:at + size], "little")

    def uleb(self) -> int:
        try:
            value, after = uleb128(self.data, self.at)
        except (IndexError, ValueError):
            raise Malformed(f"a line table header has a bad number at {self.at:#x}") from None
        self.take(after - self.at)
        return value

    def sleb(self) -> int:
        try:
            value, after = sleb128(self.data, self.at)
        except (IndexError, ValueError):
            raise Malformed(f"a line table header has a bad number at {self.at:#x}") from None
        self.take(after - self.at)
        return value

    def string(self) -> bytes:
        at = self.at
        nul = self.data.find(b"\0", at, min(self.end, at + MAX_PATH + 1))
        if nul < 0:
            raise Malformed(f"a line table header's string at {at:#x} runs past the header or {MAX_PATH} bytes")
        self.at = nul + 1
        return self.data[at:nul]

    def charge(self, size: int) -> None:
        self.text_left -= size
        if self.text_left < 0:
            raise Malformed(f"a line table header at {self.at:#x} names more than {MAX_TEXT} bytes of paths")

    def text(self, path: str) -> str:
        """``path``, charged to the budget."""
        self.charge(len(path))
        return path


def _string_at(section: bytes, offset: int, name: str) -> bytes:
    if not 0 <= offset < len(section):
        raise Malformed(f"a line table names a string at {offset:#x}, past {name} ({len(section)} bytes)")
    nul = section.find(b"\0", offset, offset + MAX_PATH + 1)
    if nul < 0:
        raise Malformed(f"a line table's string at {offset:#x} of {name} runs past its end or {MAX_PATH} bytes")
    return section[offset:nul]


def _text(name: bytes) -> str:
    return name.decode("utf-8", "replace")


def read_header(data: bytes, offset: int, line_strings: bytes = b"", strings: bytes = b"") -> Header:
    """The header of the line program at ``offset`` in .debug_line (``data``, the whole
    section: a unit's DW_AT_stmt_list is an offset into it). ``line_strings`` and ``strings``:
    .debug_line_str and .debug_str, where DWARF 5's names may be (DW_FORM_line_strp, strp)."""
    if not 0 <= offset <= len(data) - 4:
        raise Malformed(f"a line table at {offset:#x} is past .debug_line ({len(data)} bytes)")
    (length,) = struct.unpack_from("<I", data, offset)
    at, offset_size = offset + 4, 4
    if length == 0xFFFFFFFF:  # 64-bit DWARF
        if at + 8 > len(data):
            raise Malformed(f"a line table's length at {offset:#x} is cut short")
        (length,) = struct.unpack_from("<Q", data, at)
        at, offset_size = at + 8, 8
    elif length >= 0xFFFFFFF0:
        raise Malformed(f"a line table at {offset:#x} has the reserved length {length:#x}")
    end = at + length
    if end > len(data):
        raise Malformed(f"a line table at {offset:#x} claims {length} bytes, past .debug_line")
    cursor = _Cursor(data, at, end)
    version = cursor.unsigned(2)
    if not 2 <= version <= 5:
        raise Malformed(f"a line table at {offset:#x} has version {version}")
    if version >= 5:
        cursor.unsigned(2)  # address_size, segment_selector_size: set_address's length says
    header_length = cursor.unsigned(offset_size)
    start = cursor.at + header_length
    if start > end:
        raise Malformed(f"a line table at {offset:#x} has a header of {header_length} bytes, past its end")
    cursor.end = start
    minimum_instruction_length = cursor.unsigned(1)
    maximum_operations = cursor.unsigned(1) if version >= 4 else 1
    cursor.unsigned(1)  # default_is_stmt
    line_base = cursor.unsigned(1)
    line_base -= (line_base & 0x80) << 1
    line_range, opcode_base = cursor.unsigned(1), cursor.unsigned(1)
    if maximum_operations == 0 or line_range == 0 or opcode_base == 0:
        raise Malformed(f"a line table at {offset:#x} has a zero maximum_operations_per_instruction, "
                        "line_range or opcode_base")
    lengths_at = cursor.take(opcode_base - 1)
    standard_opcode_lengths = data[lengths_at:lengths_at + opcode_base - 1]
    names: dict[int, str] = {}
    if version >= 5:  # tables of entries in the forms the header gives; files and directories from 0
        directories = [cursor.text(_text(path)) for path, _ in _entries(cursor, offset_size, line_strings, strings)]
        for index, (path, directory) in enumerate(_entries(cursor, offset_size, line_strings, strings)):
            within = directories[directory] if directory < len(directories) else ""
            names[index] = cursor.text(posixpath.join(within, _text(path)))
    else:  # strings, and the files' (name, directory, time, size); files from 1, directories from 1
        directories = []
        while True:
            path = cursor.string()
            if not path:
                break
            if len(directories) >= MAX_ENTRIES:
                raise Malformed(f"a line table at {offset:#x} names more than {MAX_ENTRIES} directories")
            directories.append(cursor.text(_text(path)))
        while True:
            path = cursor.string()
            if not path:
                break
            directory = cursor.uleb()
            cursor.uleb()  # modification time
            cursor.uleb()  # size
            if len(names) >= MAX_ENTRIES:
                raise Malformed(f"a line table at {offset:#x} names more than {MAX_ENTRIES} files")
            # directory 0 is the unit's own: left out, as dies.file_names leaves it
            within = directories[directory - 1] if 0 < directory <= len(directories) else ""
            names[len(names) + 1] = cursor.text(posixpath.join(within, _text(path)))
    return Header(version, start, end, minimum_instruction_length, maximum_operations, line_base, line_range,
                  opcode_base, standard_opcode_lengths, names)


def _entries(cursor: _Cursor, offset_size: int, line_strings: bytes, strings: bytes) -> list[tuple[bytes, int]]:
    """DWARF 5's directory or file entries: their format, then each entry's (path, directory index)."""
    formats = [(cursor.uleb(), cursor.uleb()) for _ in range(cursor.unsigned(1))]
    count = cursor.uleb()
    if count > MAX_ENTRIES:
        raise Malformed(f"a line table header at {cursor.at:#x} claims {count} entries")
    entries = []
    for _ in range(count):
        path, directory = b"", 0
        for content, form in formats:
            value = _value(cursor, form, offset_size)
            if content == _PATH:
                if form == _LINE_STRP and isinstance(value, int):
                    path = _string_at(line_strings, value, ".debug_line_str")
                elif form == _STRP and isinstance(value, int):
                    path = _string_at(strings, value, ".debug_str")
                elif isinstance(value, bytes):
                    path = value
                else:
                    raise Malformed(f"a line table header names a path in form {form:#x} at {cursor.at:#x}")
                cursor.charge(len(path))  # (and again as text: the budget bounds both)
            elif content == _DIRECTORY_INDEX:
                if not isinstance(value, int):
                    raise Malformed(f"a line table header gives a directory in form {form:#x} at {cursor.at:#x}")
                directory = value
        entries.append((path, directory))
    return entries


def _value(cursor: _Cursor, form: int, offset_size: int) -> Value:
    """One field of an entry: an int, a string's bytes (DW_FORM_string), None for what is skipped
    (data16: an MD5; blocks). A string form's offset is returned as an int."""
    if form == _STRING:
        return cursor.string()
    if form in (_LINE_STRP, _STRP):
        return cursor.unsigned(offset_size)
    if form == _UDATA:
        return cursor.uleb()
    if form == _SDATA:
        return cursor.sleb()
    size = _FIXED.get(form)
    if size is not None:
        value = cursor.unsigned(size)
        return None if form == _DATA16 else value
    if form == _BLOCK:
        cursor.take(cursor.uleb())
        return None
    if form in (_BLOCK1, _BLOCK2, _BLOCK4):
        cursor.take(cursor.unsigned({_BLOCK1: 1, _BLOCK2: 2, _BLOCK4: 4}[form]))
        return None
    raise Malformed(f"a line table header has an entry in form {form:#x}, which sampler does not read")


def decode(data: bytes, offset: int, line_strings: bytes = b"", strings: bytes = b"",
           max_rows: int = MAX_ROWS) -> Table:
    """The line table of the unit whose program is at ``offset`` in .debug_line (``data``):
    the rows of all its sequences, sorted by address. ``line_strings``, ``strings``: as for
    read_header. More than ``max_rows`` rows: Malformed."""
    header = read_header(data, offset, line_strings, strings)
    prologue_ends: set[int] = set()
    try:
        addresses, files, lines = _run(data[header.start:header.end], header, max_rows, prologue_ends)
    except (IndexError, ValueError):
        raise Malformed(f"the line program at {offset:#x} is cut short or has a bad number") from None
    if sorted(addresses) != addresses:  # sequences out of address order (or a set_address back)
        order = sorted(range(len(addresses)), key=addresses.__getitem__)  # (stable: a row of the same
        addresses = [addresses[i] for i in order]  # address stays after those before it)
        files = [files[i] for i in order]
        lines = [lines[i] for i in order]
    return Table(addresses, files, lines, header.names, frozenset(prologue_ends))


def _run(program: bytes, header: Header, max_rows: int, prologue_ends: set[int] | None = None
         ) -> tuple[list[int], list[int], list[int]]:
    """The rows of the program's bytes, in their order (``prologue_ends``: the addresses of those marked
    prologue_end, added to). A read past the bytes raises IndexError (``program`` is the unit's program
    alone), a number too long ValueError: decode says which unit."""
    marked = prologue_ends if prologue_ends is not None else set()
    prologue = False
    opcode_base, line_range = header.opcode_base, header.line_range
    minimum_length, maximum_operations = header.minimum_instruction_length, header.maximum_operations_per_instruction
    lengths = header.standard_opcode_lengths
    vliw = maximum_operations != 1
    # each special opcode's operation advance and line advance, by opcode (0 below opcode_base)
    operations = [max(op - opcode_base, 0) // line_range for op in range(256)]
    address_steps = [minimum_length * advance for advance in operations]
    line_steps = [header.line_base + (op - opcode_base) % line_range if op >= opcode_base else 0 for op in range(256)]
    const_operations = operations[255]

    addresses: list[int] = []
    files: list[int] = []
    lines: list[int] = []
    add_address, add_file, add_line = addresses.append, files.append, lines.append
    address, op_index, file, line = 0, 0, 1, 1
    at, end = 0, len(program)
    while at < end:
        # A row takes one byte at least: this stretch cannot add more rows than the cap has room
        # for (one more at most, from an opcode that starts in it), and the loop needs no count.
        stop = min(end, at + max(1, max_rows - len(addresses)))
        while at < stop:
            op = program[at]
            at += 1
            if op >= opcode_base:  # special opcode: most rows
                if vliw:
                    total = op_index + operations[op]
                    address += minimum_length * (total // maximum_operations)
                    op_index = total % maximum_operations
                else:
                    address += address_steps[op]
                line += line_steps[op]
                add_address(address)
                add_file(file)
                add_line(line)
                if prologue:
                    marked.add(address)
                    prologue = False
            elif op == 5:  # DW_LNS_set_column (the opcodes in the order of how often Rust's std has them)
                while program[at] & 0x80:
                    at += 1
                at += 1
            elif op == 4:  # DW_LNS_set_file (one or two bytes read here, longer numbers by uleb128)
                file = program[at]
                if file < 0x80:
                    at += 1
                elif program[at + 1] < 0x80:
                    file = (file & 0x7F) | program[at + 1] << 7
                    at += 2
                else:
                    file, at = uleb128(program, at)
            elif op == 3:  # DW_LNS_advance_line
                value = program[at]
                if value < 0x80:
                    line += value - 0x80 if value & 0x40 else value
                    at += 1
                elif program[at + 1] < 0x80:
                    value = (value & 0x7F) | program[at + 1] << 7
                    line += value - 0x4000 if value & 0x2000 else value
                    at += 2
                else:
                    value, at = sleb128(program, at)
                    line += value
            elif op == 6:  # DW_LNS_negate_stmt: a flag no place needs
                pass
            elif op == 1:  # DW_LNS_copy
                add_address(address)
                add_file(file)
                add_line(line)
                if prologue:
                    marked.add(address)
                    prologue = False
            elif op == 2:  # DW_LNS_advance_pc
                value = program[at]
                if value < 0x80:
                    at += 1
                elif program[at + 1] < 0x80:
                    value = (value & 0x7F) | program[at + 1] << 7
                    at += 2
                else:
                    value, at = uleb128(program, at)
                if vliw:
                    total = op_index + value
                    address += minimum_length * (total // maximum_operations)
                    op_index = total % maximum_operations
                else:
                    address += minimum_length * value
            elif op == 10:  # DW_LNS_set_prologue_end: the next row's
                prologue = True
            elif op == 7 or op == 11:  # basic_block, epilogue_begin: flags no place needs
                pass
            elif op == 8:  # DW_LNS_const_add_pc: special opcode 255's address advance
                if vliw:
                    total = op_index + const_operations
                    address += minimum_length * (total // maximum_operations)
                    op_index = total % maximum_operations
                else:
                    address += address_steps[255]
            elif op == 9:  # DW_LNS_fixed_advance_pc: a uhalf
                address += program[at] | program[at + 1] << 8
                op_index = 0
                at += 2
            elif op == 0:  # extended opcode: its length, then the opcode and its operands
                size = program[at]
                if size < 0x80:
                    at += 1
                else:
                    size, at = uleb128(program, at)
                after = at + size
                if size == 0 or after > end:
                    raise Malformed(f"an extended opcode of {size} bytes at {at:#x} into a line program "
                                    f"of {end} bytes")
                extended = program[at]
                if extended == 1:  # DW_LNE_end_sequence: a row, then the registers start again
                    add_address(address)
                    add_file(END)
                    add_line(0)
                    address, op_index, file, line = 0, 0, 1, 1
                    prologue = False
                elif extended == 2:  # DW_LNE_set_address, as many bytes as its length says
                    if not 1 < size <= 9:
                        raise Malformed(f"a set_address of {size - 1} bytes at {at:#x} into a line program")
                    address = int.from_bytes(program[at + 1:after], "little")
                    op_index = 0
                at = after  # (define_file, set_discriminator, the vendors' opcodes: nothing a place needs)
            elif op == 12:  # DW_LNS_set_isa
                _, at = uleb128(program, at)
            else:  # an opcode of a later standard: skip its operands, as the header counts them
                for _ in range(lengths[op - 1]):
                    _, at = uleb128(program, at)
        if len(addresses) > max_rows:
            raise Malformed(f"a line program has more than {max_rows} rows")
    return addresses, files, lines

