"""Packing splits into Spark partitions: few tasks for many small buckets, one task per large split.

Every Spark task of a Python data source costs a round trip through a Python worker (a quarter of a second
on a busy 2-core machine), and a table of 8 partitions x 2 buckets is 16 small splits: read one task per
split, a 5M-row table took 3.5x Spark's own Parquet scan, which packs small files into a few partitions.
Splits are packed the way Spark packs files (``FilePartition``): each split costs its files' bytes plus an
open cost; a partition takes splits, largest first, up to ``min(split target size, max(4 MiB, total /
parallelism))``, so a table spreads over every core and a large split (a big bucket, a key range of one)
stays a task of its own.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from mergetable.core.options import MIB
from mergetable.read.scan import Split

#: what opening one split is worth in bytes when packing (Spark's files.openCostInBytes is 4 MiB; a split
#: of an already open table is cheaper)
OPEN_COST = 1 * MIB
#: the least a partition is packed to (below it, more tasks cost more than they parallelize)
MIN_PARTITION_BYTES = 4 * MIB


def default_parallelism() -> int:
    """The cores a read should spread over: this machine's (Spark's planning runs on the driver)."""
    return max(1, os.cpu_count() or 1)


def pack_splits(splits: Sequence[Split], target_size: int, parallelism: int | None = None) -> list[list[Split]]:
    """``splits`` grouped into Spark partitions (see the module docstring); every split in exactly one group.

    Example:
        >>> pack_splits([], 128 * MIB)
        []
    """
    if not splits:
        return []
    costs = [s.size + OPEN_COST for s in splits]
    cores = parallelism or default_parallelism()
    limit = min(max(target_size, 1), max(MIN_PARTITION_BYTES, sum(costs) // cores))
    order = sorted(range(len(splits)), key=lambda i: (-costs[i], i))
    groups: list[list[Split]] = []
    current: list[Split] = []
    size = 0
    for i in order:
        if current and size + costs[i] > limit:
            groups.append(current)
            current, size = [], 0
        current.append(splits[i])
        size += costs[i]
    groups.append(current)
    return groups


__all__ = ["MIN_PARTITION_BYTES", "OPEN_COST", "default_parallelism", "pack_splits"]
