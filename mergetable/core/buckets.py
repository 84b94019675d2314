"""Where a row lives: a partition's values and a ``(partition, bucket)``, and the one order of buckets.

Every tier that groups files or rows by bucket (writing, committing, planning, compaction, change reads)
names them with these aliases and sorts them with :func:`bucket_order`, so each walks buckets in the same
order.
"""

from __future__ import annotations

from collections.abc import Sequence

Partition = tuple[str | None, ...]
"""A partition's values in their string form (as in the directory name, unescaped); None is null."""

PartitionValues = Sequence[str | None]
"""A partition's values as an argument: any sequence (a :data:`Partition`, or a list)."""

BucketId = tuple[Partition, int]
"""A bucket of a partition."""


def bucket_order(bucket_id: BucketId) -> tuple[tuple[str, ...], int]:
    """Sort key of a ``(partition, bucket)``: partitions by their values (null first), then the bucket.

    >>> sorted([(("b",), 0), ((None,), 1), (("a",), 2), (("a",), 1)], key=bucket_order)
    [((None,), 1), (('a',), 1), (('a',), 2), (('b',), 0)]
    """
    partition, bucket = bucket_id
    return tuple("" if v is None else v for v in partition), bucket


__all__ = ["BucketId", "Partition", "PartitionValues", "bucket_order"]
