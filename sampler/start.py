"""The command's first lines: a Ctrl-C while Python is still loading sampler (0.2 s, more on a
busy host) ends it with the same one line as a Ctrl-C before the attach, never a traceback.
This module imports nothing of sampler's until it is inside the guard."""

from __future__ import annotations

import os
import signal
import sys

INTERRUPTED = "sampler: interrupted before sampling started; the target was not touched"


def main() -> int:
    try:
        from sampler.safety import unpacked

        refusal = unpacked.check()  # the single file, as root, where another user could swap its libraries
        if refusal:
            print(refusal, file=sys.stderr, flush=True)
            return 2
        from sampler import cli

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
