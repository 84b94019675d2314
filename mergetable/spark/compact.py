"""Compaction as a Spark job: the (partition, bucket) units run as Spark tasks, the driver commits once.

>>> from mergetable.spark.compact import compact
>>> compact(spark, "s3://bucket/warehouse/orders", full=True)                      # doctest: +SKIP
>>> compact(spark, "s3://bucket/warehouse/orders", rescale_bucket=16)              # doctest: +SKIP

With ``rescale_bucket`` the job rescales instead (:meth:`mergetable.Table.rescale`): one task per partition
rewrites it into that many buckets, and the driver commits every partition as one OVERWRITE snapshot.

The driver plans on the latest snapshot (one task per bucket that needs compacting), the tasks compact
their bucket and hand back a :class:`~mergetable.CommitMessage` (as JSON), and the driver commits them
all as one COMPACT snapshot. When that commit conflicts with a concurrent one, the buckets that changed
are planned again and compacted in another round of tasks; see :meth:`mergetable.Table.compact`.

Retried and speculative tasks leave nothing behind, as in a Spark write (:mod:`mergetable.spark.staging`):
the job's files carry its tag, each task attempt leaves a marker before writing, and once the job is over
(committed or failed) and no attempt of it runs any more, the driver deletes the tagged files that neither
the job's snapshot nor the latest one references when any attempt other than those whose results it took
left a marker. pyspark is imported lazily: the module imports without it.
"""

from __future__ import annotations

import functools
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mergetable.compaction.job import BucketPlan, run_plan
from mergetable.compaction.rescale import PartitionRescale, rescale_partition
from mergetable.core.errors import MergeTableError
from mergetable.metadata.models import CommitMessage, Snapshot
from mergetable.spark.staging import (
    leave_marker,
    remove_staging,
    sweep_tagged_files,
    tagged_prefixes,
    tagged_schema,
    task_marker,
    unknown_attempts,
    wait_for_attempts,
)
from mergetable.table import Table, open_table

log = logging.getLogger(__name__)

ATTEMPTS_TIMEOUT_S = 120.0
"""How long the driver waits for killed task attempts (losing speculative copies) to end before cleaning up."""

_GROUP_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def compact(
    spark: Any,
    uri: str,
    full: bool = False,
    partitions: Sequence[Mapping[str, Any]] | None = None,
    storage_options: dict[str, Any] | None = None,
    parallelism: int | None = None,
    order_by: Sequence[str] | None = None,
    strategy: str = "order",
    rescale_bucket: int | None = None,
) -> Snapshot | None:
    """Compact the table at ``uri`` with Spark and return the COMPACT snapshot (None: nothing to do).

    ``full`` compacts every bucket into the top level (and produces the full-compaction changelog);
    otherwise each bucket gets the compaction universal compaction picks. ``partitions``: partial specs
    such as ``[{"dt": "2024-01-01"}]``. ``parallelism``: at most this many tasks (default: one per bucket).
    ``order_by``, ``strategy``: a sort compaction of an append table (see :meth:`mergetable.Table.compact`).
    ``rescale_bucket``: rescale the table (or ``partitions``) into that many buckets instead, one task per
    partition, and return the OVERWRITE snapshot (see :meth:`mergetable.Table.rescale`).
    """
    table = open_table(uri, storage_options)
    sc = spark.sparkContext
    job_id = uuid.uuid4().hex
    group = f"mergetable-compact-{job_id}"
    received: set[str] = set()  # markers of the attempts whose results the driver took

    def run_tasks(payload: list[Any], task: Any, what: str) -> list[str]:
        slices = min(len(payload), parallelism) if parallelism else len(payload)
        saved = {key: sc.getLocalProperty(key) for key in _GROUP_PROPERTIES}
        sc.setJobGroup(group, f"mergetable {what} {uri} ({len(payload)} units)")
        try:
            results = sc.parallelize(payload, slices).map(task).collect()
        except Exception as exc:  # a Py4J/Spark error wrapping the task's failure
            raise MergeTableError(f"{what} of {uri} failed in a Spark task; nothing was committed: {exc}") from exc
        finally:
            for key, value in saved.items():
                sc.setLocalProperty(key, value)
        received.update(marker for marker, _ in results)
        return [m for _, ms in results for m in ([ms] if isinstance(ms, str) else ms or [])]

    def execute(plans: Sequence[BucketPlan]) -> list[CommitMessage]:
        if not plans:
            return []
        task = functools.partial(_compact_bucket, uri, storage_options, job_id)
        return [CommitMessage.from_json(m) for m in run_tasks([p.to_json() for p in plans], task, "compact")]

    def rescale(units: Sequence[PartitionRescale]) -> list[CommitMessage]:
        task = functools.partial(_rescale_partition, uri, storage_options, job_id)
        return [CommitMessage.from_json(m) for m in run_tasks(list(units), task, "rescale")] if units else []

    snapshot: Snapshot | None = None
    try:
        if rescale_bucket is not None:
            snapshot = table.rescale(rescale_bucket, [dict(p) for p in partitions] if partitions else None, rescale)
            return snapshot
        snapshot = table.compact(
            full=full,
            partitions=[dict(p) for p in partitions] if partitions else None,
            executor=execute,
            order_by=order_by,
            strategy=strategy,
        )
        return snapshot
    finally:
        _clean_up(sc, table, job_id, group, received, snapshot)


