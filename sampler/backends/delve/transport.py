"""The wire to Delve's terminal client: a pty, a prompt, SIGINT. No parsing of meaning here."""

from __future__ import annotations

import os
import re
import secrets
import signal

import pexpect

from sampler import writes
from sampler.backends.delve import parse
from sampler.backends.delve.drive import CALL_TIMEOUT_S
from sampler.backends.delve.leave import after_dlv_killed
from sampler.backends.delve.rescue import DlvRescue, rescue_terminal
from sampler.errors import DebuggerError, TargetExited
from sampler.target import procfs

ATTACH_TIMEOUT_S = 60.0
POLL_FLOOR_S = 0.002


class DelveTerminal:
    """One ``dlv attach PID`` session on a pty."""

    def __init__(self, dlv: str, pid: int) -> None:
        self.dlv = dlv
        self.pid = pid
        self._child: pexpect.spawn[str] | None = None
        self.left = False
        """dlv quit and let the target go."""

    @property
    def alive(self) -> bool:
        # not pexpect's isalive(): once dlv's pty gave EOF, it waits for dlv's exit without a limit
        return self._child is not None and self._child.pid is not None and procfs.is_running(self._child.pid)

    def rescue(self) -> DlvRescue:
        """What a guardian (a fork: it keeps the pty open) does with this dlv if sampler dies."""
        child = self._require()
        dlv, fd = child.pid, child.child_fd
        if dlv is None:
            raise DebuggerError("dlv is gone")
        return DlvRescue(self.pid, dlv, lambda: rescue_terminal(dlv, fd))

    def start(self) -> None:
        """Run ``dlv attach``; return at its first prompt (target halted), or raise."""
        env = dict(os.environ, TERM="dumb")  # plain line input: no line editor, no escapes
        log = os.environ.get("SAMPLER_DELVE_LOG")
        # a transcript of everything dlv printed, for debugging and for tests: opened (or refused) before
        # dlv starts, so that a refusal leaves no dlv attached
        transcript = os.fdopen(writes.open_append(log, "SAMPLER_DELVE_LOG"), "a", encoding="utf-8") if log else None
        try:
            child = pexpect.spawn(self.dlv, ["attach", str(self.pid)], env=env, echo=False,
                                  encoding="utf-8", codec_errors="replace", timeout=ATTACH_TIMEOUT_S,
                                  dimensions=(50, 1000))
        except pexpect.ExceptionPexpect as e:
            if transcript is not None:
                transcript.close()
            raise DebuggerError(f"cannot start {self.dlv}: {e}") from None
        # pexpect sleeps 50 ms before every send by default: that would keep the
        # target stopped 250 ms per sample instead of about 10 ms.
        child.delaybeforesend = None
        if transcript is not None:
            child.logfile_read = transcript  # (a file that lives with dlv)
        self._child = child
        index = child.expect([parse.AT_PROMPT, pexpect.EOF, pexpect.TIMEOUT])
        if index != 0:
            text = child.before or ""
            self.left = index == 1  # dlv gave up and exited: it left nothing in the target
            self.close()
            if index == 2:
                raise DebuggerError(f"dlv attach {self.pid} gave no prompt within {ATTACH_TIMEOUT_S:.0f}s")
            raise parse.attach_error(text, self.pid)

    def send(self, command: str) -> None:
        """Write a command line without waiting for its answer."""
        try:
            self._require().sendline(command)
        except OSError as e:
            raise DebuggerError(f"lost dlv while sending {command!r}: {e}") from None

    def wait(self, timeout: float) -> str | None:
        """Output up to the next prompt, or None if no prompt came within ``timeout``."""
        child = self._require()
        # pexpect gives up before reading anything when the timeout is 0
        timeout = max(timeout, POLL_FLOOR_S)
        index = child.expect([parse.AT_PROMPT, pexpect.EOF, pexpect.TIMEOUT], timeout=timeout)
        if index == 2:
            return None
        text = parse.clean(child.before or "")
        if index == 1:
            parse.check_exited(text)
            raise DebuggerError(f"dlv ended unexpectedly: {text.splitlines()[-1] if text else 'no output'}")
        return text

    def batch(self, commands: list[str], then_continue: bool, timeout: float = CALL_TIMEOUT_S) -> list[str]:
        """Send ``commands`` (then ``continue``) in one write; return what each printed.

        What dlv prints can hold text the target chose unquoted (a function or type name
        from its DWARF); one holding a newline and "(dlv) " would look like a prompt and
        shift every answer after it. So the batch ends with ``print "<nonce>"``, a string
        no target can guess: everything before it is this batch's output, and it must
        hold exactly one prompt per command, else it is refused (ForgedReply)."""
        marker = f'"sampler-{secrets.token_hex(8)}"'
        self.send("\n".join([*commands, f"print {marker}", *(["continue"] if then_continue else [])]))
        child = self._require()
        # dlv cannot print once the target is gone: it says so instead
        index = child.expect([re.escape(marker), parse.EXITED, parse.GONE, pexpect.EOF, pexpect.TIMEOUT],
                             timeout=max(timeout, POLL_FLOOR_S))
        if index == 4:
            if not procfs.is_running(self.pid):
                raise TargetExited(f"target process {self.pid} exited")
            raise DebuggerError(f"dlv did not answer {commands[0] if commands else 'print'!r} within {timeout:g}s")
        text = child.before or ""
        if index in (1, 2):
            parse.check_exited(str(child.after), self.pid)
            raise TargetExited(f"target process {self.pid} exited")
        if index == 3:
            parse.check_exited(parse.clean(text))
            raise DebuggerError(f"dlv ended unexpectedly: {parse.clean(text).splitlines()[-1:] or 'no output'}")
        # the prompt dlv prints after the nonce: nothing the target chose comes in between
        if child.expect([parse.AT_PROMPT, pexpect.EOF, pexpect.TIMEOUT], timeout=max(timeout, POLL_FLOOR_S)) != 0:
            raise DebuggerError("dlv gave no prompt after sampler's marker")
        return parse.split_answers(text, len(commands))

    def drain(self, timeout: float = CALL_TIMEOUT_S) -> None:
        """Read and drop everything dlv printed so far (at its prompt, target halted)."""
        self.batch([], then_continue=False, timeout=timeout)

    def run(self, command: str, timeout: float = CALL_TIMEOUT_S) -> str:
        """Send a command and return what it printed before the next prompt."""
        self.send(command)
        text = self.wait(timeout)
        if text is None:
            raise DebuggerError(f"dlv did not answer {command!r} within {timeout:.0f}s")
        return text

    def interrupt(self) -> None:
        """Ask dlv to halt the running target (what Ctrl-C at its terminal does)."""
        child = self._require()
        if child.pid is None:
            raise DebuggerError("dlv is gone")
        try:
            os.kill(child.pid, signal.SIGINT)
        except ProcessLookupError:
            raise DebuggerError("dlv is gone") from None

    def quit_leaving_target(self, timeout: float = CALL_TIMEOUT_S) -> None:
        """Quit dlv, answering its 'kill the process?' question with no (detach only)."""
        child = self._require()
        try:
            self.drain(timeout)  # nothing the target printed before can pose as the question below
        except TargetExited:
            pass  # dlv has nothing to let go: it quits without a question
        self.send("quit")
        index = child.expect([parse.KILL_QUESTION, pexpect.EOF, pexpect.TIMEOUT], timeout=timeout)
        if index == 0:
            child.sendline("n")
            index = 1 + child.expect([pexpect.EOF, pexpect.TIMEOUT], timeout=timeout)
        if index != 1:
            raise DebuggerError("dlv did not quit")
        self.left = True

    def close(self) -> None:
        """Make sure dlv is gone (after a quit it already is); if it ended without
        quitting (it died, or is killed here), undo what it left in the target."""
        child, self._child = self._child, None
        if child is None:
            return
        if self.left and child.pid is not None and not procfs.ends_within(child.pid, CALL_TIMEOUT_S):
            self.left = False  # dlv said it let the target go but hangs: kill it and check
        # pexpect waits for dlv's exit without a limit once the pty gave EOF; this wait is
        # bounded: it sends SIGHUP, then SIGKILL
        child.flag_eof = False
        try:
            child.close(force=True)
        except pexpect.ExceptionPexpect:
            pass
        if not self.left:
            after_dlv_killed(self.pid)

    def _require(self) -> pexpect.spawn[str]:
        if self._child is None:
            raise DebuggerError("dlv is not running")
        return self._child
