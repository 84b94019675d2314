"""Rescaling a fixed-bucket key table: its partitions rewritten into another number of buckets, one commit.

Paimon changes a table's bucket count with ``ALTER TABLE ... SET ('bucket' = 'N')`` followed by an ``INSERT
OVERWRITE`` of the table or of some partitions (or its ``rescale`` procedure); here :meth:`Rescaling.rescale`
does both. Every selected partition is rewritten on its own, and inside it one source bucket at a time:

1. each source bucket's merged rows (the merge engine applied, deletion vectors respected, retracts gone) are
   read in key order and hashed into the new buckets, each target's share written as one sorted run;
2. each new bucket's runs (one per source bucket, their keys disjoint) are merged into files at the top level
   (a single run is moved there without a rewrite).

Memory holds a few row groups per source run and the rows waiting for a row group in each new bucket (at
most half of ``write-buffer-size`` in all: then they are written as smaller row groups), never a partition.
The driver commits every partition as ONE OVERWRITE snapshot that deletes the old files and adds the new ones,
marked with :data:`RESCALE_PROPERTY` so that streams (which skip overwrites unless ``streaming-read-overwrite``)
never read the rewrite as changes. Readers see either the old layout or the new one. The bucket count of
each partition is its manifest entries' ``total_buckets``; the ``bucket`` option becomes N once every partition
has N buckets. A commit whose partition was changed by another writer since the rescale read it is refused
(the rescale rewrote the old state): :class:`CommitConflictError`, nothing changed; a writer that still writes
the old count into a rescaled partition is refused at its commit (Paimon's rule: ``Try to write ... with a new
bucket num``).
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import numpy as np
import pyarrow as pa

from mergetable.commit.committer import Committer
from mergetable.commit.discard import discard_uncommitted
from mergetable.commit.maintenance import expire_after_commit
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.overwrite import Overwrite
from mergetable.commit.schemas import SchemaManager
from mergetable.commit.snapshots import SnapshotManager
from mergetable.compaction.job import partition_selector
from mergetable.core.buckets import Partition, bucket_order
from mergetable.core.errors import ArgumentError, CommitConflictError, UnsupportedError
from mergetable.core.evolution import SetOption
from mergetable.core.fileio import FileIO
from mergetable.core.hashing import bucket_of
from mergetable.core.rowkind import RowKind
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import CommitMessage, DataFileMeta, FileSource, ManifestEntry, Snapshot
from mergetable.read.changes import RESCALE_PROPERTY
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Planner, Split
from mergetable.write.rolling import RollingKvWriter


@dataclass(frozen=True)
class PartitionRescale:
    """One partition to rewrite into ``bucket`` buckets: the splits of each of its source buckets, in key
    order (planned on ``snapshot_id``). Picklable: the unit a Spark task runs."""

    partition: Partition
    bucket: int
    sources: tuple[tuple[Split, ...], ...]
    snapshot_id: int


RescaleExecutor = Callable[[Sequence[PartitionRescale]], list[CommitMessage]]
"""Runs :func:`rescale_partition` for every unit (anywhere) and returns all their messages."""


def rescale_partition(
    fileio: FileIO, schema: TableSchema, merge_function: MergeFunction, unit: PartitionRescale
) -> list[CommitMessage]:
    """Write ``unit``'s partition into ``unit.bucket`` new buckets (see the module); one message per new bucket
    that holds rows. Nothing is left behind on failure."""
    top = schema.table_options.max_levels - 1
    sources = unit.sources
    if schema.table_options.deletion_vectors_enabled:
        # A deletion-vector bucket's files are read each on its own and may overlap (an older copy of a key is only
        # marked): one after the other they are not in key order, so each section is a run of its own, merged below.
        sources = tuple(
            (dataclasses.replace(split, sections=(section,)),)
            for splits in unit.sources
            for split in splits
            for section in split.sections
        )
    direct = len(sources) == 1  # one source: each target's run is already the whole sorted bucket
    reader = SplitReader(fileio, schema, merge_function)
    runs: dict[int, list[list[DataFileMeta]]] = {}
    written: list[CommitMessage] = []
    try:
        counters = np.zeros(unit.bucket, dtype=np.int64)
        for splits in sources:
            level = top if direct else 0
            writers = [RollingKvWriter(fileio, schema, unit.partition, j, level) for j in range(unit.bucket)]
            try:
                budget = max(1, schema.table_options.write_buffer_size // 2)
                for split in splits:
                    for rows in reader.read_split(split):
                        _route(rows, schema, unit.bucket, writers, counters)
                        if sum(w.pending_bytes for w in writers) > budget:  # many new buckets: smaller row groups
                            for w in writers:
                                w.flush()
                for j, w in enumerate(writers):
                    files = w.close()
                    written.append(_message(unit, j, files))
                    if files:
                        runs.setdefault(j, []).append(files)
            except BaseException:
                for w in writers:
                    w.abort()
                raise
        if direct:
            return [m for m in written if m.new_files]
        out: list[CommitMessage] = []
        for j in sorted(runs):
            merged = _merge_runs(fileio, schema, merge_function, reader, unit, j, runs[j], top)
            out.append(_message(unit, j, merged))
        written += out
        intermediate = written[: len(written) - len(out)]  # the runs: merged, or moved up (the same file kept)
        discard_uncommitted(fileio, schema, intermediate, keep={f.file_name for m in out for f in m.new_files})
        return out
    except BaseException:
        discard_uncommitted(fileio, schema, written)
        raise


def _message(unit: PartitionRescale, bucket: int, files: Sequence[DataFileMeta]) -> CommitMessage:
    return CommitMessage(partition=unit.partition, bucket=bucket, total_buckets=unit.bucket, new_files=tuple(files))


def _route(rows: pa.Table, schema: TableSchema, n: int, writers: list[RollingKvWriter], counters: np.ndarray) -> None:
    """Hash visible ``rows`` (key order) into the ``n`` new buckets, each share appended to its bucket's run."""
    if not rows.num_rows:
        return
    keys = schema.bucket_keys
    buckets = bucket_of([rows.column(k) for k in keys], n, keys)
    order = np.argsort(buckets, kind="stable")  # stable: each share stays in key order
    sorted_buckets = buckets[order]
    bounds = np.flatnonzero(np.diff(sorted_buckets)) + 1
    for part in np.split(order, bounds):
        j = int(buckets[part[0]])
        share = rows.take(pa.array(part))
        first = int(counters[j])
        counters[j] += share.num_rows
        seq = pa.array(np.arange(first, first + share.num_rows, dtype=np.int64))
        kinds = pa.array(np.full(share.num_rows, int(RowKind.INSERT), dtype=np.int8))
        writers[j].write(share.append_column(SEQUENCE_NUMBER, seq).append_column(VALUE_KIND, kinds))


