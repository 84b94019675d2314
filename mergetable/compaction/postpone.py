"""Moving a postpone table's staged rows into fixed buckets (Paimon's postpone bucket compaction).

Rows written into a ``bucket = -2`` table without a batch bucket assignment wait in each partition's
``bucket-postpone`` directory (:mod:`mergetable.commit.postpone`), invisible to reads. A compaction (the
dedicated job, the CLI, the Spark job, or the compaction after a write) moves them: each postponed file, oldest
first, is split by the hash of its keys into the partition's buckets and written there as level-0 files that
keep every record as it was (its row kind, partial columns and committed sequence number). The partition's
bucket count is the one its files already have; a partition compacted for the first time gets
``postpone.default-bucket-num`` buckets, or with ``postpone.target-row-num-per-bucket`` one bucket per that
many staged rows. Because the sequence numbers are kept, the merge engine then merges the moved records with
what the buckets hold in commit order, whichever came first. One COMPACT snapshot, marked with
:data:`~mergetable.read.incremental.POSTPONE_PROPERTY`, deletes the staged files and adds the moved ones; a
stream delivers those records then (they were not visible before).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from mergetable.commit.committer import Committer
from mergetable.commit.discard import discard_uncommitted
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.postpone import known_bucket_counts
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import BucketId, Partition, bucket_order
from mergetable.core.fileio import FileIO
from mergetable.core.hashing import bucket_of
from mergetable.core.options import POSTPONE_BUCKET, TableOptions
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction
from mergetable.merge.base import drop_write_mask
from mergetable.metadata.models import CommitMessage, DataFileMeta, ManifestEntry, Snapshot
from mergetable.read.incremental import POSTPONE_PROPERTY
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split
from mergetable.write.files import write_kv_files


def first_bucket_count(opts: TableOptions, staged_rows: int) -> int:
    """The bucket count a partition gets when its postponed rows are first moved.

    >>> opts = TableOptions.from_map({"bucket": "-2", "postpone.target-row-num-per-bucket": "1000"})
    >>> first_bucket_count(opts, 2500), first_bucket_count(TableOptions.from_map({"bucket": "-2"}), 2500)
    (3, 1)
    """
    target = opts.postpone_target_row_num_per_bucket
    if target is None:
        return opts.postpone_default_bucket_num
    return max(1, math.ceil(staged_rows / target))


def move_postponed(
    fileio: FileIO,
    schema: TableSchema,
    merge_function: MergeFunction,
    select: Callable[[BucketId], bool] = lambda b: True,
) -> Snapshot | None:
    """Move the postponed rows of the selected partitions into their buckets as one COMPACT snapshot (see the
    module); None when none are staged. A concurrent move of the same files makes it fail with
    :class:`~mergetable.core.errors.CommitConflictError`, leaving the table unchanged."""
    if schema.table_options.bucket != POSTPONE_BUCKET:
        return None
    latest = SnapshotManager(fileio).latest()
    live = ManifestIO(fileio).live_entries(latest)
    staged: dict[Partition, list[ManifestEntry]] = {}
    for e in live:
        if e.bucket == POSTPONE_BUCKET and select((e.partition, e.bucket)):
            staged.setdefault(e.partition, []).append(e)
    if latest is None or not staged:
        return None
    known = known_bucket_counts(live)
    reader = SplitReader(fileio, schema, merge_function)
    messages: list[CommitMessage] = []
    try:
        for partition in sorted(staged, key=lambda p: bucket_order((p, 0))):
            entries = sorted(staged[partition], key=lambda e: e.file.min_sequence_number)  # commit order
            n = known.get(partition) or first_bucket_count(schema.table_options, sum(e.file.row_count for e in entries))
            for e in entries:
                split = Split(latest.id, partition, POSTPONE_BUCKET, (), POSTPONE_BUCKET)
                kv = drop_write_mask(reader.read_file(split, e.file, None))  # committed sequence numbers
                for bucket, rows in _by_bucket(kv, schema, n):
                    files = write_kv_files(fileio, schema, partition, bucket, rows, 0, write_cols=e.file.write_cols)
                    messages.append(_message(partition, bucket, n, files))
            messages.append(
                CommitMessage(
                    partition=partition,
                    bucket=POSTPONE_BUCKET,
                    total_buckets=POSTPONE_BUCKET,
                    compact_before=tuple(e.file for e in entries),
                )
            )
        committer = Committer(fileio, schema, f"postpone-{uuid.uuid4()}")
        snaps = committer.commit(messages, int(time.time() * 1000), None, {POSTPONE_PROPERTY: "true"})
    except BaseException:
        discard_uncommitted(fileio, schema, messages, protect_latest=True)
        raise
    return snaps[-1] if snaps else None


def _message(partition: Partition, bucket: int, total: int, files: list[DataFileMeta]) -> CommitMessage:
    return CommitMessage(partition=partition, bucket=bucket, total_buckets=total, compact_after=tuple(files))


def _by_bucket(kv: pa.Table, schema: TableSchema, n: int) -> list[tuple[int, pa.Table]]:
    """The records of one postponed file (key order) by their bucket among ``n``, each share in key order."""
    if not kv.num_rows:
        return []
    keys = schema.bucket_keys
    buckets = bucket_of([kv.column(k) for k in keys], n, keys) if n > 1 else np.zeros(kv.num_rows, np.int32)
    order = np.argsort(buckets, kind="stable")
    bounds = np.flatnonzero(np.diff(buckets[order])) + 1
    return [(int(buckets[part[0]]), kv.take(pa.array(part))) for part in np.split(order, bounds)]


__all__ = ["first_bucket_count", "move_postponed"]
