"""Packing splits into Spark partitions: few tasks for many small buckets, one task per large split.

Every Spark task of a Python data source costs a round trip through a Python worker (a quarter of a second
on a busy 2-core machine), and a table of 8 partitions x 2 buckets is 16 small splits: read one task per
split, a 5M-row table took 3.5x Spark's own Parquet scan, which packs small files into a few partitions.
Splits are packed much as Spark packs files (``FilePartition``): each split costs its files' bytes plus an
open cost, and a partition holds about ``min(split target size, max(4 MiB, total / parallelism))``, so a
table spreads over every core and a large split (a big bucket, a key range of one) stays a task of its own.
Unlike Spark's next-fit, the smaller splits are dealt largest first to the least loaded of the partitions
they need, so no small partition is left over for a second wave of tasks.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Sequence

from mergetable.core.option_values import MIB
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
    large = [i for i in order if costs[i] >= limit]
    small = [i for i in order if costs[i] < limit]
    groups: list[list[Split]] = [[splits[i]] for i in large]
    if small:
        # largest first, each to the least loaded of as many partitions as the limit asks for: their loads end
        # within one split of each other (next-fit would leave a small last partition for a second wave)
        bins = -(-sum(costs[i] for i in small) // limit)
        loads = [(0, b) for b in range(bins)]
        members: list[list[Split]] = [[] for _ in range(bins)]
        for i in small:
            load, b = heapq.heappop(loads)
            members[b].append(splits[i])
            heapq.heappush(loads, (load + costs[i], b))
        groups.extend(m for m in members if m)
    return groups


__all__ = ["MIN_PARTITION_BYTES", "OPEN_COST", "default_parallelism", "pack_splits"]
