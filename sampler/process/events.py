"""What each waitpid status of a traced task means (the tracer's event dispatch): a hit on an
armed breakpoint, a signal passed on unchanged, a new thread followed, a forked child cleaned
and let go (children.py) or taken in (--follow-forks), a vfork child traced in the target's
memory, an exec that ends the run.
"""

from __future__ import annotations

import os
import signal
import time

from ptrace.binding import func as ptrace_func  # type: ignore[import-untyped]
from ptrace.error import PtraceError  # type: ignore[import-untyped]

from sampler.errors import ProcessNotFound, TargetExeced, TargetExited
from sampler.process import calls
from sampler.process.children import shares_memory
from sampler.process.tasks import (
    NEW_TASK_EVENTS,
    PTRACE_EVENT_CLONE,
    PTRACE_EVENT_EXEC,
    PTRACE_EVENT_STOP,
    PTRACE_EVENT_VFORK,
    PTRACE_EVENT_VFORK_DONE,
    PTRACE_LISTEN,
    Hit,
    Tasks,
)
from sampler.stop import StopFlag
from sampler.target import procfs

GROUP_STOP_SIGNALS = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}


class Dispatch(Tasks):
    """The tracer's event dispatch: each status waitpid gives for one of its tasks, served."""

    def wait_for_hit(self, deadline: float, stop: StopFlag) -> Hit | None:
        """Serve every event until a thread stops on an armed breakpoint, or until deadline."""
        while True:
            for tid, status in self._events():
                hit = self._handle(tid, status)
                if hit is not None:
                    return hit
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stop.is_set():
                return None
            self._sleep(remaining)

    def serve_until(self, deadline: float, stop: StopFlag) -> None:
        """Between samples: keep passing signals on and following new threads."""
        hit = self.wait_for_hit(deadline, stop)
        if hit is not None:  # a late trap on an armed breakpoint: cannot happen while disarmed
            self.resume(hit)

    def _handle(self, tid: int, status: int) -> Hit | None:
        if self._stepping and tid in self._stepping and self._step_ended(tid, status):
            return None
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            self.threads.discard(tid)
            self.sharing.discard(tid)
            if tid == self.pid:
                self.exit_status = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
                raise TargetExited(f"target process {self.pid} exited with status {self.exit_status}")
            return None
        if not os.WIFSTOPPED(status):
            return None
        sig, event = os.WSTOPSIG(status), status >> 16
        if tid not in self.threads and event == PTRACE_EVENT_STOP and not procfs.is_thread_of(self.pid, tid):
            self._early[tid] = status  # a new process whose parent's fork event is still to come
            return None
        self.threads.add(tid)
        self.stats.stops[tid] = self.stats.stops.get(tid, 0) + 1
        if event in NEW_TASK_EVENTS:
            try:
                self._on_event(tid, status)
            finally:  # the parent goes on, whatever became of its child
                self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif event == PTRACE_EVENT_EXEC:
            self._on_event(tid, status)
        elif event == PTRACE_EVENT_VFORK_DONE:
            try:
                self.probes.vfork_done()
            finally:
                self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif event == PTRACE_EVENT_STOP:
            # a group-stop (someone sent SIGSTOP) stays a stop; a new thread's first stop goes on
            request = PTRACE_LISTEN if sig in GROUP_STOP_SIGNALS else ptrace_func.PTRACE_CONT
            self._request(request, tid, 0, 0)
        elif event:
            self._request(ptrace_func.PTRACE_CONT, tid, 0, 0)
        elif sig == signal.SIGTRAP:
            try:
                registers = calls.get_registers(tid)
            except PtraceError:
                return None  # killed meanwhile (SIGKILL): its exit comes next
            address = registers.rip - 1
            if address in self.armed:
                registers.rip = self.stands_for.get(address, address)  # $rip reads the breakpoint's address
                return Hit(tid, address, registers, self._seen)
            if address in self.originals:  # hit at the same moment as another thread: rewind, go on
                self.resume(Hit(tid, address, registers, 0.0))
            else:
                self._request(ptrace_func.PTRACE_CONT, tid, 0, sig)  # not ours: pass it on
        else:
            self._request(ptrace_func.PTRACE_CONT, tid, 0, sig)  # SIGURG, SIGPROF...: pass it on
        return None

    def _on_event(self, tid: int, status: int) -> bool:
        """What a fork, vfork, clone or exec event of ``tid`` needs; True when ``tid`` may go on."""
        event = status >> 16
        if event in NEW_TASK_EVENTS:
            self._on_new_task(tid, event)
            return True
        if tid in self.sharing:  # a vfork child ran a new program: none of sampler's bytes are in it
            self.sharing.discard(tid)
            self.threads.discard(tid)
            self._request(ptrace_func.PTRACE_DETACH, tid, 0, 0)
            return False
        self._exec_happened()
        return False

    def _on_new_task(self, parent: int, event: int) -> int | None:
        """A thread or process ``parent`` just started (``parent`` is stopped at the event).
        A thread, or a process in the same memory, is traced from now on (returned); a
        process with a copy of the memory is cleaned of the breakpoints and let go (None)."""
        try:
            child = int(ptrace_func.ptrace_geteventmsg(parent))
        except PtraceError:
            return None  # the parent vanished (SIGKILL): its child goes with it
        if event == PTRACE_EVENT_CLONE and procfs.is_thread_of(self.pid, child):
            pass
        elif event == PTRACE_EVENT_VFORK and not self.trace_vfork_children:
            self.probes.suspend()  # its exec must not be a traced one: let it go with no int3 in its way
            early = self._early.pop(child, None)
            self.children.release(child, {}, first_stop_seen=early is not None)
            return None
        elif event == PTRACE_EVENT_VFORK or shares_memory(self.pid, child):  # clone(CLONE_VM|SIGCHLD) is a "fork"
            self.sharing.add(child)
            self.shared_children += 1
        else:
            early = self._early.pop(child, None)
            if self.adopt is None or self._detaching:
                self.children.release(child, self.patches, first_stop_seen=early is not None,
                                      counted=self.probes.semaphores)
            elif self.children.release(child, self.patches, first_stop_seen=early is not None, keep=True,
                                           counted=self.probes.semaphores) \
                    and not self.adopt(child):
                self._request(ptrace_func.PTRACE_DETACH, child, 0, 0)  # not taken in: let go, clean
            return None
        self.threads.add(child)
        early = self._early.pop(child, None)
        if early is not None and self._detaching:  # its first stop came first: it is let go now
            self._request(ptrace_func.PTRACE_DETACH, child, 0, 0)
            self.threads.discard(child)
            self.sharing.discard(child)
            return None
        if early is not None:
            self._handle(child, early)  # its first stop came first: it goes on now
        return child

    def _exec_happened(self) -> None:
        """The target ran a new program: the breakpoints went with the old one. Nothing of
        sampler's may be written into the new program, so they are forgotten, and the run
        ends with one line."""
        self.probes.forget()
        self.threads = set(self.sharing)
        self._request(ptrace_func.PTRACE_DETACH, self.pid, 0, 0)  # stopped at the event: let go now
        try:
            program = procfs.exe_path(self.pid)
        except ProcessNotFound:
            program = "a new program"
        raise TargetExeced(f"target process {self.pid} ran {program} with exec: its breakpoints went with "
                           "the old program")

    def _rewind_if_ours(self, tid: int) -> bool:
        try:
            registers = calls.get_registers(tid)
        except PtraceError:
            return False
        if registers.rip - 1 not in self.originals:
            return False
        registers.rip -= 1
        ptrace_func.ptrace_setregs(tid, registers)
        return True

    def _trap_pending(self, tid: int) -> bool:
        """A thread that ran one of sampler's int3s just as it was interrupted reports the
        interrupt first, its SIGTRAP still pending: detached then, it would die of it."""
        if not procfs.pending_signals(tid if tid in self.sharing else self.pid, tid) >> (signal.SIGTRAP - 1) & 1:
            return False
        try:
            return int(calls.get_registers(tid).rip) - 1 in self.originals
        except PtraceError:
            return False

    def _signal_to_pass(self, tid: int, status: int) -> int:
        """The signal a thread must get on detach: none for our traps and for ptrace's own stops."""
        sig = os.WSTOPSIG(status)
        if status >> 16:
            return 0
        if self._stepping.pop(tid, None) is not None and sig == signal.SIGTRAP:
            return 0  # the end of a step given up on
        if sig == signal.SIGTRAP and self._rewind_if_ours(tid):
            return 0
        return sig
