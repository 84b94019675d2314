"""Compaction as a Spark job: the (partition, bucket) units run as Spark tasks, the driver commits once.

>>> from mergetable.spark.compact import compact
>>> compact(spark, "s3://bucket/warehouse/orders", full=True)                      # doctest: +SKIP

The driver plans on the latest snapshot (one task per bucket that needs compacting), the tasks compact
their bucket and hand back a :class:`~mergetable.CommitMessage` (as JSON), and the driver commits them
all as one COMPACT snapshot. When that commit conflicts with a concurrent one, the buckets that changed
are planned again and compacted in another round of tasks; see :meth:`mergetable.Table.compact`.
pyspark is imported lazily: the module imports without it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from mergetable.compaction.job import BucketPlan, run_plan
from mergetable.core.errors import MergeTableError
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.table import open_table


def compact(
    spark: Any,
    uri: str,
    full: bool = False,
    partitions: Sequence[Mapping[str, Any]] | None = None,
    storage_options: dict[str, Any] | None = None,
    parallelism: int | None = None,
) -> Snapshot | None:
    """Compact the table at ``uri`` with Spark and return the COMPACT snapshot (None: nothing to do).

    ``full`` compacts every bucket into the top level (and produces the full-compaction changelog);
    otherwise each bucket gets the compaction universal compaction picks. ``partitions``: partial specs
    such as ``[{"dt": "2024-01-01"}]``. ``parallelism``: at most this many tasks (default: one per bucket).
    """
    table = open_table(uri, storage_options)
    sc = spark.sparkContext

    def execute(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        if not plans:
            return []
        payload = [p.to_json() for p in plans]
        slices = min(len(payload), parallelism) if parallelism else len(payload)
        sc.setJobDescription(f"mergetable compact {uri} ({len(payload)} buckets)")
        task = functools.partial(_compact_bucket, uri, storage_options)
        try:
            results = sc.parallelize(payload, slices).map(task).collect()
        except Exception as exc:  # a Py4J/Spark error wrapping the task's failure
            raise MergeTableError(
                f"compaction of {uri} failed in a Spark task; nothing was committed (files written by tasks "
                f"that finished are left for remove_orphan_files): {exc}"
            ) from exc
        return [CommitMessage.from_json(r) for r in results if r is not None]

    return table.compact(full=full, partitions=[dict(p) for p in partitions] if partitions else None, executor=execute)


def _compact_bucket(uri: str, storage_options: dict[str, Any] | None, plan_json: str) -> str | None:
    """The Spark task: compact one planned bucket, return its commit message as JSON (None: no change)."""
    table = open_table(uri, storage_options)
    message = run_plan(table.fileio, table.table_schema, table.merge_function, BucketPlan.from_json(plan_json))
    return None if message.is_empty else message.to_json()


__all__ = ["compact"]
