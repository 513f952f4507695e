"""Every thread of a process, read and unwound: what `sampler stack` prints and a profile counts.

Each thread is read as briefly as it can be (process/snapshot.py: asleep in a system call,
without stopping it; else stopped for its registers and one read of its stack) and unwound after it
runs again, from the copy of its stack (unwind/walk.py). With ``consistent``, every thread that may
be stopped is stopped at once, all are read, then all are let go: one moment for the whole process.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field

from sampler.debuginfo.debugfiles import DebugFinder
from sampler.debuginfo.dies import Malformed
from sampler.debuginfo.elffile import BadFile
from sampler.debuginfo.modules import Modules
from sampler.errors import ProcessNotFound, UnsupportedTarget
from sampler.process.reads import UnreadableMemory
from sampler.process.snapshot import Image, Snapshots
from sampler.python.interpreter import Interpreter, NotPython, PyThread
from sampler.python.objects import Unreadable
from sampler.target import procfs
from sampler.target.threads import Thread, thread_of
from sampler.unwind import goroutines
from sampler.unwind.code import CodeMap
from sampler.unwind.frames import Stack
from sampler.unwind.goroutines import Goroutine
from sampler.unwind.walk import MAX_DEPTH, RIP, RSP, unwind

HELD, NONBLOCKING, OFF = "held", "nonblocking", "off"
"""Reader's ways of reading a CPython's Python frames."""


@dataclass
class ThreadStack:
    thread: Thread
    stack: Stack | None
    """None: not read (``how`` says why)."""
    how: str
    """"stopped for N us", "not stopped (asleep in a system call)", or why it was not read."""
    stopped_us: float | None = None
    current_g: int | None = None
    """Go: the goroutine it ran when it was stopped (its TLS slot), None when it was not stopped."""
    python: PyThread | None = None
    """CPython: the thread's Python frames, its name in `threading`, whether it holds the GIL."""


@dataclass
class ProcessStacks:
    pid: int
    name: str
    threads: list[ThreadStack] = field(default_factory=list)
    goroutines: list[Goroutine] | None = None
    notes: list[str] = field(default_factory=list)
    took_s: float = 0.0
    python: str | None = None
    """CPython's version ("3.11") when the process runs one."""
    python_unmatched: list[PyThread] = field(default_factory=list)
    """Python threads whose kernel thread could not be told (3.8-3.10 without glibc's layout)."""


