"""Row files: CSV (header once sampling starts, one row per sample) and JSON Lines (one
object per sample, numbers as numbers); each row written whole and at once, by the file's
own thread (outlet.py): a reader that stops reading never holds the sampling loop."""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import stat
import sys
from collections.abc import Sequence

from sampler import writes
from sampler.errors import OutputError, OutputLost
from sampler.output import RowByRow, outlet
from sampler.sample import Sample, columns, record, row


class OutFile:
    """--out, opened first: a bad one is refused before the program is read or dlv started."""

    def __init__(self, path: str) -> None:
        """Open ``path`` ('-' for stdout); raise OutputError if it cannot be written."""
        self.path = path
        self.own = path != "-"
        self.link_ok = writes.link_ok(path)
        self.folder = -1  # the folder of --out, opened once: the file is made in it, never by path again
        self.name = path
        if self.own and not self.link_ok:
            self.folder, self.name = writes.open_folder(path), os.path.basename(path)
        self.created = self.own and not self.exists()
        try:
            self.fd = self.open(truncate=False) if self.own else sys.stdout.fileno()
        except OutputError:
            if self.folder >= 0:
                os.close(self.folder)
            raise

    def close(self, begun: bool = False) -> None:
        """Closed; unless rows began (``begun``), as it was: one it made is removed (the run ended
        before sampling, even before its writer was made)."""
        if self.own and self.fd >= 0:
            fd, self.fd = self.fd, -1
            with contextlib.suppress(OSError):
                os.close(fd)
            if self.created and not begun:
                with contextlib.suppress(OSError):
                    os.unlink(self.name, dir_fd=self.folder if self.folder >= 0 else None)
        if self.folder >= 0:
            folder, self.folder = self.folder, -1
            os.close(folder)

    def open(self, truncate: bool) -> int:
        """The file at --out, never through a link or into a file someone else planted: a new
        one is created exclusively (O_EXCL) with the umask's mode; an existing one is opened
        with O_CREAT (so the kernel's protected_regular and protected_fifos apply in sticky
        folders), without following a link, and kept only when it is the user's own (or a
        character device such as /dev/null). Links: only /dev/stdout, /dev/stderr, /dev/fd/N
        and /proc/self/fd/N. A FIFO without a reader is refused, never waited for."""
        link_ok = self.link_ok
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NONBLOCK | (0 if link_ok else os.O_NOFOLLOW)
        folder = self.folder if self.folder >= 0 else None
        try:
            if truncate or not self.exists():
                fd = os.open(self.name, flags | os.O_EXCL, 0o666, dir_fd=folder)
            else:
                fd = os.open(self.name, flags, 0o666, dir_fd=folder)
            os.set_blocking(fd, True)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise OutputError(f"--out {self.path} is a symbolic link: sampler does not write through one",
                                  "give the path of the file itself") from None
            if e.errno == errno.EEXIST:
                made = "again by someone else while sampling" if truncate else "by someone else just now"
                raise (OutputLost if truncate else OutputError)(
                    f"--out {self.path} was made {made}: sampler does not write into a file it did not create",
                    "keep --out in a folder only you can write") from None
            if e.errno == errno.ENXIO:
                raise OutputError(f"--out {self.path} is a FIFO that no one reads", "start its reader first") from None
            raise OutputError(f"cannot write --out {self.path}: {e.strerror}") from None
        info = os.fstat(fd)
        if not stat.S_ISCHR(info.st_mode) and info.st_uid != os.geteuid() and not link_ok:
            os.close(fd)
            raise OutputError(f"--out {self.path} belongs to uid {info.st_uid}, not to sampler's user "
                              f"(uid {os.geteuid()}): sampler does not write into another's file",
                              "remove it, or give a path of your own")
        return fd

    def exists(self) -> bool:
        try:
            os.stat(self.name, dir_fd=self.folder if self.folder >= 0 else None, follow_symlinks=False)
        except FileNotFoundError:
            return False
        except OSError:
            return True  # (the open says what is wrong)
        return True


