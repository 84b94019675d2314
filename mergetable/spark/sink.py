"""Streaming writes: ``df.writeStream.format("mergetable").option("checkpointLocation", …).start(uri)``.

Exactly once
------------
Every micro-batch is one commit, made with the query's **commit user** ``spark-stream-<query id>`` and the
**batch id** as commit identifier, and recorded as application transaction (app id = commit user,
version = batch id; see :mod:`mergetable.commit.txn`). Spark keeps the query id in the checkpoint, so it
is the same after a restart (and new when the checkpoint is deleted, which restarts the batch ids). A
batch that Spark replays after a driver crash (committed to the table, but not yet to the checkpoint's
commit log) finds its version already committed: its files are deleted and nothing is written twice.

Within a batch the protocol of the batch writer applies (:mod:`mergetable.spark.writer`): every task
attempt writes files named after the batch's job, and the commit deletes the files of attempts that lost.
Tasks learn the query id, the run id and the batch id from Spark's task-local properties; the driver side
learns them back from the task messages.

A micro-batch comes after the previous one's commit, so its tasks do not use the snapshot the query was planned
against: each task attempt places a dynamic-bucket table's keys, and routes a cross-partition table's keys,
against the latest snapshot when it starts, and the commit checks the batch against the snapshots its tasks
saw (:mod:`mergetable.spark.dynamic`, :mod:`mergetable.spark.cross_partition`).

Output modes: ``append`` (rows are upserts, or changes with an ``_row_kind`` column / ``row-kind-column``
option / the table's ``rowkind.field``). PySpark's Python data sources cannot take ``update`` mode (Spark
rejects it before the sink is called) and ``complete`` is refused: use
:func:`mergetable.spark.foreach_batch` for both.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from mergetable.core.errors import OptionsError, UnsupportedError
from mergetable.core.option_map import OptionMap
from mergetable.core.options import POSTPONE_BUCKET
from mergetable.core.txn import Txn
from mergetable.core.write_options import TXN_APP_ID, TXN_VERSION
from mergetable.spark.writer import MergeTableWriter, TaskCommit, WriteJob, plan_write

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
RUN_ID_PROPERTY = "spark.jobGroup.id"  # the run id: Spark names each micro-batch's job group after it
STREAM_ONLY_KEYS = frozenset({"checkpointlocation", "queryname", "outputmode"})


def stream_commit_user(query_id: str) -> str:
    """The commit user (and transaction application id) of a streaming query."""
    return f"spark-stream-{query_id}"


@dataclass
class StreamTaskCommit(TaskCommit):
    """A task message of one micro-batch, naming the query, run and batch the task belonged to."""

    query_id: str = ""
    run_id: str = ""
    batch_id: int = -1


def plan_stream_write(options: dict[str, str], schema: StructType, overwrite: bool) -> WriteJob:
    """Validate a streaming write (append output mode only) and plan it like a batch write."""
    if overwrite:
        raise UnsupportedError(
            "outputMode 'complete' is not supported by the mergetable sink: use 'append' (with an _row_kind "
            "column for changes), or foreachBatch(mergetable.spark.foreach_batch(...)) for other output modes"
        )
    table_options = OptionMap.of(options).without(*STREAM_ONLY_KEYS)
    for key in (TXN_APP_ID, TXN_VERSION):
        if key in table_options:
            raise OptionsError(key, "is a batch write option: a streaming query is exactly-once by itself")
    return plan_write(dict(table_options), schema, overwrite=False)


def batch_job(job: WriteJob, query_id: str, run_id: str, batch_id: int) -> WriteJob:
    """``job`` narrowed to one micro-batch of one run: its own file names, the query's user and the batch id."""
    user = stream_commit_user(query_id)
    job_id = hashlib.sha256(f"{query_id}/{run_id}/{batch_id}".encode()).hexdigest()[:32]
    schema = job.schema
    if schema.table_options.bucket == POSTPONE_BUCKET:  # a stream's rows are postponed, as Paimon's are
        schema = schema.with_options({**schema.options, "postpone.batch-write-fixed-bucket": "false"})
    return dataclasses.replace(
        job, job_id=job_id, user=user, identifier=batch_id, txn=Txn(user, batch_id), schema=schema, index_latest=True
    )


class MergeTableStreamWriter(DataSourceStreamArrowWriter):
    """The streaming sink of one micro-batch (Spark plans a writer per batch, on each side)."""

    def __init__(self, job: WriteJob) -> None:
        self.job = job

    # -- tasks (executors) ------------------------------------------------------------------------
    def write(self, iterator: Iterator[pa.RecordBatch]) -> StreamTaskCommit:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        props = {k: ctx.getLocalProperty(k) if ctx is not None else None for k in _PROPERTIES}
        missing = [k for k, v in props.items() if not v]
        if ctx is None or missing:
            raise UnsupportedError(f"the streaming sink runs only inside a streaming query (no {missing} in the task)")
        query_id, run_id, batch = str(props[QUERY_ID_PROPERTY]), str(props[RUN_ID_PROPERTY]), props[BATCH_ID_PROPERTY]
        job = batch_job(self.job, query_id, run_id, int(str(batch)))
        task = MergeTableWriter(job).write_task(iterator, ctx.partitionId(), ctx.attemptNumber(), ctx.taskAttemptId())
        fields = {f.name: getattr(task, f.name) for f in dataclasses.fields(task)}  # the routing report among them
        return StreamTaskCommit(**fields, query_id=query_id, run_id=run_id, batch_id=job.identifier)

    # -- driver -----------------------------------------------------------------------------------
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        writer = self._batch_writer(messages, batchId)
        if writer is not None:
            writer.commit(messages)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        writer = self._batch_writer(messages, batchId)
        if writer is not None:  # without any task message the batch's files are left to remove_orphan_files
            writer.abort(messages)

    def _batch_writer(self, messages: Sequence[WriterCommitMessage | None], batch_id: int) -> MergeTableWriter | None:
        tasks = [m for m in messages if isinstance(m, StreamTaskCommit)]
        if not tasks:
            return None
        runs = {(t.query_id, t.run_id, t.batch_id) for t in tasks}
        if len(runs) != 1 or tasks[0].batch_id != batch_id:
            raise UnsupportedError(f"task messages of batch {batch_id} come from several batches or runs: {runs}")
        return MergeTableWriter(batch_job(self.job, tasks[0].query_id, tasks[0].run_id, batch_id))


_PROPERTIES = (QUERY_ID_PROPERTY, RUN_ID_PROPERTY, BATCH_ID_PROPERTY)


__all__ = [
    "MergeTableStreamWriter",
    "StreamTaskCommit",
    "batch_job",
    "plan_stream_write",
    "stream_commit_user",
]
