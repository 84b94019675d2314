"""Incremental reads between two snapshots ``(start, end]``: merged deltas and changelog.

* :func:`delta_splits` — the files the APPEND/OVERWRITE commits in the range added, planned as splits of a
  read that merges them per key (Paimon's ``delta`` incremental scan). The split reader reads them like any
  other split: what comes out is, per key, the merge of the records written in the range.
* :func:`read_changelog` — the table's changelog in the range, oldest snapshot first, with a ``_row_kind``
  column (``+I`` ``-U`` ``+U`` ``-D``). With a changelog producer it is the content of the changelog files
  the snapshots list (input: written with the data; lookup and full-compaction: written by compactions).
  Without one it is derived from each data commit's merged delta: the merged record's kind, a retract
  becoming ``-D``.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import MergeTableError
from mergetable.core.options import ChangelogProducer
from mergetable.core.predicates import Conjunct
from mergetable.core.rowkind import ROW_KIND_COLUMN as ROW_KIND
from mergetable.core.rowkind import RowKind, is_retract, kinds_to_strings
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.metadata.models import CommitKind, FileKind, ManifestEntry, Snapshot
from mergetable.read.reader import SplitReader
from mergetable.read.scan import KeyComparator, Planner, Split, interval_partition

SnapshotRef = int | str


def resolve_range(
    snapshots: SnapshotManager, tags: TagManager, between: tuple[SnapshotRef, SnapshotRef]
) -> tuple[int, int]:
    """Snapshot ids of ``(start, end)``; each may be an id or a tag name (as in ``incremental-between``)."""
    if len(between) != 2:
        raise MergeTableError(f"incremental range must be (start, end), got {between!r}")
    start, end = (_snapshot_id(tags, ref) for ref in between)
    if start > end:
        raise MergeTableError(f"incremental range start {start} is after its end {end}")
    latest = snapshots.latest_id()
    if latest is None or end > latest:
        raise MergeTableError(f"incremental range end {end} is beyond the latest snapshot {latest}")
    return start, end


def _snapshot_id(tags: TagManager, ref: SnapshotRef) -> int:
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    text = str(ref).strip()
    if text.isdigit():
        return int(text)
    return tags.get(text).id


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


def read_changelog(
    manifests: ManifestIO,
    snapshots: Sequence[Snapshot],
    schema: TableSchema,
    reader: SplitReader,
) -> pa.Table:
    """The changelog of ``snapshots`` (in order) with the reader's columns plus ``_row_kind``."""
    parts: list[pa.Table] = []
    for snap in snapshots:
        if schema.table_options.changelog_producer is ChangelogProducer.NONE:
            for split in delta_splits(manifests, [snap], schema, reader.dnf):
                parts.extend(_derived(reader, split))
        else:
            for e in manifests.changelog_entries(snap):
                split = Split(snap.id, e.partition, e.bucket, (), e.total_buckets)
                parts.append(_with_kind(reader, reader.read_file(split, e.file, None)))
    out_schema = reader.out_schema.append(pa.field(ROW_KIND, pa.string(), False))
    parts = [p for p in parts if p.num_rows]
    return pa.concat_tables(parts) if parts else out_schema.empty_table()


def _derived(reader: SplitReader, split: Split) -> list[pa.Table]:
    out = []
    for kv in reader.read_split_kv(split):
        kinds = kv.column(VALUE_KIND).to_numpy()
        retract = is_retract(kinds)
        if retract.any():
            kinds = kinds.copy()
            kinds[retract] = RowKind.DELETE
            i = kv.schema.get_field_index(VALUE_KIND)
            kv = kv.set_column(i, kv.schema.field(i), pa.array(kinds, pa.int8()))
        out.append(_with_kind(reader, kv))
    return out


def _with_kind(reader: SplitReader, kv: pa.Table) -> pa.Table:
    if reader.filter_expr is not None and kv.num_rows:
        kv = kv.filter(reader.filter_expr)
    kinds = kinds_to_strings(kv.column(VALUE_KIND))
    out = kv.select(reader.columns).cast(reader.out_schema)
    return out.append_column(pa.field(ROW_KIND, pa.string(), False), kinds)


def bucket_order(bucket_id: tuple[tuple[str | None, ...], int]) -> tuple[tuple[str, ...], int]:
    """Sort key of a (partition, bucket): partitions by their values (null first), then bucket."""
    partition, bucket = bucket_id
    return tuple("" if v is None else v for v in partition), bucket


__all__ = ["ROW_KIND", "delta_splits", "read_changelog", "resolve_range", "snapshots_between"]
