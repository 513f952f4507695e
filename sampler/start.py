"""The command's first lines: a Ctrl-C while Python is still loading sampler (0.2 s, more on a
busy host) ends it with the same one line as a Ctrl-C before the attach, never a traceback.
This module imports nothing of sampler's until it is inside the guard, and before it imports
anything at all it takes SIGINT itself (``_signal``: built in, already loaded), so that a Ctrl-C
while the standard library loads (``signal`` builds its enums, 5-10 ms) is kept for the one line,
not a traceback. What comes before this module's first line is Python's own (the interpreter's
start-up, ``site``, ``runpy`` for ``python -m``: 30-60 ms here): a Ctrl-C there ends the process
by SIGINT, or with Python's traceback once Python took SIGINT; sampler has touched nothing then."""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # the C module signal wraps: no stubs

_early: list[int] = []
_signal.signal(_signal.SIGINT, lambda signum, _frame: _early.append(signum))

import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402

INTERRUPTED = "sampler: interrupted before sampling started; the target was not touched"


def main() -> int:
    try:
        from sampler.safety import unpacked

        refusal = unpacked.check()  # the single file, as root, where another user could swap its libraries
        if refusal:
            print(refusal, file=sys.stderr, flush=True)
            return 2
        from sampler import cli

        signal.signal(signal.SIGINT, signal.default_int_handler)
        if _early:  # a Ctrl-C while sampler loaded
            raise KeyboardInterrupt
        code = cli.main()
    except KeyboardInterrupt:
        print(INTERRUPTED, file=sys.stderr, flush=True)
        code = 130
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run is over: a late Ctrl-C changes nothing
    return code


def entry() -> None:
    code = main()
    if code == 130:
        # CPython (3.11) ends with SIGINT, not 130, once a KeyboardInterrupt passed through an
        # exec() (dataclasses and namedtuple build their methods so while sampler loads), even
        # a caught one: nothing is left to clean up here, so leave with the code as it is
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)
