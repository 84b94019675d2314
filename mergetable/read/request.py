"""Serving a :class:`~mergetable.core.read_options.ReadRequest`: time travel resolved, splits planned.

The one place where a snapshot id, timestamp, tag or version becomes a snapshot and where a request
becomes splits, for ``Table.read``/``scan``/``plan``, the Spark reader and the command line alike.
"""

from __future__ import annotations

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.predicates import Conjunct
from mergetable.core.read_options import ReadRequest, TimeTravel
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import Snapshot
from mergetable.read.incremental import delta_splits, resolve_range, snapshots_between
from mergetable.read.scan import Planner, Sections, Split


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


def plan_request(
    manifests: ManifestIO,
    snapshots: SnapshotManager,
    tags: TagManager,
    schema: TableSchema,
    request: ReadRequest,
    dnf: list[Conjunct] | None,
    sections: Sections = "all",
    key_ranges: bool = True,
) -> list[Split]:
    """The splits of ``request`` with the bound filter ``dnf`` (partition, bucket and key-range pruned), holding
    the ``sections`` asked for (an incremental read's splits are not sections of one snapshot: all of them);
    ``key_ranges=False``: sections above the split size stay whole (:func:`.parallel.in_process_key_ranges`)."""
    if request.incremental_between is not None:
        if sections != "all":
            raise OptionsError("sections", f"must be 'all' for an incremental read, got '{sections}'")
        start, end = resolve_range(snapshots, tags, request.incremental_between)
        return delta_splits(manifests, snapshots_between(snapshots, start, end), schema, dnf)
    snap = resolve_travel(snapshots, tags, request.travel)
    planner = Planner(manifests, schema, manifests.fileio if key_ranges else None)
    return planner.plan(snap, dnf, request.split_size, sections=sections)


__all__ = ["plan_request", "resolve_travel"]
