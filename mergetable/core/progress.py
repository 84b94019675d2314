"""Progress hooks for long operations, which a front end (the command line) turns into progress bars.

:class:`Progress` is passed explicitly where an operation takes one (compaction: one step per bucket). File
deletions of expiration and orphan cleaning report to the progress installed with :func:`reporting` for the
duration of a call, so those operations need no extra parameter:

>>> seen = []
>>> with reporting(Progress(start=lambda n: seen.append(n), advance=lambda: seen.append("+"))):
...     current().start(2); current().advance()
>>> seen, current() is NONE
([2, '+'], True)
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class Progress:
    """Hooks a caller can use to show progress: ``start(total)`` then ``advance()`` per step done."""

    start: Callable[[int], None] = lambda total: None
    advance: Callable[[], None] = lambda: None


NONE = Progress()
_CURRENT: ContextVar[Progress] = ContextVar("mergetable_progress", default=NONE)


def current() -> Progress:
    """The progress installed by the innermost :func:`reporting` (a no-op one outside any)."""
    return _CURRENT.get()


@contextlib.contextmanager
def reporting(progress: Progress) -> Iterator[Progress]:
    """Install ``progress`` for the block: file deletions in it report their steps to it."""
    token = _CURRENT.set(progress)
    try:
        yield progress
    finally:
        _CURRENT.reset(token)


__all__ = ["NONE", "Progress", "current", "reporting"]
