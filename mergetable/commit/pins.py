"""Pins: the data files a restore or rollback is about to commit again, protected from deletion meanwhile.

A restore (and a rollback, which is a restore) commits files an earlier snapshot or tag holds. Snapshot
expiration, tag expiration and orphan cleaning may be deleting exactly those files at the same time, and
storage gives no lock: only atomic create-if-absent. The protocol is a handshake in which each side first
announces, then looks at the other:

* the restore writes a pin, ``pin/pin-<uuid>.json`` listing the files, and only then checks that the snapshot
  or tag it copies still exists (if not, it removes its pin and fails: nothing was committed);
* expiration deletes snapshot and tag files first and only then reads the pins, and never deletes a pinned
  file; orphan cleaning reads the snapshots and tags first and the pins last.

So either the restore sees its source gone, or the deleting side sees the pin. A pin is never removed by a
restore that may have committed (orphan cleaning could have read the snapshots before that commit and the pins
after the removal); orphan cleaning removes pins older than its cutoff, the same age after which it assumes
no commit is in flight. A restore that failed before committing removes its pin at once.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable

from mergetable.core.fileio import FileIO

PIN_DIR = "pin"
_PREFIX = "pin-"


def pin_files(fileio: FileIO, paths: Iterable[str]) -> str:
    """Write a new pin holding ``paths`` (absolute data file paths) and return the pin's path."""
    path = fileio.join(PIN_DIR, f"{_PREFIX}{uuid.uuid4().hex}.json")
    fileio.write_if_absent(path, json.dumps(sorted(set(paths))).encode())
    return path


def unpin(fileio: FileIO, pin: str) -> None:
    """Remove a pin whose restore did not commit."""
    fileio.delete_quietly([pin])


def pinned_files(fileio: FileIO) -> set[str]:
    """Every file some pin holds (a pin removed while it is being read holds nothing any more)."""
    out: set[str] = set()
    for name in fileio.list_names(fileio.join(PIN_DIR)):
        if not name.startswith(_PREFIX):
            continue
        try:
            out.update(json.loads(fileio.read_bytes(fileio.join(PIN_DIR, name))))
        except FileNotFoundError:
            continue
    return out


def stale_pins(fileio: FileIO, cutoff_ms: int) -> list[str]:
    """Pins written before ``cutoff_ms`` (their restores have long finished)."""
    return [
        fileio.join(PIN_DIR, name)
        for name, is_dir, mtime in fileio.list_entries(fileio.join(PIN_DIR))
        if not is_dir and name.startswith(_PREFIX) and mtime is not None and mtime * 1000 <= cutoff_ms
    ]


__all__ = ["PIN_DIR", "pin_files", "pinned_files", "stale_pins", "unpin"]
