"""Change data: what a stream or an incremental read returns, planned as picklable :class:`ChangeSplit` s.

Every change row carries its kind in ``_row_kind`` (``+I`` ``-U`` ``+U`` ``-D``). The kinds of split:

* ``full`` — the rows of one snapshot, all ``+I`` (the first batch of the ``*-full`` scan modes). With the
  ``lookup`` producer only files above level 0 are read, with ``full-compaction`` only the top level: the
  rest has not produced its changelog yet and will, so nothing is delivered twice (as Paimon does).
* ``delta`` — one APPEND commit's data files, every record as written, unmerged (``changelog-producer=none``;
  Paimon's delta scan). A retract comes out as ``-D``; the value a key had before the commit is unknown, so
  there are no ``-U`` rows (no before-images).
* ``changelog`` — one changelog file as written by the producer (``input``, ``lookup``, ``full-compaction``).
* ``diff`` — the per-key difference between a bucket at two snapshots (``-U``/``+U``, ``+I``, ``-D``).

:class:`ChangePlanner` plans them per snapshot the way Paimon's follow-up scanners do (``delta`` for APPEND
snapshots without a producer, ``changelog`` for snapshots carrying changelog, ``diff`` for OVERWRITE
snapshots with ``streaming-read-overwrite``) and for batch ranges (``incremental-between-scan-mode``; a
range between two tags is always the ``diff`` of the tagged snapshots, as Paimon reads it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import BucketId, bucket_order
from mergetable.core.errors import UnsupportedError
from mergetable.core.options import ChangelogProducer
from mergetable.core.predicates import Conjunct
from mergetable.core.rowkind import ROW_KIND_COLUMN, RowKind, is_retract, kinds_to_strings
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.metadata.models import CommitKind, Snapshot
from mergetable.read.diff import diff_changelog
from mergetable.read.incremental import POSTPONE_PROPERTY, IncrementalRange, delta_splits
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Planner, Split
from mergetable.read.scan_modes import IncrementalMode

RESCALE_PROPERTY = "mergetable.rescale"
"""Set (to the new bucket count) on the OVERWRITE snapshot of a rescale (:mod:`mergetable.compaction.rescale`):
the same rows in other buckets, no change for a stream, even with ``streaming-read-overwrite``."""

ROW_KIND_FIELD = pa.field(ROW_KIND_COLUMN, pa.string(), False)


class ChangeKind(StrEnum):
    FULL = "full"
    DELTA = "delta"
    CHANGELOG = "changelog"
    DIFF = "diff"


@dataclass(frozen=True)
class ChangeSplit:
    """A unit of change data: one split of one snapshot (``before``: the other side of a diff)."""

    kind: ChangeKind
    split: Split
    before: Split | None = None

    @property
    def snapshot_id(self) -> int:
        return self.split.snapshot_id

    @property
    def file_count(self) -> int:
        return len(self.split.files) + (len(self.before.files) if self.before is not None else 0)

    @property
    def row_count(self) -> int:
        return self.split.row_count


class ChangePlanner:
    """Plans change splits of one table (full snapshots, follow-up snapshots, batch ranges)."""

    def __init__(self, manifests: ManifestIO, snapshots: SnapshotManager, schema: TableSchema) -> None:
        self.manifests = manifests
        self.snapshots = snapshots
        self.schema = schema
        self.producer = schema.table_options.changelog_producer

    def snapshot(self, snapshot: Snapshot, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        """Every row of ``snapshot`` as an insert (the ``$audit_log`` view of a snapshot)."""
        return [ChangeSplit(ChangeKind.FULL, s) for s in Planner(self.manifests, self.schema).plan(snapshot, dnf)]

    def full(self, snapshot: Snapshot, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        """The rows of ``snapshot`` as inserts, from the levels whose changelog was already produced."""
        min_level = 0
        if self.producer is ChangelogProducer.LOOKUP:
            min_level = 1
        elif self.producer is ChangelogProducer.FULL_COMPACTION:
            min_level = self.schema.table_options.max_levels - 1
        splits = Planner(self.manifests, self.schema).plan(snapshot, dnf, min_level=min_level)
        return [ChangeSplit(ChangeKind.FULL, s) for s in splits]

    def follow(
        self, snapshot: Snapshot, dnf: list[Conjunct] | None = None, read_overwrite: bool = False
    ) -> list[ChangeSplit]:
        """What a stream reads of ``snapshot`` after its start (Paimon's follow-up scanners)."""
        if snapshot.commit_kind is CommitKind.OVERWRITE:
            if not read_overwrite or RESCALE_PROPERTY in (snapshot.properties or {}):
                return []
            before = self.snapshots.load(snapshot.id - 1) if snapshot.id > 1 else None
            return self.diff(before, snapshot, dnf)
        if self.producer is ChangelogProducer.NONE:
            return self.delta(snapshot, dnf)
        return self.changelog(snapshot, dnf)

    def delta(self, snapshot: Snapshot, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        moved = POSTPONE_PROPERTY in (snapshot.properties or {})  # postponed rows made visible: delivered now
        if snapshot.commit_kind is not CommitKind.APPEND and not moved:
            return []
        return [ChangeSplit(ChangeKind.DELTA, s) for s in delta_splits(self.manifests, [snapshot], self.schema, dnf)]

    def changelog(self, snapshot: Snapshot, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        if not snapshot.changelog_manifest_list:
            return []
        entries = Planner(self.manifests, self.schema).prune(self.manifests.changelog_entries(snapshot), dnf)
        return [
            ChangeSplit(
                ChangeKind.CHANGELOG, Split(snapshot.id, e.partition, e.bucket, (((e.file,),),), e.total_buckets)
            )
            for e in entries
        ]

    def diff(self, before: Snapshot | None, after: Snapshot, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        """Per bucket, the changes that turn ``before`` (None: empty) into ``after``; unchanged buckets skipped."""
        planner = Planner(self.manifests, self.schema)
        old = _by_bucket(planner.plan(before, dnf) if before is not None else [])
        new = _by_bucket(planner.plan(after, dnf))
        out = []
        for bucket in sorted(old.keys() | new.keys(), key=bucket_order):
            a, b = new.get(bucket), old.get(bucket)
            if (
                a is not None
                and b is not None
                and {f.file_name for f in a.files} == {f.file_name for f in b.files}
                and a.vectors == b.vectors  # a deletion-vector table: the same files, the same marked rows
            ):
                continue
            partition, number = bucket
            total = (a or b).total_buckets  # type: ignore[union-attr]
            a = a or Split(after.id, partition, number, (), total)
            out.append(ChangeSplit(ChangeKind.DIFF, a, b))
        return out

    def between(
        self, window: IncrementalRange, mode: IncrementalMode, dnf: list[Conjunct] | None = None
    ) -> list[ChangeSplit]:
        """Change splits of ``window`` for ``incremental-between-scan-mode`` ``mode`` (a range between two
        tags: the diff of the tagged snapshots, whatever the mode)."""
        start, end = window.start, window.end
        if window.tagged is not None:
            return self.diff(*window.tagged, dnf) if not window.empty else []
        if mode is IncrementalMode.DIFF:
            before = self.snapshots.load(start) if start >= 1 else None
            return self.diff(before, self.snapshots.load(end), dnf) if end > start else []
        if mode is IncrementalMode.AUTO:
            mode = IncrementalMode.DELTA if self.producer is ChangelogProducer.NONE else IncrementalMode.CHANGELOG
        plan = self.delta if mode is IncrementalMode.DELTA else self.changelog
        out: list[ChangeSplit] = []
        for sid in range(start + 1, end + 1):
            out.extend(plan(self.snapshots.load(sid), dnf))
        return out


def _by_bucket(splits: Iterable[Split]) -> dict[BucketId, Split]:
    """One split per bucket (a plan may cut a bucket into several; their sections are key-disjoint)."""
    out: dict[BucketId, Split] = {}
    for s in splits:
        key = (s.partition, s.bucket)
        prev = out.get(key)
        out[key] = (
            s
            if prev is None
            else Split(
                s.snapshot_id,
                s.partition,
                s.bucket,
                prev.sections + s.sections,
                s.total_buckets,
                deletion_files=prev.deletion_files + s.deletion_files,
            )
        )
    return out


# -- reading ------------------------------------------------------------------------------------------------
def change_schema(reader: SplitReader) -> pa.Schema:
    return reader.out_schema.append(ROW_KIND_FIELD)


def read_change_split(reader: SplitReader, change: ChangeSplit) -> Iterator[pa.Table]:
    """The rows of one change split: the reader's columns plus ``_row_kind``."""
    split = change.split
    append = reader.schema.is_append_table
    if append and change.kind is ChangeKind.DIFF:
        raise UnsupportedError(
            "the diff of two snapshots of an append table (no primary key) is not supported: read its commits' "
            "appended rows (mode='delta')"
        )
    if change.kind is ChangeKind.FULL or append:  # an append table's delta: its files' rows, all +I
        for table in reader.read_split(split):
            kinds = pa.array(np.full(table.num_rows, "+I", dtype=object), pa.string())
            yield table.append_column(ROW_KIND_FIELD, kinds)
    elif change.kind is ChangeKind.CHANGELOG:
        for f in split.files:
            yield _with_kind(reader, reader.read_file(split, f, None))
    elif change.kind is ChangeKind.DELTA:
        for f in split.files:
            yield _with_kind(reader, _retracts_as_deletes(reader.read_file(split, f, None)))
    else:
        after = _bucket_kv(reader, split)
        before = _bucket_kv(reader, change.before) if change.before is not None else after.slice(0, 0)
        if after.num_rows == 0:  # the bucket is gone: every visible row of before is deleted
            before = before.filter(pa.array(~is_retract(before.column(VALUE_KIND).to_numpy())))
            yield _with_kind(reader, _set_kind(before, RowKind.DELETE))
        else:
            yield _with_kind(reader, diff_changelog(before, after, list(reader.schema.trimmed_primary_keys)))


def read_changes(reader: SplitReader, changes: Sequence[ChangeSplit], drop_update_before: bool = False) -> pa.Table:
    """All rows of ``changes`` in order, as one table."""
    parts = [t for c in changes for t in read_change_split(reader, c) if t.num_rows]
    out = pa.concat_tables(parts) if parts else change_schema(reader).empty_table()
    return drop_before_images(out) if drop_update_before else out


def drop_before_images(table: pa.Table) -> pa.Table:
    """Without the ``-U`` rows (for sinks that upsert)."""
    if table.num_rows == 0:
        return table
    return table.filter(pc.not_equal(table.column(ROW_KIND_COLUMN), "-U"))


def after_images(table: pa.Table) -> pa.Table:
    """Only the rows a change leaves in the table (``+I``, ``+U``), without their row kinds: what a reader
    that cannot carry kinds (a Spark stream in the table's own schema) delivers. ``-U`` and ``-D`` rows are
    dropped, so a consumer of after-images never sees a deleted row again.

    >>> t = pa.table({"id": [1, 1, 2], ROW_KIND_COLUMN: ["-U", "+U", "-D"]})
    >>> after_images(t).to_pylist()
    [{'id': 1}]
    """
    kinds = table.column(ROW_KIND_COLUMN)
    kept = table.filter(pc.is_in(kinds, pa.array(["+I", "+U"]))) if table.num_rows else table
    return kept.drop_columns([ROW_KIND_COLUMN])


def _bucket_kv(reader: SplitReader, split: Split) -> pa.Table:
    parts = list(reader.read_split_kv(split))
    return pa.concat_tables(parts) if parts else reader.read_schema.empty_table()


def _retracts_as_deletes(kv: pa.Table) -> pa.Table:
    kinds = kv.column(VALUE_KIND).to_numpy()
    retract = is_retract(kinds)
    if not retract.any():
        return kv
    kinds = kinds.copy()
    kinds[retract] = RowKind.DELETE
    i = kv.schema.get_field_index(VALUE_KIND)
    return kv.set_column(i, kv.schema.field(i), pa.array(kinds, pa.int8()))


def _set_kind(kv: pa.Table, kind: RowKind) -> pa.Table:
    i = kv.schema.get_field_index(VALUE_KIND)
    return kv.set_column(i, kv.schema.field(i), pa.array(np.full(kv.num_rows, kind, dtype=np.int8), pa.int8()))


def _with_kind(reader: SplitReader, kv: pa.Table) -> pa.Table:
    if reader.filter_expr is not None and kv.num_rows:
        kv = kv.filter(reader.filter_expr)
    kinds = kinds_to_strings(kv.column(VALUE_KIND))
    out = kv.select(reader.columns).cast(reader.out_schema)
    return out.append_column(ROW_KIND_FIELD, kinds)


__all__ = [
    "ChangeKind",
    "ChangePlanner",
    "ChangeSplit",
    "after_images",
    "change_schema",
    "drop_before_images",
    "read_change_split",
    "read_changes",
]
