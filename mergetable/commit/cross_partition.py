"""The commit side of cross-partition upsert tables: the check against concurrent writers, the key index kept warm.

A writer of a cross-partition table (:mod:`mergetable.write.cross_partition`) routes each key against the key
locations of one snapshot, its base. Two writers that place one key in two partitions would both land (the
HASH indexes of different partitions never meet), so a commit that inserts a key new to the table or moves a
key is refused with :class:`~mergetable.core.errors.BucketAssignmentConflictError` when any commit since its
base changed a HASH index of the table (:func:`key_move_guard`): conservative, as Paimon allows one writer job
of such a table. Writes that only update keys where they live commit side by side.
"""

from __future__ import annotations

from collections.abc import Callable

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.dynamic_buckets import HASH_INDEX
from mergetable.core.errors import BucketAssignmentConflictError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import Snapshot
from mergetable.write.cross_partition import CrossPartitionRouter, KeyBootstrap, KeyLocations

Guard = Callable[[Snapshot | None], None]


def _hash_names(indexes: IndexManifestIO, snapshot: Snapshot | None) -> frozenset[str]:
    return frozenset(e.index_file.file_name for e in indexes.entries(snapshot) if e.index_file.index_type == HASH_INDEX)


def key_move_guard(fileio: FileIO, base_id: int | None, then: Guard | None = None) -> Guard:
    """A commit precondition (run in every attempt, on the latest snapshot) refusing the commit when a HASH
    index changed since snapshot ``base_id`` (None: an empty table); then runs ``then``.

    Raises:
        BucketAssignmentConflictError: from the guard, naming both snapshots.
    """
    indexes = IndexManifestIO(fileio)
    snapshots = SnapshotManager(fileio)
    base: frozenset[str] | None = frozenset()
    if base_id is not None:
        base = _hash_names(indexes, snapshots.load(base_id)) if snapshots.exists(base_id) else None

    def guard(latest: Snapshot | None) -> None:
        latest_id = None if latest is None else latest.id
        if latest_id != base_id and (base is None or _hash_names(indexes, latest) != base):
            raise BucketAssignmentConflictError(
                f"this write of a cross-partition upsert table placed new keys or moved keys between partitions "
                f"against snapshot {base_id}, and a concurrent commit up to snapshot {latest_id} placed keys too: "
                "a key could end up live in two partitions, so nothing was committed; write the rows again "
                "(one writer at a time places keys in such a table)"
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


__all__ = ["key_move_guard", "remember_keys"]
