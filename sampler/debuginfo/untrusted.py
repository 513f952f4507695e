"""Reading input sampler does not control (ELF files, DWARF, debug files), often as root:
whatever a parser raises on bad bytes becomes one error type with one clear message."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Any, TypeVar

_T = TypeVar("_T")


def converting(into: type[Exception], keep: tuple[type[Exception], ...] = ()) -> Callable[
        [Callable[..., _T]], Callable[..., _T]]:
    """A decorator: exceptions other than ``into`` and ``keep`` are raised again as ``into``
    (pyelftools raises many kinds on bad bytes)."""

    def decorate(method: Callable[..., _T]) -> Callable[..., _T]:
        @functools.wraps(method)
        def wrapper(*args: Any, **kwargs: Any) -> _T:
            try:
                return method(*args, **kwargs)
            except (into, *keep):
                raise
            except Exception as e:
                raise into(f"{type(e).__name__}: {e}"[:200]) from None

        return wrapper

    return decorate


def free(pointer: int | ctypes.c_char_p | None) -> None:
    """libc's free() of memory a C library handed over (libdebuginfod's path, a demangled name)."""
    libc = ctypes.CDLL(None)
    libc.free.argtypes = [ctypes.c_void_p]
    libc.free(ctypes.cast(pointer, ctypes.c_void_p) if isinstance(pointer, ctypes.c_char_p) else pointer)
