"""Time travel: the one place where a snapshot id, timestamp, tag or version becomes a snapshot.

Every front end (``Table.read``/``scan``/``plan``, ``restore``, ``rollback_to``, system tables, the Spark
reader and the command line) validates its arguments into a :class:`~mergetable.core.read_options.TimeTravel`
and resolves it here.
"""

from __future__ import annotations

from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import SnapshotNotFoundError
from mergetable.core.read_options import TimeTravel
from mergetable.metadata.models import Snapshot


def resolve_travel(snapshots: SnapshotManager, tags: TagManager, travel: TimeTravel) -> Snapshot | None:
    """The snapshot a read with ``travel`` uses (the latest, or None for an empty table, when none is given).

    A version is a tag name if such a tag exists, else a snapshot id.
    """
    if travel.snapshot_id is not None:
        return snapshots.load(travel.snapshot_id)
    if travel.timestamp_ms is not None:
        return snapshots.at_or_before(travel.timestamp_ms)
    if travel.tag is not None:
        return tags.get(travel.tag).to_snapshot()
    if travel.version is not None:
        if tags.exists(travel.version):
            return tags.get(travel.version).to_snapshot()
        if travel.version.isdigit():
            return snapshots.load(int(travel.version))
        raise SnapshotNotFoundError(f"version '{travel.version}' is neither a tag nor a snapshot id")
    return snapshots.latest()


__all__ = ["resolve_travel"]
