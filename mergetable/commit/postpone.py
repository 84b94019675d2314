"""Postpone bucket mode (``bucket`` = -2, Paimon's): where a write puts its rows, and the buckets of a partition.

A write that is not a batch write, or any write with ``postpone.batch-write-fixed-bucket`` = false, stages its
rows in the partition's ``bucket-postpone`` directory (bucket -2 in the manifests, ``totalBuckets`` -2): they
are invisible to reads until a compaction (:mod:`mergetable.compaction.postpone`) moves them into the
partition's fixed buckets. A batch write with the flag (the default) hashes its rows straight into those fixed
buckets: a partition that has buckets keeps its count (the ``totalBuckets`` of its files), a new one gets
``postpone.default-bucket-num``.
"""

from __future__ import annotations

from collections.abc import Callable

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import Partition
from mergetable.core.fileio import FileIO
from mergetable.core.options import POSTPONE_BUCKET
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import ManifestEntry


def known_bucket_counts(entries: list[ManifestEntry]) -> dict[Partition, int]:
    """The bucket count of each partition that has fixed buckets (postponed files do not count)."""
    return {e.partition: e.total_buckets for e in entries if e.bucket != POSTPONE_BUCKET}


def batch_bucket_counts(fileio: FileIO, schema: TableSchema) -> Callable[[Partition], int] | None:
    """For a batch write into a postpone table with ``postpone.batch-write-fixed-bucket``: each partition's
    bucket count (read from the latest snapshot once); None otherwise (the rows are postponed, or the table
    has fixed buckets of its own)."""
    opts = schema.table_options
    if opts.bucket != POSTPONE_BUCKET or not opts.postpone_batch_write_fixed_bucket:
        return None
    known: dict[Partition, int] | None = None
    default = opts.postpone_default_bucket_num

    def count(partition: Partition) -> int:
        nonlocal known
        if known is None:
            latest = SnapshotManager(fileio).latest()
            known = known_bucket_counts(ManifestIO(fileio).live_entries(latest))
        return known.get(partition, default)

    return count


__all__ = ["batch_bucket_counts", "known_bucket_counts"]
