"""Progress hooks for long operations, which a front end turns into progress bars (:func:`bar`: tqdm on stderr).

:class:`Progress` is passed explicitly where an operation takes one (compaction: one step per bucket). File
deletions of expiration and orphan cleaning report to the progress installed with :func:`reporting` for the
duration of a call, so those operations need no extra parameter. The Python API's ``progress=`` arguments
(``True``/``False``, default None: :func:`interactive`) and the command line's ``--progress`` draw
:func:`bar`:

>>> seen = []
>>> with reporting(Progress(start=lambda n: seen.append(n), advance=lambda: seen.append("+"))):
...     current().start(2); current().advance()
>>> seen, current() is NONE
([2, '+'], True)
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


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


def interactive() -> bool:
    """Whether a person is likely watching: stderr is a terminal, or the code runs in a Jupyter kernel."""
    return sys.stderr.isatty() or "ipykernel" in sys.modules


def wanted(progress: bool | None) -> bool:
    """``progress`` when given, else :func:`interactive`."""
    return interactive() if progress is None else bool(progress)


@contextlib.contextmanager
def bar(description: str, unit: str, show: bool) -> Iterator[Progress]:
    """A :class:`Progress` drawing a tqdm bar on stderr once ``start(total)`` is called; closed at the end.

    ``advance`` takes an optional step count (default 1); a ``start`` again replaces the bar.
    """
    from tqdm import tqdm

    bars: list[Any] = []

    def start(total: int) -> None:
        for old in bars:
            old.close()
        bars[:] = [tqdm(total=total, unit=unit, desc=description, disable=not show, file=sys.stderr)]

    def advance(steps: int = 1) -> None:
        if bars:
            bars[-1].update(steps)

    try:
        yield Progress(start, advance)
    finally:
        for b in bars:
            b.close()


def counted(items: Iterable[Any], description: str, unit: str, total: int | None = None) -> Iterator[Any]:
    """``items`` passed through while a tqdm bar on stderr counts their ``num_rows`` (closed at the end)."""
    from tqdm import tqdm

    with tqdm(total=total, unit=unit, unit_scale=True, desc=description, file=sys.stderr) as shown:
        for item in items:
            shown.update(int(getattr(item, "num_rows", 1)))
            yield item


@contextlib.contextmanager
def deletions(description: str, show: bool | None) -> Iterator[None]:
    """A bar over the file deletions made in the block (expiration, orphan cleaning); ``show=None``: the
    progress an enclosing :func:`reporting` installed (a front end's), else a bar when :func:`interactive`."""
    if show is None and current() is not NONE:
        yield
        return
    with bar(description, "file", wanted(show)) as progress, reporting(progress):
        yield


__all__ = ["NONE", "Progress", "bar", "counted", "current", "deletions", "interactive", "reporting", "wanted"]
