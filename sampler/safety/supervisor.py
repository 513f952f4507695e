"""sampler runs as two processes, so that killing sampler never kills the target.

The process the user started (and may kill with SIGKILL) only waits; the worker it
forks does the attaching, sampling and writing. However the front process ends,
the kernel then sends the worker SIGTERM (PR_SET_PDEATHSIG), and the worker ends
the run as Ctrl-C does: it finishes the sample in hand, restores every byte, lets
every thread go and detaches. A SIGKILL of the tracing worker itself (the OOM
killer, a kill of the whole process group) is what the guardian is for.

SIGINT, SIGTERM and SIGHUP sent to the front process are passed on to the worker;
the front exits with the worker's exit code. The front asks the OOM killer to take
it first (oom_score_adj 1000, set after the fork: the worker keeps its own), so
that memory pressure ends a run cleanly rather than by killing the tracer.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15
PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


EXIT_WAIT_S = 0.5
"""How long the front waits for a worker that said its exit code to be gone."""


def _let_go_of_stdio() -> None:
    """stdin, stdout and stderr onto /dev/null (the worker is done with them)."""
    try:
        null = os.open(os.devnull, os.O_RDWR)
    except OSError:
        return
    for fd in (0, 1, 2):
        try:
            os.dup2(null, fd)
        except OSError:
            pass
    os.close(null)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def name_process(name: bytes) -> None:
    """Set the name ps shows for this process (up to 15 bytes)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_NAME, name, 0, 0, 0)


_held: list[int] = []


def _hold(signum: int, _frame: object) -> None:
    _held.append(signum)


def release_signals() -> None:
    """In the worker: SIGINT raises KeyboardInterrupt and SIGTERM/SIGHUP end the process again;
    one that came since the fork is a KeyboardInterrupt now (the run ends before it touched
    the target, in one line). ``work`` calls it where it handles KeyboardInterrupt."""
    for other in PASSED_ON[1:]:
        signal.signal(other, signal.SIG_DFL)
    if _held:  # nothing is touched yet: any of them ends the run as a Ctrl-C before sampling does
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # (the front passes the same Ctrl-C on: once is enough)
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, _interrupt_once)


def _interrupt_once(signum: int, _frame: object) -> None:
    """A Ctrl-C from a terminal reaches the worker twice: from the terminal (its process group)
    and passed on by the front. The first is the KeyboardInterrupt; the second, a moment later,
    must not raise another while the first one's line is being said (exit 70, seen in
    test_ctrl_c): SIGINT is ignored from then on (the run is ending)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


IN_WORKER = False
"""True in the forked worker: its tracer ends with the run (the kernel lets go, at the tracer's
exit, a thread that detach left asleep in a system call: tracer.py)."""


def run_in_worker(work: Callable[[], int], targets: Sequence[int], guarded: bool = True) -> int:
    """Run ``work`` (sampling the processes ``targets``) in a forked worker; return its exit code (in the front).
    In the worker, SIGINT, SIGTERM and SIGHUP are held (recorded, not acted on) until ``work``
    calls :func:`release_signals`: a Ctrl-C passed on at once can then never land between the
    fork and the guard that turns it into one line."""
    front = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    # held from the fork until the front passes them on: a Ctrl-C in between reaches the worker
    unblocked = signal.pthread_sigmask(signal.SIG_BLOCK, PASSED_ON)
    said, says = os.pipe2(os.O_CLOEXEC)  # the worker's exit code, said before it exits
    worker = os.fork()
    if worker == 0:
        global IN_WORKER
        IN_WORKER = True
        code = 70
        os.close(said)
        os.register_at_fork(after_in_child=lambda: _close(says))  # the guardian says nothing here
        try:
            for signum in PASSED_ON:  # kept until work() calls release_signals() inside its own guard
                signal.signal(signum, _hold)
            signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
            name_process(b"sampler-worker")  # what ps and TracerPid show
            if os.getppid() != front:  # the front died before the line above
                os.kill(os.getpid(), signal.SIGTERM)
            code = work()
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                try:
                    _let_go_of_stdio()  # a thread left waiting on memory (guard.py) keeps the process
                    os.write(says, bytes([code & 0xFF]))  # and its files: not a pipe's reader waiting
                finally:
                    os._exit(code)

    try:  # under memory pressure the OOM killer takes the front first: the worker then leaves cleanly
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass

    def pass_on(signum: int, _frame: object) -> None:
        try:
            os.kill(worker, signum)
        except ProcessLookupError:
            pass

    for signum in PASSED_ON:
        signal.signal(signum, pass_on)
    signal.pthread_sigmask(signal.SIG_SETMASK, unblocked)
    os.close(says)
    told = os.read(said, 1)  # retried by Python when a signal interrupts it
    os.close(said)
    if told:  # it ended its run: its exit follows at once, unless a thread of it waits on memory
        deadline = time.monotonic() + EXIT_WAIT_S  # that never answers (guard.py): then it is left to init
        while os.waitpid(worker, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        return told[0]
    _, status = os.waitpid(worker, 0)  # retried by Python when a signal interrupts it
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    name = signal.Signals(-code).name
    where = f"PID {targets[0]}" if len(targets) == 1 else "every process of the run"
    then = f"its guardian puts back what it left in {where}; to check" if guarded else "no guardian: run"
    command = f"--pid {targets[0]}" if len(targets) == 1 else "--all"
    print(f"sampler: the sampling process (PID {worker}) was killed by {name}; {then}: sampler repair {command}",
          file=sys.stderr, flush=True)
    return 128 - code