def _merge_runs(
    fileio: FileIO,
    schema: TableSchema,
    merge_function: MergeFunction,
    reader: SplitReader,
    unit: PartitionRescale,
    bucket: int,
    runs: list[list[DataFileMeta]],
    top: int,
) -> list[DataFileMeta]:
    """The new bucket's runs (disjoint keys) as files at the top level: moved when there is one run, else merged."""
    if len(runs) == 1:
        return [f.upgrade(top) for f in runs[0]]
    split = Split(unit.snapshot_id, unit.partition, bucket, (), unit.bucket)
    with RollingKvWriter(fileio, schema, unit.partition, bucket, top, FileSource.APPEND) as writer:
        for window in reader.merged_windows(split, runs):
            writer.write(window)
        return writer.close()


class RescaleTable(Protocol):
    """What :class:`Rescaling` needs of the table it is mixed into."""

    fileio: FileIO
    table_schema: TableSchema

    @property
    def merge_function(self) -> MergeFunction: ...


class Rescaling:
    """Mixin of :class:`mergetable.Table`: :meth:`rescale`."""

    def rescale(
        self,
        bucket: int,
        partitions: Sequence[Mapping[str, Any]] | None = None,
        executor: RescaleExecutor | None = None,
    ) -> Snapshot | None:
        """Rewrite the table (or ``partitions``) into ``bucket`` buckets as one atomic OVERWRITE snapshot.

        Paimon's ``ALTER TABLE ... SET ('bucket' = 'N')`` + ``INSERT OVERWRITE``: each partition's merged rows
        are hashed into the new buckets and written sorted at the top level (:mod:`mergetable.compaction.rescale`).
        ``partitions``: partial specs such as ``[{"dt": "2024-01-01"}]``, as in :meth:`compact`; only those
        partitions get ``bucket`` buckets (writes into them then need the same count: the ``bucket`` option
        becomes ``bucket`` once every partition has it). ``executor`` runs the partitions (the Spark job's tasks).

        Returns:
            The OVERWRITE snapshot; None when nothing had to be rewritten (the option may still change).

        Raises:
            ArgumentError: ``bucket`` is not a positive int, or ``partitions`` is malformed.
            UnsupportedError: An append table, or a table without fixed buckets.
            CommitConflictError: Another commit changed a selected partition meanwhile (nothing changed).

        Example:
            >>> import tempfile, pyarrow as pa, mergetable as mt
            >>> schema = pa.schema([("id", pa.int64())])
            >>> r = mt.create_table(tempfile.mkdtemp(), schema, ["id"], options={"bucket": "1"})
            >>> _ = r.write(pa.table({"id": [1, 2, 3, 4]}))
            >>> r.rescale(bucket=4).commit_kind.name, r.options["bucket"], r.read().num_rows
            ('OVERWRITE', '4', 4)
        """
        table = cast(RescaleTable, self)
        schema = table.table_schema
        check_rescale(schema, bucket)
        select = partition_selector(schema, partitions)
        snapshots = SnapshotManager(table.fileio)
        latest = snapshots.latest()
        manifests = ManifestIO(table.fileio)
        live = manifests.live_entries(latest)
        chosen = {e.partition for e in live if select((e.partition, e.bucket)) and e.total_buckets != bucket}
        snap = None
        if latest is not None and chosen:
            units = plan_rescale(manifests, schema, latest, chosen, bucket)
            snap = commit_rescale(table.fileio, schema, table.merge_function, latest, units, bucket, executor)
        if partitions is None or all(e.total_buckets == bucket for e in manifests.live_entries(snapshots.latest())):
            new = SchemaManager(table.fileio).commit_changes([SetOption("bucket", str(bucket))], allow=("bucket",))
            table.table_schema = new
        return snap


