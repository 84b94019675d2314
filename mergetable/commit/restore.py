"""Restore: a new snapshot whose live files are exactly an earlier snapshot's (Delta's RESTORE).

Unlike a rollback nothing is removed: the restore is one more commit (kind OVERWRITE, with the property
``restored-from``), made with the commit protocol, so it races safely with other writers. Files live in both
states are left alone; the others are deleted from, or added back to, the table state. A concurrent commit
that removed a file the restore deletes makes it fail with :class:`CommitConflictError` (table unchanged).
"""

from __future__ import annotations

import uuid

from mergetable.commit.committer import Committer
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.fileio import FileIO
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, CommitMessage, DataFileMeta, ManifestEntry, Snapshot

RESTORED_FROM = "restored-from"


def _by_bucket(entries: list[ManifestEntry]) -> dict[tuple[tuple[str | None, ...], int, int], list[DataFileMeta]]:
    out: dict[tuple[tuple[str | None, ...], int, int], list[DataFileMeta]] = {}
    for e in entries:
        out.setdefault((e.partition, e.bucket, e.total_buckets), []).append(e.file)
    return out


def restore(fileio: FileIO, schema: TableSchema, target: Snapshot) -> Snapshot | None:
    """Commit the state of ``target``; None when the latest snapshot already has exactly its files."""
    manifests = ManifestIO(fileio)
    latest = SnapshotManager(fileio).latest()
    current = {e.identifier: e for e in manifests.live_entries(latest)}
    wanted = {e.identifier: e for e in manifests.live_entries(target)}
    removed = _by_bucket([e for i, e in current.items() if i not in wanted])
    added = _by_bucket([e for i, e in wanted.items() if i not in current])
    messages = [
        CommitMessage(
            partition=p,
            bucket=b,
            total_buckets=n,
            new_files=tuple(added.get((p, b, n), ())),
            deleted_files=tuple(removed.get((p, b, n), ())),
        )
        for (p, b, n) in sorted({*removed, *added}, key=repr)
    ]
    if not messages:
        return None
    committer = Committer(fileio, schema, f"restore-{uuid.uuid4()}")
    return committer.commit_kind(messages, CommitKind.OVERWRITE, 1, {RESTORED_FROM: str(target.id)})


__all__ = ["RESTORED_FROM", "restore"]
