"""The code of an in-process probe (issue 36): what the jump at a site goes to.

A counting trampoline, at address T:

    lock inc qword [rip + counter]     ; the hit, counted where sampler reads it (the data area)
    <the displaced instructions, moved>
    jmp back                           ; past the displaced bytes

At a function's entry the arithmetic flags are the callee's to clobber (the System V ABI keeps
only the direction flag across a call), so nothing is saved; elsewhere the flags are kept
(pushfq/popfq), below the 128-byte red zone a leaf function may be using. The trampoline touches
no register and nothing of the stack at an entry.
"""

from __future__ import annotations

from sampler.inprocess.relocate import Displaced, Refused

RED_ZONE = 128


def _rel32(source_end: int, target: int) -> bytes:
    offset = target - source_end
    if not -(1 << 31) <= offset < (1 << 31):
        raise Refused(f"{target:#x} is out of a rel32's reach from {source_end:#x}")
    return offset.to_bytes(4, "little", signed=True)


def counting(displaced: Displaced, at: int, counter: int, entry: bool) -> tuple[bytes, int]:
    """The trampoline's bytes for running at ``at``, counting into the 8 bytes at ``counter``; and
    where in it the displaced instructions start (a thread found in them is moved there)."""
    code = bytearray()
    if not entry:
        code += bytes.fromhex("488d642480")  # lea rsp, [rsp - 128]: past the red zone
        code += b"\x9c"  # pushfq
    code += b"\xf0\x48\xff\x05" + _rel32(at + len(code) + 8, counter)  # lock inc qword [rip + counter]
    if not entry:
        code += b"\x9d"  # popfq
        code += bytes.fromhex("488da42480000000")  # lea rsp, [rsp + 128]
    moved_at = len(code)
    code += displaced.code_at(at + moved_at)
    code += b"\xe9" + _rel32(at + len(code) + 5, displaced.back)  # jmp back
    return bytes(code), moved_at


def jump(site: int, target: int) -> bytes:
    """The 5 bytes written at the site: jmp rel32 to the trampoline."""
    return b"\xe9" + _rel32(site + 5, target)
