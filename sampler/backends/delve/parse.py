"""Everything sampler knows about the text Delve's terminal prints.

Every regular expression over Delve's output lives here, tested against recorded
transcripts (tests/unit/transcripts). Delve's errors become typed errors here and
nowhere else.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Any

from sampler.errors import (
    DebuggerError,
    ExpressionError,
    LocationNotFound,
    ProcessNotFound,
    SamplerError,
    TargetExited,
    UnsupportedTarget,
)
from sampler.sample import Value
from sampler.target import permission

PROMPT = r"\(dlv\) "
AT_PROMPT = r"(?:^|\n)\(dlv\) "
"""Delve's prompt where it really is: first in what dlv printed, or at the start of a line.
dlv prints a string value quoted, its newlines as \\n, so a value holding "(dlv) " (the
target chose it) never starts a line and cannot end a command's output early."""


class ForgedReply(DebuggerError):
    """dlv's answer to a batch held more prompts than commands: a name or value the target
    chose (unquoted in dlv's output) posed as dlv's prompt."""

    hint = ("a name or value in the target posed as dlv's prompt, so its answers cannot be told apart; "
            "the target was resumed and detached; --backend delve-rpc reads dlv's answers as JSON")


ANSWER_END = r"(?:^|\n|(?<=\(dlv\) ))\(dlv\) "
"""Where one command's answer ends in a batch: a prompt at the start of a line, or right
after another prompt (a command that printed nothing, as ``whatis len(x)`` does)."""
_SIGINT_NOTICE = re.compile(r"(?:^|(?<=\n)|(?<=\(dlv\) ))received SIGINT, stopping process \(will not forward signal\)"
                            r"(?:\r?\n|$)")
"""What dlv prints, from its own goroutine, when sampler interrupts it. If the target stopped at
a breakpoint just before the signal came, it lands in the next command's answer, wherever that
is; only a whole line of it is taken out, so no prompt can be made by taking it out."""


def split_answers(text: str, commands: int) -> list[str]:
    """What each of ``commands`` commands printed in a batch's ``text`` (up to sampler's marker).

    Raises ForgedReply unless the text holds exactly one prompt per command and nothing after
    the last one."""
    parts = re.split(ANSWER_END, _SIGINT_NOTICE.sub("", text))
    if len(parts) != commands + 1 or parts[-1].strip():
        raise ForgedReply(f"dlv's answer to {commands} command(s) held {len(parts) - 1} prompts"
                          + (f" and then {parts[-1].strip()[:80]!r}" if parts[-1].strip() else ""))
    return [clean(part) for part in parts[:-1]]


KILL_QUESTION = r"Would you like to kill the process\? \[Y/n\]"
NAME_HINT = ("check the names: at a breakpoint, dlv's 'args' and 'locals' list what is there; "
             "globals are package-qualified (main.ring)")
BREAKPOINT = "sampler"
"""The name sampler gives its breakpoint, so it never touches the user's own."""

_STOP = re.compile(r"^> (?:\[(?P<bp>[^\]]+)\] )?(?P<func>\S+) (?P<file>\S+?):(?P<line>\d+)"
                   r"(?: \(hits goroutine\((?P<goroutine>\d+)\):\d+ total:\d+\))?", re.M)
_STOP_NO_SOURCE = re.compile(r"^Stopped at: (?P<pc>0x[0-9a-f]+)", re.M)  # e.g. in the vDSO
EXITED = r"(?m)^(?:\(dlv\) )*(?:Command failed: )?Process (?P<pid>\d+) has exited with status (?P<status>-?\d+)"
"""dlv's word that the target ended: at the start of a line (after any prompts), so that no
string value, printed quoted, can say it."""
_EXITED = re.compile(EXITED)
GONE = r"(?m)^(?:\(dlv\) )*Command failed: .*no such process\s*$"
"""dlv's answer to any command once the target vanished while halted."""
_GONE = re.compile(GONE)
"""Ends a line of dlv's when the target vanished while halted ('Command failed: ...', or an RPC error)."""
_FAILED = re.compile(r"^Command failed: (?P<message>.*)$", re.M)
_BP_SET = re.compile(r"^Breakpoint \S+ set at (?P<addr>0x[0-9a-f]+)", re.M)
_INT = re.compile(r"^-?\d+$")
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$|^[-+]?(?:Inf|NaN)$")
_NOISE = re.compile(r"^(?:Warning: debugging optimized function|received SIGINT, stopping process.*"
                    r"|=> +\d+:.*|Type 'help' for list of commands\.)$")
