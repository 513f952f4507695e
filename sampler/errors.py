"""Every error sampler reports to its user. Each one says what to do about it.

The CLI prints ``sampler: <message>`` on one line and exits with ``exit_code``;
no traceback reaches the user for any of these.
"""

from __future__ import annotations


class SamplerError(Exception):
    """Root of sampler's errors: a message and what the user can do about it."""

    exit_code = 1
    hint = ""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if hint is not None:
            self.hint = hint

    def __str__(self) -> str:
        return f"{self.message}: {self.hint}" if self.hint else self.message


class UsageError(SamplerError):
    """The command line itself is wrong."""

    exit_code = 2


class ProbeRefused(UsageError):
    """--probe inprocess, and a site cannot take an in-process probe: the answer of the whole run (in a run of
    many processes too, where the others would be refused alike)."""


class ExpressionError(UsageError):
    """An --expr is malformed, unsafe, or names something that does not exist."""

    hint = "fix the --expr (sampler only reads: no calls, no assignment)"


class OutputError(UsageError):
    """The --out file cannot be written."""

    hint = "choose a path in a writable directory, or --out - for stdout"


class OutputLost(SamplerError):
    """Writing a row failed mid-run (disk full, file system gone, stdout closed)."""

    hint = "free space or choose another --out; every row written before is whole"


class ProcessNotFound(UsageError):
    """No process has that PID."""

    hint = "check the PID with 'ps' or 'pgrep'"


class AlreadyTraced(UsageError):
    """Another debugger or tracer is attached to the target."""

    hint = "detach the other tracer first (a process can have one tracer only)"


class PermissionDenied(UsageError):
    """The kernel does not let sampler trace the process."""

    hint = "run as root or with CAP_SYS_PTRACE, and check /proc/sys/kernel/yama/ptrace_scope"


class UnsupportedTarget(UsageError):
    """The chosen backend cannot debug this program."""

    hint = "use a backend that supports the program, or rebuild it with debug info"


class LocationNotFound(UsageError):
    """--at names a function or line that the program does not have."""

    hint = "check the name with 'go tool nm' or 'nm', or use FILE:LINE on a line with a statement"


class BackendUnavailable(UsageError):
    """The debugger a backend needs is not installed."""

    hint = "install it (Debian: apt-get install delve) or choose another --backend"


class DebuggerError(SamplerError):
    """The debugger did something sampler did not expect (crashed, hung, odd output)."""

    hint = "the target was resumed and detached where possible; rerun, and report this if it repeats"


class TargetExited(SamplerError):
    """The target process ended while sampler was attached."""

    hint = "the samples taken before it exited are kept in the output"


class TargetExeced(SamplerError):
    """The target ran a new program (exec) while sampler was attached."""

    hint = "sample the new program with a new run"


class JournalError(UsageError):
    """The journal of patched bytes cannot be written, or is not to be trusted."""

    hint = "remove it, or set SAMPLER_JOURNAL_DIR to a folder of your own (mode 0700)"


class UntrustedJournal(JournalError):
    """A journal folder or file that someone else owns or may write: sampler will not act on it."""
