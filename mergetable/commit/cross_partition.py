"""The commit side of cross-partition upsert tables: the check against concurrent writers, the key index kept warm.

A writer of a cross-partition table (:mod:`mergetable.write.cross_partition`) routes each key against the key
locations of one snapshot, its base. Two writers that place one key in two partitions would both land (the
HASH indexes of different partitions never meet, and a key moved back to a partition it once lived in changes
no HASH index at all), and so would an update in place racing a move of the same key. So a commit that routed
any row but retracts is refused with :class:`~mergetable.core.errors.BucketAssignmentConflictError` when a
commit other than a compaction landed since its base (:func:`key_route_guard`): conservative, as Paimon allows
one writer job of such a table. Retract-only writes (deletes) and compactions commit beside any writer.
"""

from __future__ import annotations

from collections.abc import Callable

from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.errors import BucketAssignmentConflictError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import CommitKind, Snapshot
from mergetable.write.cross_partition import CrossPartitionRouter, KeyBootstrap, KeyLocations

Guard = Callable[[Snapshot | None], None]


def key_route_guard(fileio: FileIO, base_id: int | None, then: Guard | None = None) -> Guard:
    """A commit precondition (run in every attempt, on the latest snapshot) refusing the commit when a snapshot
    other than a compaction was made after snapshot ``base_id`` (None: an empty table); then runs ``then``.

    Raises:
        BucketAssignmentConflictError: from the guard, naming the snapshots.
    """
    snapshots = SnapshotManager(fileio)

    def guard(latest: Snapshot | None) -> None:
        latest_id = 0 if latest is None else latest.id
        for sid in range((base_id or 0) + 1, latest_id + 1):
            kind = snapshots.load(sid).commit_kind if snapshots.exists(sid) else None
            if kind is not CommitKind.COMPACT:
                raise BucketAssignmentConflictError(
                    f"this write of a cross-partition upsert table routed its keys against snapshot {base_id}, "
                    f"and snapshot {sid} was committed since: a key could end up live in two partitions, so "
                    "nothing was committed; write the rows again (one writer at a time writes such a table)"
                )
        if then is not None:
            then(latest)

    return guard


def remember_keys(index: KeyBootstrap | None, router: CrossPartitionRouter, data: Snapshot) -> None:
    """Hand the router's key locations to ``index`` as those of ``data`` (the snapshot its write made), when
    that snapshot directly follows its base: no other commit came between."""
    base = router.base_snapshot_id
    if index is not None and data.id == (base or 0) + 1 and (base is not None or data.id == 1):
        loc = router.locations()
        index.remember(KeyLocations(loc.keys, loc.partitions, loc.values, data.id))


__all__ = ["key_route_guard", "remember_keys"]