class Reader:
    """One process: its modules and code, opened once, and its threads read as often as asked
    (a profile reads them at every tick)."""

    def __init__(self, pid: int, debug_dirs: tuple[str, ...] = (), interrupt_waits: bool = False,
                 python: str = HELD) -> None:
        self.pid = pid
        self.notes: list[str] = []
        self.python = python
        """How a CPython's Python frames are read: HELD (its running threads held meanwhile), NONBLOCKING
        (nothing stopped: a running thread's frames may be torn, and its native stack is not read),
        or OFF."""
        self._interpreter: Interpreter | None = None
        self._interpreter_tried = python == OFF
        self.native = True
        """False: a thread that runs Python is not unwound natively (its Python frames are what is shown;
        the native DWARF of a CPython with its debug file takes seconds to read)."""
        self.python_unmatched: list[PyThread] = []
        self.modules = Modules(pid, DebugFinder(pid, debug_dirs, lambda _: None, self.notes.append))
        try:
            self.snapshots = Snapshots(pid)
        except BaseException:
            self.modules.close()
            raise
        try:
            self.snapshots.go = self._is_go()
            self.snapshots.interrupt_waits = interrupt_waits
            self.code = self._code_map()
        except BaseException:
            self.close()
            raise
        self._goroutines: goroutines.Reader | None = None
        self._refreshed = time.monotonic()
        self.remember = False
        """A profile's: a thread that slept since it was last read has its stack of then (not read again)."""
        self._asleep: dict[int, tuple[bytes, ThreadStack]] = {}

    def _code_map(self) -> CodeMap:
        by_path = {module.path: module for module in self.modules.everything()}
        ranges = [(m.start, m.end, by_path.get(m.path), m.path) for m in self.snapshots.maps if m.executable]
        return CodeMap(ranges, self.snapshots.read)

    def close(self) -> None:
        try:
            self.snapshots.close()
        finally:
            self.modules.close()

    def refresh(self) -> None:
        """The process's mappings again (a library loaded since, a thread's new stack)."""
        self.snapshots.maps = procfs.maps(self.pid)
        self.modules.refresh()
        self.code = self._code_map()
        self._refreshed = time.monotonic()

    def _refresh_if_new(self, images: list[Image]) -> None:
        """A thread's pc in no code known, or its stack in no mapping known (a library loaded or a
        thread started since they were read): the mappings again, once a second at most."""
        if time.monotonic() - self._refreshed < REFRESH_S:
            return
        unknown = any((RIP in image.registers and self.code.at(image.registers[RIP]) is None)
                      or (RSP in image.registers and not image.stack) for image in images)
        if unknown:
            self.refresh()

    def read(self, tids: list[int], consistent: bool = False, max_depth: int = MAX_DEPTH,
             with_goroutines: bool = False, kernel: bool = True
             ) -> tuple[list[ThreadStack], list[Goroutine] | None, str | None]:
        """The threads (those still there), each as the kernel shows it the moment before it is
        read, and a Go program's goroutines (with a note when they cannot all be read). With
        ``consistent`` every thread that may be stopped stays stopped until all are read (and the
        goroutines' structures), then all are let go and unwound."""
        images: dict[int, tuple[Image | None, str]] = {}
        reused: dict[int, ThreadStack] = {}
        threads = []
        snapshot: tuple[list[tuple[int, bytes]], bool] | None = None
        py_threads: dict[int, PyThread] = {}
        try:
            for tid in tids:
                thread = thread_of(self.pid, tid, kernel)
                if thread is None:
                    continue
                known = self._asleep.get(tid) if self.remember else None
                if known is not None and not consistent and self.snapshots.quiet(tid) == known[0]:
                    reused[tid] = known[1]  # asleep since it was last read: the same stack
                else:
                    images[tid] = self._image(thread, hold=consistent)
                threads.append(thread)
            to_stop = [tid for tid, (image, how) in images.items() if image is None and how == STOP]
            held = self.python == HELD and self.interpreter() is not None  # held while their Python is read
            stop = self.snapshots.hold_many if held else self.snapshots.stopped_many
            for tid, taken in stop(to_stop).items():  # all interrupted at once
                images[tid] = (None, f"not read: {taken.problem}") if taken.problem else (taken, _held(taken))
            if consistent and with_goroutines:
                snapshot = self._goroutine_snapshot()
            if held:
                py_threads = self._python_threads(tids, [t.tid for t in threads])
        finally:
            self.snapshots.release_all()
        if self.python == NONBLOCKING and self.interpreter() is not None:
            py_threads = self._python_threads(tids, [t.tid for t in threads])
        if self.remember:  # threads gone since: forgotten
            self._asleep = {tid: known for tid, known in self._asleep.items() if tid in images or tid in reused}
        self._refresh_if_new([image for image, _ in images.values() if image is not None])
        found = []
        for thread in threads:
            if thread.tid in reused:
                found.append(dataclasses.replace(reused[thread.tid], thread=thread))
                continue
            image, how = images[thread.tid]
            if image is None:
                found.append(ThreadStack(thread, None, how))
                continue
            if image.stopped and (consistent or self.python == HELD):
                how = _held(image)  # (its hold known now that it was let go)
            if not self.native and thread.tid in py_threads and py_threads[thread.tid].frames:
                found.append(ThreadStack(thread, None, how, image.stopped_us))  # its Python frames are its stack
                continue
            stack = self._unwind(image, max_depth)
            if stack.short_of_registers and not image.stopped and not consistent \
                    and self.snapshots.must_not_stop(thread.tid) is None:
                again = self.snapshots.stopped(thread.tid)  # its stack needs the registers it keeps
                if again.problem is None:
                    image, how = again, _held(again)
                    stack = self._unwind(image, max_depth)
            if stack.short_of_registers and not image.stopped and stack.ended:
                why = self.snapshots.must_not_stop(thread.tid)
                stack.ended += f" (the thread was read without stopping it: {why or 'it woke meanwhile'}" + \
                    ("; --interrupt-waits stops it for the rest)" if why and why.startswith("asleep in") else ")")
            found.append(ThreadStack(thread, stack, how, image.stopped_us, image.current_g))
            if self.remember and image.quiet is not None and not stack.short_of_registers:
                self._asleep[thread.tid] = (image.quiet, found[-1])
        for i, each in enumerate(found):
            if each.thread.tid in py_threads:
                found[i] = dataclasses.replace(each, python=py_threads.pop(each.thread.tid))
                known = self._asleep.get(each.thread.tid)
                if known is not None and known[1] is each:  # (a profile's sleeper keeps its Python frames too)
                    self._asleep[each.thread.tid] = (known[0], found[i])
        gs, note = self.goroutines(found, max_depth, snapshot) if with_goroutines else (None, None)
        return found, gs, note

    def interpreter(self) -> Interpreter | None:
        """The process's CPython, opened at the first read; None when it runs none (or one sampler
        does not read: said once in the notes)."""
        if not self._interpreter_tried:
            self._interpreter_tried = True
            try:
                self._interpreter = Interpreter(self.modules, self.snapshots.read_data)
            except NotPython:
                pass
            except UnsupportedTarget as e:
                self.notes.append(f"Python frames not read: {e}")
        return self._interpreter

    def _python_threads(self, tids: list[int], wanted: list[int]) -> dict[int, PyThread]:
        """The Python threads on ``wanted`` by kernel thread id (those not told apart: python_unmatched)."""
        interpreter = self.interpreter()
        if interpreter is None:
            return {}
        try:
            every = set(procfs.tasks(self.pid))
            threads = interpreter.threads(every, None if set(wanted) >= every else {*wanted, None})
        except Unreadable as e:
            self.notes.append(f"Python frames not read: {e}")
            return {}
        self.python_unmatched = [t for t in threads if t.tid is None]
        return {t.tid: t for t in threads if t.tid is not None}

    def _image(self, thread: Thread, hold: bool = False) -> tuple[Image | None, str]:
        if thread.state == "Z":
            return None, "a zombie: it has no stack"
        if hold and thread.state in ("S", "D") and self.snapshots.must_not_stop(thread.tid) is None:
            image = self.snapshots.hold(thread.tid)  # --consistent: a sleeper held too, where that is safe
            return (None, f"not read: {image.problem}") if image.problem else (image, "stopped")
        asleep = self.snapshots.asleep(thread.tid)
        if asleep is not None:
            reason = self.snapshots.must_not_stop(thread.tid)
            return asleep, f"not stopped ({reason or 'asleep in a system call'})"
        reason = self.snapshots.must_not_stop(thread.tid)
        if reason is not None:
            return None, f"not read: {reason}, and it woke while it was read"
        if self.python == NONBLOCKING and self.interpreter() is not None:
            return None, "not read: it runs, and --nonblocking stops no thread (its Python frames are read as it runs)"
        if not hold:
            return None, STOP  # (stopped with the others: stopped_many)
        image = self.snapshots.hold(thread.tid)
        if image.problem is not None:
            return None, f"not read: {image.problem}"
        return image, _held(image)

    def warm(self) -> None:
        """Read what naming and unwinding the stacks of now will need (each module's symbols, unwind
        and line tables), with nothing stopped: the threads asleep in a system call, read as they are."""
        for tid in procfs.tasks(self.pid):
            image = self.snapshots.asleep(tid)
            if image is not None:
                self._unwind(image, MAX_DEPTH)
        for start, _, module, _ in self.code.ranges:
            if module is not None:
                self.code.at(start)

    def goroutine_reader(self) -> tuple[goroutines.Reader | None, str | None]:
        """The program's goroutine reader, made once; (None, why) when it cannot be."""
        if not self.snapshots.go:
            return None, None
        if self._goroutines is None:
            debug = self.modules.main.debug(remote=False)
            if debug is None:
                return None, "goroutines: not read, the program has no DWARF (runtime.g's layout)"
            try:
                self._goroutines = goroutines.Reader(debug, self._address_of, self.snapshots.read)
            except (ValueError, UnreadableMemory, Malformed) as e:
                return None, f"goroutines: not read ({e})"
        return self._goroutines, None

    def _goroutine_snapshot(self) -> tuple[list[tuple[int, bytes]], bool] | None:
        """Every goroutine's g as its bytes now (--consistent reads them while every thread is held)."""
        reader, _ = self.goroutine_reader()
        if reader is None:
            return None
        try:
            return reader.snapshot()
        except UnreadableMemory:
            return None

    def goroutines(self, stacks: list[ThreadStack], max_depth: int,
                   snapshot: tuple[list[tuple[int, bytes]], bool] | None = None
                   ) -> tuple[list[Goroutine] | None, str | None]:
        """The goroutines of a Go program, with the stacks of the threads running them; (None, why)
        when the program is no Go program or they cannot be read."""
        reader, why = self.goroutine_reader()
        if reader is None:
            return None, why
        running = {found.current_g: (found.thread.tid, found.stack) for found in stacks
                   if found.stack is not None and found.current_g}
        try:
            if snapshot is not None:
                found, complete = reader.goroutines(self.code, running, max_depth, snapshot[0], snapshot[1])
            else:
                found, complete = reader.goroutines(self.code, running, max_depth)
        except UnreadableMemory as e:
            return None, f"goroutines: not read ({e})"
        note = None if complete else f"goroutines: only the first {len(found)} were read (at most " \
            f"{goroutines.MAX_GOROUTINES}, in {goroutines.TIME_BUDGET_S:g} s)"
        return found, note

    def _is_go(self) -> bool:
        try:
            return self.modules.main.file.go_table() is not None
        except BadFile:
            return False

    def _address_of(self, name: str) -> int | None:
        symbol = self.modules.main.object_symbol(name)
        return symbol.address + self.modules.main.bias if symbol is not None else None

    def _unwind(self, image: Image, max_depth: int) -> Stack:
        def read(address: int, size: int) -> bytes:
            copied = image.read(address, size)
            if copied is not None:
                return copied
            return self.snapshots.read(address, size)

        return unwind(image.registers, self.code, read, max_depth)