NO_CONTEXT = "unable to find function context"
"""dlv's answer to a name it looks up in a thread with no Go frame (the main thread, halted in a
system call at pc 0): it cannot say whether the name exists. A known global reads well there."""
MAIN_GOROUTINE = 1
"""Where a name is looked up again when dlv said NO_CONTEXT: main's goroutine lives as long as
the program and always has a Go frame."""
# Failures that say the expression is wrong for this program, not this moment.
_STATIC = re.compile(r"could not find symbol value for|has no member|^\d+:\d+: |invalid operation|"
                     r"not defined on|mismatched types|cannot (?:convert|use)|undefined|"
                     r"no (?:field|method)|can not|unsupported|is not a (?:struct|pointer|slice|array|map)|"
                     r"invalid argument .* for (?:len|cap)",
                     re.I)


def clean(text: str) -> str:
    """Delve's output with pty line ends made plain and surrounding blank space removed."""
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


@dataclass(frozen=True)
class Stop:
    """Where the target stopped after a continue or a halt."""

    breakpoint: str = ""
    """Name of the breakpoint that was hit ('' when halted, not at a breakpoint)."""
    goroutine: str = ""
    function: str = ""
    file_line: str = ""


def check_exited(text: str, pid: int | None = None) -> None:
    """Raise TargetExited when the output says the target process is gone."""
    match = _EXITED.search(text)
    if match:
        raise TargetExited(f"target process {match.group('pid')} exited with status "
                           f"{match.group('status')}")
    if _GONE.search(text):  # killed while halted: dlv learns it from the next ptrace call
        raise TargetExited(f"the target process{f' {pid}' if pid else ''} is gone (dlv: no such process)")


def failure(text: str) -> str | None:
    """Delve's 'Command failed' message, or None when the command succeeded."""
    match = _FAILED.search(text)
    return match.group("message").strip() if match else None


def parse_stop(text: str) -> Stop:
    """Read the stop location printed after ``continue`` or after a halt."""
    check_exited(text)
    match = _STOP.search(text)
    if not match:
        bare = _STOP_NO_SOURCE.search(text)
        if bare:
            return Stop(function="?", file_line=bare.group("pc"))
        message = failure(text)
        raise DebuggerError(f"dlv did not say where the target stopped: {message or text!r}")
    return Stop(breakpoint=match.group("bp") or "", goroutine=match.group("goroutine") or "",
                function=match.group("func"), file_line=f"{match.group('file')}:{match.group('line')}")


def parse_breakpoint_set(text: str, location: str) -> int:
    """The address of a breakpoint just set; LocationNotFound when Delve refused it."""
    check_exited(text)
    match = _BP_SET.search(text)
    if match:
        return int(match.group("addr"), 16)
    message = failure(text) or text
    raise LocationNotFound(f"dlv cannot break at {location!r}: {message}")


def classify_failure(message: str, expression: str) -> str:
    """Return a failure of this sample as data; raise ExpressionError when it says the
    expression itself is wrong (unknown name, no such field, syntax)."""
    check_exited(message)
    if _STATIC.search(message):
        raise ExpressionError(f"{expression!r}: {message}", NAME_HINT)
    return message


def number(value: str) -> Value:
    """Delve's text of a value, as an int or float when it is one; a string as its text
    (Delve's terminal quotes and escapes it; the ptrace backend and the RPC give it plain)."""
    if _INT.match(value):
        return int(value)
    if _FLOAT.match(value):
        return float(value)
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            text = ast.literal_eval(value)  # Go's escapes (\n, \t, \", \xNN, \u...) are Python's
        except (ValueError, SyntaxError):
            return value
        return text if isinstance(text, str) else value
    return value


