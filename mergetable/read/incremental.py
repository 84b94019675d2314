"""Incremental reads between two snapshots ``(start, end]``, as Paimon's incremental starting scanners.

* :func:`delta_splits` — the files the APPEND commits in the range added (OVERWRITE and COMPACT commits
  add nothing), each file a section of its own, so a reader reads every record as written, unmerged
  (Paimon's ``delta`` incremental scan); a plain read drops the retracts.
* :func:`resolve_range` / :func:`resolve_timestamp_range` — the :class:`IncrementalRange` of a range given
  by ids, tags or timestamps. A range between two tags is the difference of the tagged snapshots, which
  the tags keep readable after the snapshots between them expired. The changes of a range, with their row
  kinds, are planned in :mod:`mergetable.read.changes`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.buckets import bucket_order
from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.predicates import Conjunct
from mergetable.core.rowkind import ROW_KIND_COLUMN as ROW_KIND
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, FileKind, ManifestEntry, Snapshot
from mergetable.read.scan import Planner, Split

SnapshotRef = int | str


@dataclass(frozen=True)
class IncrementalRange:
    """Snapshots ``(start, end]``; ``tagged``: the tagged snapshots when both ends are tags (a diff)."""

    start: int
    end: int
    tagged: tuple[Snapshot, Snapshot] | None = None

    @property
    def empty(self) -> bool:
        return self.start == self.end


def resolve_range(
    snapshots: SnapshotManager, tags: TagManager, between: tuple[SnapshotRef, SnapshotRef]
) -> IncrementalRange:
    """The range ``(start, end]``; each end is a tag name if such a tag exists, else a snapshot id (as in
    ``incremental-between``). An empty table gives an empty range."""
    if len(between) != 2:
        raise OptionsError("incremental_between", f"must be (start, end), got {between!r}")
    start, end = (_resolve(tags, ref) for ref in between)
    a, b = (ref.id if isinstance(ref, Snapshot) else ref for ref in (start, end))
    if a > b:
        raise OptionsError("incremental_between", f"the range's start {a} is after its end {b}")
    if isinstance(start, Snapshot) and isinstance(end, Snapshot):
        return IncrementalRange(a, b, (start, end))
    latest = snapshots.latest_id()
    if latest is None:
        return IncrementalRange(0, 0)
    if b > latest:
        raise SnapshotNotFoundError(f"incremental range end {b} is beyond the latest snapshot {latest}")
    return IncrementalRange(a, b)


def _resolve(tags: TagManager, ref: SnapshotRef) -> Snapshot | int:
    """The tagged snapshot of ``ref`` when a tag of that name exists, else ``ref`` as a snapshot id."""
    text = str(ref).strip()
    if isinstance(ref, bool) or not text:
        raise OptionsError("incremental_between", f"{ref!r} is not a snapshot id or tag name")
    if tags.exists(text):
        return tags.get(text).to_snapshot()
    if isinstance(ref, int) or text.isdigit():
        return int(text)
    return tags.get(text).id


def resolve_timestamp_range(snapshots: SnapshotManager, start_ms: int, end_ms: int) -> IncrementalRange:
    """``incremental-between-timestamp``: the snapshots committed in ``(start_ms, end_ms]``, as an id range."""
    if start_ms > end_ms:
        raise OptionsError("incremental_between", f"the range's start {start_ms} is after its end {end_ms}")
    ids = snapshots.list_ids()
    if not ids:
        return IncrementalRange(0, 0)
    start = _id_at(snapshots, start_ms, ids[0] - 1)
    return IncrementalRange(start, max(start, _id_at(snapshots, end_ms, ids[0] - 1)))


def _id_at(snapshots: SnapshotManager, timestamp_ms: int, default: int) -> int:
    try:
        return snapshots.at_or_before(timestamp_ms).id
    except SnapshotNotFoundError:
        return default


POSTPONE_PROPERTY = "mergetable.postpone-compaction"
"""Set on a COMPACT snapshot that moved postponed rows into buckets (:mod:`mergetable.compaction.postpone`): its
level-0 files are those rows as written, which change data reads (a stream's ``delta``) deliver then."""


def snapshots_between(snapshots: SnapshotManager, start: int, end: int) -> list[Snapshot]:
    """Snapshots ``start+1 .. end`` (each must still exist: a plain read of a range between two tags reads
    their deltas; the difference of the tagged snapshots is ``Table.changelog(start, end, mode="diff")``)."""
    return [snapshots.load(sid) for sid in range(start + 1, end + 1)]


def _added(manifests: ManifestIO, snapshot: Snapshot) -> list[ManifestEntry]:
    """The records a snapshot added to what reads see: an APPEND's files but postponed ones (bucket -2), and
    the files into which a compaction moved postponed rows (:data:`POSTPONE_PROPERTY`); OVERWRITE and other
    COMPACT commits are skipped, as in Paimon."""
    if snapshot.commit_kind is CommitKind.COMPACT and POSTPONE_PROPERTY in (snapshot.properties or {}):
        return [e for e in manifests.delta_entries(snapshot) if e.kind is FileKind.ADD and e.file.level == 0]
    if snapshot.commit_kind is not CommitKind.APPEND:
        return []
    return [e for e in manifests.delta_entries(snapshot) if e.kind is FileKind.ADD and e.bucket >= 0]


def delta_splits(
    manifests: ManifestIO,
    snapshots: Sequence[Snapshot],
    schema: TableSchema,
    dnf: list[Conjunct] | None,
) -> list[Split]:
    """Splits (one per bucket) over the files the APPEND commits of ``snapshots`` added, in commit order,
    each file a section of its own: read unmerged."""
    planner = Planner(manifests, schema)
    entries = planner.prune([e for s in snapshots for e in _added(manifests, s)], dnf)
    by_bucket: dict[tuple[tuple[str | None, ...], int], list[ManifestEntry]] = {}
    for e in entries:
        by_bucket.setdefault((e.partition, e.bucket), []).append(e)
    end = snapshots[-1].id if snapshots else 0
    splits = []
    for (partition, bucket), group in sorted(by_bucket.items(), key=lambda kv: bucket_order(kv[0])):
        group.sort(key=lambda e: e.file.min_sequence_number)
        sections = tuple(((e.file,),) for e in group)
        splits.append(Split(end, partition, bucket, sections, group[0].total_buckets))
    return splits


__all__ = [
    "ROW_KIND",
    "IncrementalRange",
    "delta_splits",
    "resolve_range",
    "resolve_timestamp_range",
    "snapshots_between",
]