REFRESH_S = 1.0
"""The mappings are read again at most this often (a profile's ticks)."""
STOP = "to be stopped"
"""_image's word for a thread it leaves for stopped_many."""
NICE = -10
"""sampler's own priority while it reads threads (as root): a thread it stopped waits for sampler
to get a CPU, and on a busy host that took tens of milliseconds a thread (10 busy threads on 2 CPUs:
6.4 s for the whole command at nice 0, 1.2 s at -10)."""


@contextmanager
def first_in_line() -> Iterator[None]:
    """Run at NICE while the block reads (root only; otherwise as it is)."""
    try:
        before = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, 0, min(before, NICE))
    except OSError:
        yield
        return
    try:
        yield
    finally:
        with suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, before)


def _held(image: Image) -> str:
    held = f"stopped for {image.stopped_us:.0f} us" if image.stopped_us is not None else "stopped"
    if image.restarted:
        held += f" (its {image.restarted}, which the stop ended, was made again as it went on)"
    return held


def collect(pid: int, consistent: bool = False, max_depth: int = MAX_DEPTH,
            debug_dirs: tuple[str, ...] = (), interrupt_waits: bool = False, python: str = HELD,
            native: bool = True) -> ProcessStacks:
    """Every thread of ``pid``, with its user stack; ProcessNotFound when it is not there (or is
    a zombie), UnsupportedTarget for a kernel thread."""
    started = time.monotonic()
    check_process(pid)
    name = procfs.comm(pid)
    tids = sorted(procfs.tasks(pid))
    reader = Reader(pid, debug_dirs, interrupt_waits, python)
    reader.native = native
    try:
        reader.interpreter()  # (its symbols read before any thread is held)
        if consistent:  # what the unwinding needs read before any thread is held
            reader.warm()
            reader.goroutine_reader()
        threads, gs, note = reader.read(tids, consistent, max_depth, with_goroutines=True)
    finally:
        reader.close()
    result = ProcessStacks(pid, name, threads, gs)
    result.notes = reader.notes + ([note] if note else [])
    interpreter = reader.interpreter()
    if interpreter is not None:
        result.python = interpreter.version_text
        result.python_unmatched = reader.python_unmatched
    if not alive(pid):
        result.notes.append(f"the process exited while it was read: {sum(t.stack is not None for t in threads)} "
                            f"of its {len(tids)} threads were read")
    result.took_s = time.monotonic() - started
    return result


