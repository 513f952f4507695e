"""probed.py under a seccomp filter that allows every system call (Seccomp: 2 in /proc/PID/status): an
in-process probe's system call could be refused or kill such a process, so sampler puts int3s."""
import ctypes
import os
import runpy
import struct

PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
ALLOW = struct.pack("<HBBI", 0x06, 0, 0, 0x7FFF0000)  # BPF_RET | BPF_K, SECCOMP_RET_ALLOW
libc = ctypes.CDLL(None, use_errno=True)
program = ctypes.create_string_buffer(ALLOW)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


fprog = SockFprog(1, ctypes.addressof(program))
assert libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0, ctypes.get_errno()
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) == 0, ctypes.get_errno()
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "probed.py"), run_name="__main__")
