"""pyloop: the breakpoint sample in twenty lines of Python (ctypes), for bench/stall.py to
hold sampler against: what a Python tracer costs before any of sampler's own work.

Every 1/HZ s: int3 through /proc/PID/mem, waitpid for the trap, PTRACE_GETREGS, 16 bytes
at the address in REG (process_vm_readv), the byte back, rip rewound, PTRACE_CONT. Every thread is
PTRACE_SEIZEd; other stops are passed on. Prints "value=W" per sample (the first word
read), then "samples=N median_pause_us=X".

    python3 bench/limit/pyloop.py PID ADDR(hex) REG COUNT HZ
"""

from __future__ import annotations

import ctypes
import os
import statistics
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
libc.ptrace.restype = ctypes.c_long
SEIZE, INTERRUPT, GETREGS, SETREGS, CONT, DETACH = 0x4206, 0x4207, 12, 13, 7, 17
WALL = 0x40000000


REGISTERS = ("r15", "r14", "r13", "r12", "rbp", "rbx", "r11", "r10", "r9", "r8", "rax", "rcx", "rdx", "rsi",
             "rdi", "orig_rax", "rip", "cs", "eflags", "rsp", "ss", "fs_base", "gs_base", "ds", "es", "fs", "gs")


class Regs(ctypes.Structure):
    _fields_ = [(name, ctypes.c_ulonglong) for name in REGISTERS]


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def main() -> None:
    pid, address, register = int(sys.argv[1]), int(sys.argv[2], 16), sys.argv[3]
    count, hz = int(sys.argv[4]), float(sys.argv[5])
    threads = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    for tid in threads:
        libc.ptrace(SEIZE, tid, None, None)
    mem = os.open(f"/proc/{pid}/mem", os.O_RDWR)
    original = os.pread(mem, 1, address)
    regs, buf = Regs(), ctypes.create_string_buffer(16)
    local, remote = IoVec(ctypes.addressof(buf), 16), IoVec(0, 16)
    pauses, words = [], []
    for _ in range(count):
        time.sleep(1 / hz)
        os.pwrite(mem, b"\xcc", address)
        while True:
            tid, status = os.waitpid(-1, WALL)
            if os.WIFSTOPPED(status) and status >> 16 == 0 and os.WSTOPSIG(status) == 5:
                libc.ptrace(GETREGS, tid, None, ctypes.byref(regs))
                if regs.rip - 1 == address:
                    break
            if os.WIFSTOPPED(status):
                sig = os.WSTOPSIG(status) if status >> 16 == 0 and os.WSTOPSIG(status) != 5 else 0
                libc.ptrace(CONT, tid, None, sig)
        seen = time.monotonic()
        remote.base = getattr(regs, register)
        libc.process_vm_readv(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        os.pwrite(mem, original, address)
        regs.rip -= 1
        libc.ptrace(SETREGS, tid, None, ctypes.byref(regs))
        pauses.append((time.monotonic() - seen) * 1e6)
        libc.ptrace(CONT, tid, None, None)
        words.append(int.from_bytes(buf.raw[:8], "little"))
    for tid in threads:
        libc.ptrace(INTERRUPT, tid, None, None)
        os.waitpid(tid, WALL)
        libc.ptrace(DETACH, tid, None, None)
    for word in words:
        print(f"value={word}")
    print(f"samples={len(pauses)} median_pause_us={statistics.median(pauses):.1f}")


if __name__ == "__main__":
    main()