def alive(pid: int) -> bool:
    """The process has a thread that is not a zombie (its first thread may have ended alone:
    pthread_exit in main)."""
    if procfs.thread_state(pid, pid) not in ("", "Z", "X"):
        return True
    try:
        tids = procfs.tasks(pid)
    except ProcessNotFound:
        return False
    return any(procfs.thread_state(pid, tid) not in ("", "Z", "X") for tid in tids)


def check_process(pid: int) -> None:
    """A process with user stacks: not a zombie, not a kernel thread (one line each)."""
    state = procfs.state(pid)
    if state in ("Z", "X") and alive(pid):
        raise UnsupportedTarget(f"the first thread of process {pid} has ended and its others run on (pthread_exit "
                                "in main): sampler reads a process through its first thread", "not read")
    if state in ("Z", "X"):
        parent = procfs.group_and_parent(pid)[1] if state == "Z" else 0
        whose = f" (PID {parent})" if parent else ""
        raise ProcessNotFound(f"process {pid} is a zombie: it exited, and its parent{whose} has not reaped it; "
                              "it has no stack", "look at its parent")
    if procfs.is_kernel_thread(pid):
        raise UnsupportedTarget(f"PID {pid} ({procfs.comm(pid)}) is a kernel thread: it has no user stack",
                                f"its kernel stack is /proc/{pid}/stack")


__all__ = ["ProcessStacks", "Reader", "ThreadStack", "UnreadableMemory", "collect"]