def check_rescale(schema: TableSchema, bucket: Any) -> None:
    """Refuse a rescale of ``schema``'s table into ``bucket`` buckets that cannot be done (naming why)."""
    if isinstance(bucket, bool) or not isinstance(bucket, int | np.integer) or bucket < 1:
        raise ArgumentError("bucket", f"the new number of buckets must be an int >= 1, got {bucket!r}")
    how = "create a table with the bucket you want and write this table's rows into it"
    if schema.is_append_table:
        raise UnsupportedError(f"rescale: an append table's buckets are not rescaled in place: {how}")
    if schema.table_options.bucket < 1:
        mode = "dynamic" if schema.table_options.bucket == -1 else "postpone"
        raise UnsupportedError(
            f"rescale: the table has bucket={schema.table_options.bucket} ({mode} buckets, placed by the table "
            f"itself), not a fixed count; its mode is chosen at creation: {how}"
        )


def plan_rescale(
    manifests: ManifestIO, schema: TableSchema, snapshot: Snapshot, partitions: set[Partition], bucket: int
) -> list[PartitionRescale]:
    """The units of a rescale of ``partitions`` on ``snapshot``: per partition, its source buckets' splits."""
    read_schema = schema
    if schema.table_options.deletion_vectors_enabled:  # level 0 too: the rewrite holds every committed row
        read_schema = schema.with_options({**schema.options, "deletion-vectors.merge-on-read": "true"})
    by_bucket: dict[tuple[Partition, int], list[Split]] = {}
    for split in Planner(manifests, read_schema).plan(snapshot, None):
        if split.partition in partitions:
            by_bucket.setdefault((split.partition, split.bucket), []).append(split)
    units: dict[Partition, list[tuple[Split, ...]]] = {}
    for bid in sorted(by_bucket, key=bucket_order):
        units.setdefault(bid[0], []).append(tuple(by_bucket[bid]))
    return [PartitionRescale(p, bucket, tuple(srcs), snapshot.id) for p, srcs in units.items()]


def commit_rescale(
    fileio: FileIO,
    schema: TableSchema,
    merge_function: MergeFunction,
    base: Snapshot,
    units: list[PartitionRescale],
    bucket: int,
    executor: RescaleExecutor | None,
) -> Snapshot | None:
    """Run ``units`` (here, one after the other, or with ``executor``) and commit them as one OVERWRITE."""
    manifests = ManifestIO(fileio)
    chosen = frozenset(u.partition for u in units)
    planned = _files_of(manifests.live_entries(base), chosen)
    messages: list[CommitMessage] = []
    try:
        if executor is None:
            for unit in units:
                messages += rescale_partition(fileio, schema, merge_function, unit)
        else:
            messages = executor(units)

        def unchanged(latest: Snapshot | None) -> None:
            if _files_of(manifests.live_entries(latest), chosen) != planned:
                raise CommitConflictError(
                    f"rescale: a concurrent commit changed the partitions being rescaled since snapshot {base.id}; "
                    "nothing was committed (rescale again)"
                )

        committer = Committer(fileio, schema, f"rescale-{uuid.uuid4()}")
        props = {RESCALE_PROPERTY: str(bucket)}
        snaps = committer.commit(
            messages, int(time.time() * 1000), Overwrite(partitions=chosen), props, None, unchanged
        )
    except BaseException:
        discard_uncommitted(fileio, schema, messages, protect_latest=True)
        raise
    expire_after_commit(fileio, schema)
    return snaps[-1] if snaps else None


def _files_of(entries: list[ManifestEntry], partitions: frozenset[Partition]) -> set[tuple[Partition, int, str]]:
    return {(e.partition, e.bucket, e.file.file_name) for e in entries if e.partition in partitions}


__all__ = [
    "PartitionRescale",
    "RescaleExecutor",
    "Rescaling",
    "check_rescale",
    "commit_rescale",
    "plan_rescale",
    "rescale_partition",
]
