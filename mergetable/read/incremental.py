"""Incremental reads between two snapshots ``(start, end]``: merged deltas and changelog.

* :func:`delta_splits` — the files the APPEND/OVERWRITE commits in the range added, planned as splits of a
  read that merges them per key (Paimon's ``delta`` incremental scan). The split reader reads them like any
  other split: what comes out is, per key, the merge of the records written in the range.
* :func:`resolve_range` / :func:`resolve_timestamp_range` — the snapshot ids of a range given by ids,
  tags or timestamps. The changes of a range, with their row kinds, are planned in
  :mod:`mergetable.read.changes`.
"""

from __future__ import annotations

from collections.abc import Sequence

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.buckets import bucket_order
from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.predicates import Conjunct
from mergetable.core.rowkind import ROW_KIND_COLUMN as ROW_KIND
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, FileKind, ManifestEntry, Snapshot
from mergetable.read.scan import KeyComparator, Planner, Split, interval_partition

SnapshotRef = int | str


def resolve_range(
    snapshots: SnapshotManager, tags: TagManager, between: tuple[SnapshotRef, SnapshotRef]
) -> tuple[int, int]:
    """Snapshot ids of ``(start, end)``; each may be an id or a tag name (as in ``incremental-between``)."""
    if len(between) != 2:
        raise OptionsError("incremental_between", f"must be (start, end), got {between!r}")
    start, end = (_snapshot_id(tags, ref) for ref in between)
    if start > end:
        raise OptionsError("incremental_between", f"the range's start {start} is after its end {end}")
    latest = snapshots.latest_id()
    if latest is None or end > latest:
        raise SnapshotNotFoundError(f"incremental range end {end} is beyond the latest snapshot {latest}")
    return start, end


def _snapshot_id(tags: TagManager, ref: SnapshotRef) -> int:
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    text = str(ref).strip()
    if text.isdigit():
        return int(text)
    return tags.get(text).id


def resolve_timestamp_range(snapshots: SnapshotManager, start_ms: int, end_ms: int) -> tuple[int, int]:
    """``incremental-between-timestamp``: the snapshots committed in ``(start_ms, end_ms]``, as an id range."""
    if start_ms > end_ms:
        raise OptionsError("incremental_between", f"the range's start {start_ms} is after its end {end_ms}")
    ids = snapshots.list_ids()
    if not ids:
        return 0, 0
    start = _id_at(snapshots, start_ms, ids[0] - 1)
    return start, max(start, _id_at(snapshots, end_ms, ids[0] - 1))


def _id_at(snapshots: SnapshotManager, timestamp_ms: int, default: int) -> int:
    try:
        return snapshots.at_or_before(timestamp_ms).id
    except SnapshotNotFoundError:
        return default


def snapshots_between(snapshots: SnapshotManager, start: int, end: int) -> list[Snapshot]:
    """Snapshots ``start+1 .. end`` (each must still exist)."""
    return [snapshots.load(sid) for sid in range(start + 1, end + 1)]


def _added(manifests: ManifestIO, snapshot: Snapshot) -> list[ManifestEntry]:
    if snapshot.commit_kind is CommitKind.COMPACT:
        return []
    return [e for e in manifests.delta_entries(snapshot) if e.kind is FileKind.ADD]


def delta_splits(
    manifests: ManifestIO,
    snapshots: Sequence[Snapshot],
    schema: TableSchema,
    dnf: list[Conjunct] | None,
) -> list[Split]:
    """Splits (one per bucket) over the files the data commits of ``snapshots`` added."""
    planner = Planner(manifests, schema)
    entries = planner.prune([e for s in snapshots for e in _added(manifests, s)], dnf)
    by_bucket: dict[tuple[tuple[str | None, ...], int], list[ManifestEntry]] = {}
    for e in entries:
        by_bucket.setdefault((e.partition, e.bucket), []).append(e)
    end = snapshots[-1].id if snapshots else 0
    cmp = KeyComparator(planner.key_types)
    splits = []
    for (partition, bucket), group in sorted(by_bucket.items(), key=lambda kv: bucket_order(kv[0])):
        sections = interval_partition([e.file for e in group], cmp)
        splits.append(
            Split(end, partition, bucket, tuple(tuple(tuple(r) for r in s) for s in sections), group[0].total_buckets)
        )
    return splits


__all__ = ["ROW_KIND", "delta_splits", "resolve_range", "resolve_timestamp_range", "snapshots_between"]