_INTERFACE = re.compile(r"^[\w./]+(?: \{\})?\((?P<dynamic>[^()]+)\) (?P<value>.*)$", re.S)
_NIL_INTERFACE = re.compile(r"^[\w./]+(?: \{\})? nil$")
BASIC_KINDS = frozenset(range(1, 17)) | {24}
"""reflect.Kind of bool, the integers, floats, complex numbers and string."""
INTERFACE_KIND = 20


def _basic(text: str) -> bool:
    return bool(_INT.match(text) or _FLOAT.match(text)) or text in ("true", "false") \
        or (len(text) >= 2 and text[0] == text[-1] == '"')


def value(text: str) -> Value:
    """A value printed by Delve's terminal. A Go interface gives what the ptrace backend
    gives: its dynamic value when that is a basic type (``interface {}(int64) 200`` is 200),
    else the dynamic type's name (``main.Shape(*main.Square) *{side: 9}`` is
    ``*main.Square``); a nil one is ``nil``."""
    if _NIL_INTERFACE.match(text):
        return "nil"
    pointer = _POINTER.match(text)
    if pointer is not None:
        return pointer["address"]
    found = _INTERFACE.match(text)
    if found is not None:
        inner = found["value"].strip()
        return number(inner) if _basic(inner) else found["dynamic"]
    return number(text)


POINTER_KINDS = frozenset({22, 26})
"""reflect.Kind of a pointer and of unsafe.Pointer: given as a hex address, as ptrace gives it."""
_POINTER = re.compile(r"^\(\*?[^()]*\)\((?P<address>0x[0-9a-f]+)\)$")
"""How dlv's terminal prints ``&x`` and ``&*p``: ``(*main.Ring)(0xc0000a6000)``."""


def is_pointer_type(whatis: str) -> bool:
    """dlv's ``whatis`` answer names a pointer type (``*main.Ring``, ``unsafe.Pointer``)."""
    first = whatis.strip().splitlines()[0] if whatis.strip() else ""
    return first.startswith("*") or first == "unsafe.Pointer"


def rpc_value(variable: dict[str, Any]) -> Value:
    """A value as Delve's JSON-RPC gives it (api.Variable), by the same rule as ``value``."""
    if variable.get("kind") in POINTER_KINDS:
        try:
            return hex(int(str(variable.get("value") or "0"), 0))
        except ValueError:
            return str(variable.get("value"))
    if variable.get("kind") == INTERFACE_KIND:
        inner = (variable.get("children") or [{}])[0]
        if not inner.get("kind"):
            return "nil"
        if inner.get("kind") in BASIC_KINDS:
            return number(str(inner.get("value") or ""))
        return str(inner.get("type") or "?")
    return number(str(variable.get("value") or variable.get("type") or ""))


def parse_value(text: str, expression: str) -> tuple[Value, str]:
    """(value, '') for a printed value, or (None, error) for a failure of this sample.

    Raises ExpressionError when the failure says the expression itself is wrong
    (unknown name, no such field, syntax), since no later sample can do better.
    """
    check_exited(text)
    message = failure(text)
    if message is not None:
        return None, classify_failure(message, expression)
    lines = [line.strip() for line in text.splitlines() if not _NOISE.match(line.strip())]
    return value(" ".join(line for line in lines if line)), ""


def attach_error(text: str, pid: int) -> SamplerError:
    """The typed error for dlv's output when ``dlv attach`` ended without a prompt."""
    message = clean(text).splitlines()[-1] if clean(text) else "dlv exited without a word"
    lowered = message.lower()
    if "no such process" in lowered:
        return ProcessNotFound(f"no process with PID {pid}")
    if "operation not permitted" in lowered:
        return permission.denied(pid, "trace")
    if "could not open debug info" in lowered or "dwarf" in lowered or "not an executable" in lowered:
        return UnsupportedTarget(f"dlv cannot debug process {pid}: {message}",
                                 "the delve backend needs a Go program with debug info")
    return DebuggerError(f"dlv attach {pid} failed: {message}")
