"""Progress bars of the long commands (compact, expire, orphans): tqdm on stderr.

Shown when stderr is a terminal and ``--json`` is off, unless ``--progress``/``--no-progress`` says otherwise;
stdout only ever carries the command's result.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator

from mergetable.core.progress import bar as bar
from mergetable.core.progress import deletions as core_deletions


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
def deletions(description: str, args: argparse.Namespace, as_json: bool) -> Iterator[None]:
    """A bar over the file deletions made in the block (expiration, orphan cleaning)."""
    with core_deletions(description, wanted(args, as_json)):
        yield
