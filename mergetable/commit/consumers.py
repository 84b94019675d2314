"""Consumers: the progress of named streaming readers, stored in the table (Paimon's ``ConsumerManager``).

``consumer/consumer-<id>`` holds ``{"nextSnapshot": N, "tableId": ...}``: the first snapshot the consumer has
not read yet, and the identity of the table it was recorded for (a stream refuses the record of a table
deleted and re-created at the same path).
A stream that names a ``consumer-id`` records its start as soon as it plans its first batch (a ``*-full``
first batch as ``fullScan``), so expiration keeps what it reads from then on; it starts from the record when
it has no checkpoint of its own and records its progress there after every batch. Snapshot expiration keeps
every snapshot a consumer still needs (the smallest ``nextSnapshot`` and everything after it). With
``consumer.expiration-time`` set, a consumer whose file was not updated for that long is retired by
expiration, so an abandoned reader does not pin snapshots forever.
"""

from __future__ import annotations

import builtins
import re
import time

from mergetable.commit.schemas import table_identity
from mergetable.core.errors import MergeTableError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import CONSUMER_PREFIX, PathFactory
from mergetable.metadata.models import ConsumerProgress

_CONSUMER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_PREFIX = CONSUMER_PREFIX


def check_consumer_id(consumer_id: str) -> str:
    """``consumer_id`` if it is a valid consumer name (letters, digits, ``_ - .``), else a typed error."""
    if not isinstance(consumer_id, str) or not _CONSUMER_ID.match(consumer_id):
        raise MergeTableError(f"invalid consumer id {consumer_id!r} (letters, digits, '_', '-', '.')")
    return consumer_id


class ConsumerManager:
    """Reads and writes the consumer files of one table."""

    def __init__(self, fileio: FileIO) -> None:
        self.fileio = fileio
        self.paths = PathFactory(fileio.root)

    def _path(self, consumer_id: str) -> str:
        return self.paths.consumer_file(check_consumer_id(consumer_id))

    def get(self, consumer_id: str) -> ConsumerProgress | None:
        path = self._path(consumer_id)
        try:
            text = self.fileio.read_bytes(path)
        except FileNotFoundError:
            return None
        return ConsumerProgress.from_json(text, path)

    def record(
        self, consumer_id: str, next_snapshot: int, table_id: str | None = None, full_scan: bool = False
    ) -> ConsumerProgress:
        """Store that ``consumer_id`` will read ``next_snapshot`` next (overwrites its progress), for the table
        of identity ``table_id`` (default: the table there now, :func:`~mergetable.commit.schemas.table_identity`);
        ``full_scan``: it reads that snapshot in full first (a ``*-full`` stream's first batch)."""
        if next_snapshot < 1:
            raise MergeTableError(f"a consumer's next snapshot must be >= 1, got {next_snapshot}")
        table_id = table_id if table_id is not None else table_identity(self.fileio)
        progress = ConsumerProgress(next_snapshot=next_snapshot, table_id=table_id, full_scan=full_scan or None)
        self.fileio.write_bytes(self._path(consumer_id), progress.to_json().encode())
        return progress

    def delete(self, consumer_id: str) -> None:
        if self.get(consumer_id) is None:
            raise SnapshotNotFoundError(f"consumer '{consumer_id}' does not exist")
        self.fileio.delete(self._path(consumer_id))

    def list(self) -> dict[str, ConsumerProgress]:
        out: dict[str, ConsumerProgress] = {}
        for name in sorted(self.fileio.list_names(self.paths.consumer_dir)):
            if name.startswith(_PREFIX) and _CONSUMER_ID.match(name[len(_PREFIX) :]):
                progress = self.get(name[len(_PREFIX) :])
                if progress is not None:
                    out[name[len(_PREFIX) :]] = progress
        return out

    def min_next_snapshot(self) -> int | None:
        """The smallest ``nextSnapshot`` of all consumers (None without consumers)."""
        nexts = [p.next_snapshot for p in self.list().values()]
        return min(nexts) if nexts else None

    def expire(self, expiration_ms: int, now_ms: int | None = None) -> builtins.list[str]:
        """Delete consumers not updated for ``expiration_ms``; returns their ids."""
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        expired = []
        for path, mtime in self.fileio.walk_files(self.paths.consumer_dir):
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if not name.startswith(_PREFIX) or mtime is None:
                continue
            if mtime * 1000 < now - expiration_ms:
                self.fileio.delete(self._path(name[len(_PREFIX) :]))
                expired.append(name[len(_PREFIX) :])
        return sorted(expired)


__all__ = ["ConsumerManager", "check_consumer_id"]