def _clean_up(sc: Any, table: Table, job_id: str, group: str, received: set[str], snapshot: Snapshot | None) -> None:
    """Delete what attempts the driver never heard of wrote (see the module docstring), then the markers."""
    fileio = table.fileio
    if not wait_for_attempts(sc, group, ATTEMPTS_TIMEOUT_S):
        log.warning(
            "task attempts of compaction job %s still run after %.0f s; files they write later are left for "
            "remove_orphan_files",
            job_id,
            ATTEMPTS_TIMEOUT_S,
        )
    if unknown_attempts(fileio, job_id, received):
        keep: set[str] = set()
        if snapshot is not None:
            entries = [*table.delta_entries(snapshot), *table.changelog_entries(snapshot)]
            keep = {e.file.file_name for e in entries}
        latest = open_table(table.uri, table.fileio.storage_options)
        prefixes = tagged_prefixes(table.table_schema, job_id)
        swept = sweep_tagged_files(fileio, prefixes, keep, lambda: {f.file_name for _, _, f in latest.files()})
        if swept:
            log.info("compaction job %s removed %d files of attempts that lost or failed", job_id, len(swept))
    remove_staging(fileio, job_id)


def _compact_bucket(
    uri: str, storage_options: dict[str, Any] | None, job_id: str, plan_json: str
) -> tuple[str, str | None]:
    """The Spark task: compact one planned bucket; (its attempt's marker, its commit message as JSON or None)."""
    table = open_table(uri, storage_options)
    marker = task_marker()
    leave_marker(table.fileio, job_id, marker)
    schema = tagged_schema(table.table_schema, job_id)
    message = run_plan(table.fileio, schema, table.merge_function, BucketPlan.from_json(plan_json))
    return marker, None if message.is_empty else message.to_json()


def _rescale_partition(
    uri: str, storage_options: dict[str, Any] | None, job_id: str, unit: PartitionRescale
) -> tuple[str, list[str]]:
    """The Spark task of a rescale: rewrite one partition; (its attempt's marker, its messages as JSON)."""
    table = open_table(uri, storage_options)
    marker = task_marker()
    leave_marker(table.fileio, job_id, marker)
    schema = tagged_schema(table.table_schema, job_id)
    return marker, [m.to_json() for m in rescale_partition(table.fileio, schema, table.merge_function, unit)]


__all__ = ["compact"]
