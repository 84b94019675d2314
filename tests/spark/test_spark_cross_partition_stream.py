"""``writeStream`` into cross-partition upsert tables: micro-batches that move keys between partitions give the table
the Python writes of the same batches, a restarted query commits a replayed batch once, tasks of one batch that
leave a key in two partitions are refused, and tasks of one batch that routed against different snapshots commit
only when nothing but a compaction came between."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from test_spark_cross_partition import (
    DDL,
    SPARK_SCHEMA,
    WRITES,
    Row,
    _batches,
    _options,
    _orphans,
    _python_table,
    _rows,
    _sorted,
    _table,
)
from test_spark_dynamic_buckets import _writes, assert_one_bucket_per_key

import mergetable as mt
from mergetable.spark.sink import batch_job, plan_stream_write
from mergetable.spark.writer import STAGING_DIR, MergeTableWriter

BATCHES = [rows for rows, overwrite in WRITES if not overwrite]  # load, moves, moves back with partial rows, moves


def _batch_file(folder: Path, n: int, rows: Sequence[Row]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"part-{n:04d}.parquet"
    pq.write_table(_table(rows), path)
    os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order


def _stream(spark: SparkSession, source: Path, checkpoint: Path, uri: str, engine: str) -> Any:
    df = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(str(source))
    opts = {"primary-key": "id", "partition-keys": "dt", **_options(engine)}
    writer = df.repartition(3).writeStream.format("mergetable").options(**opts)  # round robin: no key shuffle
    return writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start(uri)


def _drop_commit_log(checkpoint: Path, batch: int) -> None:
    """Forget that ``batch`` was committed, as a driver crash between sink commit and commit log does."""
    for name in (str(batch), f".{batch}.crc"):
        (checkpoint / "commits" / name).unlink(missing_ok=True)


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation"])
def test_micro_batches_give_the_python_table(spark: SparkSession, tmp_path: Path, engine: str) -> None:
    source, uri = tmp_path / "in", str(tmp_path / "t")
    for n, rows in enumerate(BATCHES):
        _batch_file(source, n, rows)
    query = _stream(spark, source, tmp_path / "ck", uri, engine)
    query.awaitTermination(300)
    assert query.exception() is None
    t = mt.open_table(uri)  # created by the first micro-batch
    expected = _python_table(str(tmp_path / "py"), engine, [(rows, False) for rows in BATCHES])
    assert t.table_schema.is_cross_partition and _writes(t) == len(BATCHES)
    got = _sorted(t)
    assert got["id"].to_pylist() == sorted(set(got["id"].to_pylist()))  # no key live in two partitions
    assert got.equals(_sorted(expected))
    assert_one_bucket_per_key(t)


def test_a_restarted_query_commits_a_replayed_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    for n, rows in enumerate(BATCHES[:2]):
        _batch_file(source, n, rows)
    query = _stream(spark, source, checkpoint, uri, "aggregation")  # sums w: a batch applied twice would show
    query.awaitTermination(300)
    assert query.exception() is None and _writes(mt.open_table(uri)) == 2
    _drop_commit_log(checkpoint, 1)  # committed to the table, not to the checkpoint: replayed on restart
    _batch_file(source, 2, BATCHES[2])
    query = _stream(spark, source, checkpoint, uri, "aggregation")
    query.awaitTermination(300)
    assert query.exception() is None
    t = mt.open_table(uri)
    expected = _python_table(str(tmp_path / "py"), "aggregation", [(rows, False) for rows in BATCHES[:3]])
    assert _writes(t) == 3 and _sorted(t).equals(_sorted(expected))
    assert_one_bucket_per_key(t)


def test_a_batch_whose_tasks_disagree_fails_the_query(spark: SparkSession, tmp_path: Path) -> None:
    source, uri = tmp_path / "in", str(tmp_path / "t")
    before = _sorted(_python_table(uri, "deduplicate", [(_rows(range(6), 0, "a"), False)]))
    _batch_file(source, 0, [(1, "d2", "x", 1), (1, "d0", "y", 1)])  # round robin: one row per task
    query = _stream(spark, source, tmp_path / "ck", uri, "deduplicate")
    with pytest.raises(Exception, match=r"writeStream.*1 key\(s\).*foreach_batch"):
        query.awaitTermination(300)
    t = mt.open_table(uri)
    assert _writes(t) == 1 and _sorted(t).equals(before)
    assert _orphans(t, tmp_path / "t") == set()
    assert not (tmp_path / "t" / STAGING_DIR).exists()


def test_tasks_of_a_batch_that_saw_different_snapshots(tmp_path: Path) -> None:
    """Each task of a micro-batch routes against the latest snapshot when it starts: a write between two tasks
    refuses the batch (the first task routed against keys that moved since), a compaction between them does not."""
    uri = str(tmp_path / "t")
    t = _python_table(uri, "deduplicate", [(_rows(range(6), 0, "a"), False)])
    job = plan_stream_write({"path": uri}, SPARK_SCHEMA, False)
    writer = MergeTableWriter(batch_job(job, "query", "run", 0))
    first = writer.write_task(_batches([(1, "d2", "x", 1)]), 0, 0, 0)
    t.write(_table([(1, "d0", "meanwhile", 1)]))  # moves key 1 between the batch's tasks
    second = writer.write_task(_batches([(2, "d0", "y", 2)]), 1, 0, 1)
    assert first.routing is not None and second.routing is not None
    assert (first.routing.snapshot_id, second.routing.snapshot_id) == (1, 2)
    before = _sorted(t)
    with pytest.raises(mt.BucketAssignmentConflictError, match=r"snapshot 1, and snapshot 2"):
        writer.commit([first, second])
    writer.abort([first, second])
    t = mt.open_table(uri)
    assert _writes(t) == 2 and _sorted(t).equals(before)
    assert _orphans(t, tmp_path / "t") == set()

    writer = MergeTableWriter(batch_job(job, "query", "run", 1))
    first = writer.write_task(_batches([(1, "d2", "x", 1)]), 0, 0, 0)
    assert t.compact(full=True) is not None  # snapshot 3: every key stays where it was
    second = writer.write_task(_batches([(2, "d0", "y", 2)]), 1, 0, 1)
    assert first.routing is not None and second.routing is not None
    assert (first.routing.snapshot_id, second.routing.snapshot_id) == (2, 3)
    writer.commit([first, second])
    expected = _python_table(str(tmp_path / "py"), "deduplicate", [(_rows(range(6), 0, "a"), False)])
    for rows in ([(1, "d0", "meanwhile", 1)], [(1, "d2", "x", 1), (2, "d0", "y", 2)]):
        expected.write(_table(rows))
    t = mt.open_table(uri)
    assert _writes(t) == 3 and _sorted(t).equals(_sorted(expected))
    assert_one_bucket_per_key(t)