class CsvWriter(RowByRow):
    """Rows go out whole or not at all: each row is one write, and when a write fails
    (disk full) the file is cut back to the last whole row before the error is raised.
    A file removed while sampler runs is created anew (exclusively: never a file or link
    someone else put there), with the header, and said once.

    The file is opened (OutFile: so a bad --out is refused) before the program is read, but
    left as it was until sampling starts: a run that never starts leaves an existing file
    unchanged and removes one it created. The writer is made once the backend said its columns.
    """

    def __init__(self, out: OutFile | str, names: Sequence[str]) -> None:
        """Rows into ``out`` (opened already, or a path to open now: OutputError when it cannot
        be written), under a header of ``names`` (the backend's columns)."""
        self.file = out if isinstance(out, OutFile) else OutFile(out)
        self.path = self.file.path
        self._header = columns(names)
        self._good = 0  # bytes of whole rows in the file
        self._begun = False  # the header went out: later failures are mid-run
        shared = None if self.file.own else outlet.stdout()  # --out -: in order with the rest of stdout
        self._shared = shared is not None
        self.outlet = shared or outlet.register(outlet.Outlet(self.path if self.file.own else "stdout", self._sink,
                                                              self._sink_many))
        self._lines = _Lines()

    def begin(self) -> None:
        """Sampling starts: empty the file and write the header."""
        if self.file.own:
            try:
                if stat.S_ISREG(os.fstat(self.file.fd).st_mode):  # not /dev/null, a FIFO...
                    os.ftruncate(self.file.fd, 0)
            except OSError as e:
                raise OutputError(f"cannot write --out {self.path}: {e.strerror}") from None
        else:
            sys.stdout.flush()
        self._begun = True
        self._put(("header", 0, _csv_line(self._header) if self._header_line else b""))

    _header_line = True

    def write(self, sample: Sample) -> None:
        self._put(("row", sample.seq, self._encode(sample)))

    def _put(self, item: tuple[str, int, bytes]) -> None:
        try:
            self.outlet.put(item[2] if self._shared else item)
        except OSError as e:  # the shared stdout's thread could not write
            raise OutputLost(f"cannot write --out {self.path}: {e.strerror or e}") from None

    def _sink(self, item: tuple[str, int, bytes]) -> None:
        """In the outlet's thread: one row (or the header, or the close) written whole."""
        kind, seq, data = item
        if kind == "close":
            self._close_now()
            return
        if kind == "row" and self.file.own and self._removed():
            old, self.file.fd = self.file.fd, self.file.open(truncate=True)
            os.close(old)
            self._good = 0
            self._emit_header()
            print(f"sampler: --out {self.path} was removed while sampling: writing a new one from sample "
                  f"{seq}", file=sys.stderr, flush=True)
        if data:
            self._emit(data)

    def _sink_many(self, items: list[tuple[str, int, bytes]]) -> None:
        """In the outlet's thread: the rows queued so far in one write (each row whole or not at
        all still: a failed write cuts the file back to the last whole row)."""
        rows: list[bytes] = []
        for item in items:
            if item[0] == "row" and not (not rows and self.file.own and self._removed()):
                if item[2]:
                    rows.append(item[2])
                continue
            if rows:
                self._emit_rows(rows)
                rows = []
            self._sink(item)
        if rows:
            self._emit_rows(rows)

    def _emit_rows(self, rows: list[bytes]) -> None:
        data = b"".join(rows)
        written = 0
        try:
            while written < len(data):
                written += os.write(self.file.fd, data[written:])
        except OSError as e:  # disk full, file system gone, stdout closed
            whole = 0
            for row in rows:
                if whole + len(row) > written:
                    break
                whole += len(row)
            if self.file.own and written > whole:
                try:  # no half row: cut back to the last whole one
                    os.ftruncate(self.file.fd, self._good + whole)
                except OSError:
                    pass
            self._good += whole
            problem = f"cannot write --out {self.path}: {e.strerror or e}"
            raise (OutputLost(problem) if self._begun else OutputError(problem)) from None
        self._good += len(data)

    def _removed(self) -> bool:
        try:
            return os.fstat(self.file.fd).st_nlink == 0
        except OSError:
            return False

    def _emit_header(self) -> None:
        self._emit(_csv_line(self._header))

    def _encode(self, sample: Sample) -> bytes:
        return self._lines.line(row(sample))

    def _emit(self, data: bytes) -> None:
        try:
            written = 0
            while written < len(data):
                written += os.write(self.file.fd, data[written:])
        except OSError as e:  # disk full, file system gone, stdout closed
            if self.file.own and written:
                try:  # no half row: cut back to the last whole one
                    os.ftruncate(self.file.fd, self._good)
                except OSError:
                    pass
            problem = f"cannot write --out {self.path}: {e.strerror or e}"
            raise (OutputLost(problem) if self._begun else OutputError(problem)) from None
        self._good += len(data)

    def close(self) -> None:
        """The file is closed once every row queued before is written (outlet.settle waits for it)."""
        if self._shared:
            return
        self.outlet.put(("close", 0, b""))

    def _close_now(self) -> None:
        self.file.close(begun=self._begun)


class JsonLinesWriter(CsvWriter):
    """The same fields as the CSV, one JSON object per line, numbers as numbers, no header."""

    _header_line = False

    def _emit_header(self) -> None:
        pass

    def _encode(self, sample: Sample) -> bytes:
        return (json.dumps(record(sample, self._header), separators=(",", ":")) + "\n").encode("utf-8")


class _Lines:
    """CSV lines made by one csv.writer into one buffer (a writer and a buffer made for each row
    were a tenth of a trace's time): for one thread."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\n")

    def line(self, fields: Sequence[object]) -> bytes:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow(fields)
        return self._buffer.getvalue().encode("utf-8")


def _csv_line(fields: Sequence[object]) -> bytes:
    line = io.StringIO()
    csv.writer(line, lineterminator="\n").writerow(fields)
    return line.getvalue().encode("utf-8")


FORMATS = {"csv": CsvWriter, "jsonl": JsonLinesWriter}


def writer_for(out: OutFile, names: Sequence[str], format_name: str | None) -> CsvWriter:
    """The writer of --format, or of --out's suffix (.jsonl, .ndjson), else CSV."""
    if format_name is None:
        format_name = "jsonl" if out.path.lower().endswith((".jsonl", ".ndjson")) else "csv"
    return FORMATS[format_name](out, names)
