"""Progress bars of the long commands (compact, expire, orphans): tqdm on stderr.

Shown when stderr is a terminal and ``--json`` is off, unless ``--progress``/``--no-progress`` says otherwise;
stdout only ever carries the command's result.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from mergetable.core.progress import Progress, reporting


def add_progress_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show a progress bar on stderr (default: when stderr is a terminal and --json is off)",
    )


def wanted(args: argparse.Namespace, as_json: bool) -> bool:
    chosen: bool | None = getattr(args, "progress", None)
    return chosen if chosen is not None else (sys.stderr.isatty() and not as_json)


@contextlib.contextmanager
def bar(description: str, unit: str, show: bool) -> Iterator[Progress]:
    """A :class:`Progress` drawing a tqdm bar on stderr once ``start(total)`` is called; closed at the end."""
    from tqdm import tqdm

    bars: list[Any] = []

    def start(total: int) -> None:
        for old in bars:
            old.close()
        bars[:] = [tqdm(total=total, unit=unit, desc=description, disable=not show, file=sys.stderr)]

    def advance() -> None:
        if bars:
            bars[-1].update(1)

    try:
        yield Progress(start, advance)
    finally:
        for b in bars:
            b.close()


@contextlib.contextmanager
def deletions(description: str, args: argparse.Namespace, as_json: bool) -> Iterator[None]:
    """A bar over the file deletions made in the block (expiration, orphan cleaning)."""
    with bar(description, "file", wanted(args, as_json)) as progress, reporting(progress):
        yield
