"""Spark writes into cross-partition upsert tables (a primary key without the partition key): ``mergetable.spark.write``
and ``df.write.format`` give the table the Python writer gives for every merge engine as keys move between
partitions, retried attempts route and place alike and commit once, a commit after a concurrent write is refused,
tasks of one ``df.write`` that leave a key in two partitions are refused, and partition overwrites are refused naming
what to use. Streaming writes: test_spark_cross_partition_stream.py."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from test_spark_dynamic_buckets import _writes, assert_one_bucket_per_key, keys_by_bucket

import mergetable as mt
import mergetable.spark as mts
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.dynamic_buckets import key_hashes
from mergetable.spark.writer import STAGING_DIR, MergeTableWriter, TaskCommit, plan_write

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.string()), ("w", pa.int64())])
DDL = "id long, dt string, v string, w long"
SPARK_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("dt", T.StringType()),
        T.StructField("v", T.StringType()),
        T.StructField("w", T.LongType()),
    ]
)
TARGET = "8"
Row = tuple[int, str, str | None, int | None]
ENGINES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update"},
    "first-row": {"merge-engine": "first-row"},
    "aggregation": {"merge-engine": "aggregation", "fields.w.aggregate-function": "sum"},
}


def _options(engine: str) -> dict[str, str]:
    return {
        "dynamic-bucket.target-row-num": TARGET,
        "dynamic-partition-overwrite": "false",  # overwrite=True replaces the whole table, as a Spark overwrite
        **ENGINES[engine],
    }


def _rows(ids: Any, shift: int, v: str, nulls: bool = False) -> list[Row]:
    """One row per key: partition ``d{(id + shift) % 3}``; with ``nulls`` every other row leaves v and w null."""
    return [
        (i, f"d{(i + shift) % 3}", None if nulls and i % 2 else f"{v}{i}", None if nulls and i % 2 else i) for i in ids
    ]


WRITES: list[tuple[list[Row], bool]] = [
    (_rows(range(60), 0, "a"), False),  # load
    (_rows([*range(0, 60, 2), *range(60, 90)], 1, "b"), False),  # half the keys name another partition; new keys
    (_rows(range(30, 75), 2, "c", nulls=True), False),  # moves again, some back; partial rows
    (_rows(range(20, 50), 0, "d"), True),  # a whole-table overwrite
    (_rows(range(40, 70), 1, "e"), False),  # moves after the overwrite
]


def _table(rows: Sequence[Row]) -> pa.Table:
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(SCHEMA.names)}, schema=SCHEMA)


def _sorted(t: mt.Table) -> pa.Table:
    return t.read().sort_by("id")


def _python_table(uri: str, engine: str, writes: Sequence[tuple[Sequence[Row], bool]]) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], ["dt"], options=_options(engine))
    for rows, overwrite in writes:
        t.write(_table(rows), overwrite=overwrite)
    return t


@pytest.mark.parametrize(
    ("engine", "api"),
    [
        *((e, "helper") for e in ENGINES),
        ("deduplicate", "format"),
        ("partial-update", "format"),
        ("first-row", "format"),
    ],
)
def test_spark_write_gives_the_python_table(spark: SparkSession, tmp_path: Path, engine: str, api: str) -> None:
    expected = _python_table(str(tmp_path / "py"), engine, WRITES)
    uri = str(tmp_path / "spark")
    opts = {"primary-key": "id", "partition-keys": "dt", **_options(engine)}
    for n, (rows, overwrite) in enumerate(WRITES, 1):
        df = spark.createDataFrame(rows, DDL).repartition(4)  # round robin: each input task holds every partition
        mode = "overwrite" if overwrite else "append"
        if api == "helper":
            mts.write(df, uri, mode, options=opts, num_partitions=3)
        else:  # one row a key: tasks never disagree
            df.write.format("mergetable").mode(mode).options(**opts).save(uri)
        t = mt.open_table(uri)
        assert t.table_schema.is_cross_partition
        py = mt.open_table(str(tmp_path / "py"))
        got = _sorted(t)
        assert got["id"].to_pylist() == sorted(set(got["id"].to_pylist()))  # no key live in two partitions
        assert_one_bucket_per_key(t)
        if n == len(WRITES):
            assert got.equals(_sorted(py))
    assert _sorted(mt.open_table(uri)).equals(_sorted(expected))
    t = mt.open_table(uri)
    assert _writes(t) == _writes(expected)  # each job one snapshot (none when first-row drops every row)
    if api == "helper":
        assert max(len(ids) for ids in keys_by_bucket(t).values()) <= int(TARGET)  # exact placement per channel


def test_keys_move_as_each_engine_says(spark: SparkSession, tmp_path: Path) -> None:
    """A key written into another partition: deduplicate moves it, partial-update merges it where it lives,
    first-row keeps the old row; a retract (naming another partition) removes the key where it lives."""
    got = {}
    for engine in ("deduplicate", "partial-update", "first-row"):
        uri = str(tmp_path / engine)
        opts = {"primary-key": "id", "partition-keys": "dt", **_options(engine)}
        if engine == "partial-update":
            opts["partial-update.remove-record-on-delete"] = "true"
        mts.write(spark.createDataFrame([(1, "a", "x", 1), (2, "a", "y", 2)], DDL), uri, options=opts)
        mts.write(spark.createDataFrame([(1, "b", None, 5)], DDL), uri, options=opts)
        if engine != "first-row":  # which takes no retracts
            kinds = spark.createDataFrame([(2, "z", None, None, "-D")], f"{DDL}, _row_kind string")
            mts.write(kinds, uri, options=opts)
        got[engine] = mt.open_table(uri).read().sort_by("id").to_pylist()
    assert got["deduplicate"] == [{"id": 1, "dt": "b", "v": None, "w": 5}]
    assert got["partial-update"] == [{"id": 1, "dt": "a", "v": "x", "w": 5}]
    assert got["first-row"] == [{"id": 1, "dt": "a", "v": "x", "w": 1}, {"id": 2, "dt": "a", "v": "y", "w": 2}]


def _batches(rows: Sequence[Row]) -> list[pa.RecordBatch]:
    return _table(rows).to_batches()


def _by_channel(rows: list[Row], channels: int) -> list[list[Row]]:
    """The rows as ``mergetable.spark.write`` shuffles them: by key hash mod ``channels`` alone."""
    group = key_hashes([pa.array([r[0] for r in rows], pa.int64())], ["id"]).view(np.uint32) % channels
    return [[r for r, g in zip(rows, group.tolist(), strict=True) if g == c] for c in range(channels)]


def _plan(uri: str, channels: int | None = 2) -> MergeTableWriter:
    options = {"path": uri}
    if channels is not None:
        options["dynamic-bucket.assigner-channels"] = str(channels)
    return MergeTableWriter(plan_write(options, SPARK_SCHEMA, False))


def _shape(task: TaskCommit) -> list[tuple[Any, int, int, int]]:
    return sorted(
        (m.partition, m.bucket, sum(f.row_count for f in m.new_files), sum(i.row_count for i in m.new_index_files))
        for m in task.messages
    )


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_retried_attempts_route_alike_and_commit_once(tmp_path: Path, engine: str) -> None:
    uri = str(tmp_path / "t")
    base, rows = _rows(range(40), 0, "a"), _rows(range(0, 60, 2), 1, "b")
    t = _python_table(uri, engine, [(base, False)])
    writer = _plan(uri)
    parts = _by_channel(rows, 2)

    def task(p: int, attempt: int, tid: int) -> TaskCommit:
        return writer.write_task(_batches(parts[p]), p, attempt, tid)

    first = [task(p, 0, 10 + p) for p in range(2)]
    t.compact(full=True, progress=False)  # a compaction meanwhile moves no key: the commit still lands
    second = [task(p, 1, 20 + p) for p in range(2)]  # a retry, or a speculative copy, of each task
    for a, b in zip(first, second, strict=True):
        assert _shape(a) == _shape(b)
        assert a.routing is not None and a.routing.routed_rows and a.routing.hashes is None
        assert a.routing == b.routing
    task(0, 2, 30)  # killed: its message never reaches the driver, its files are found by the job's tag
    writer.commit([second[0], first[1], first[0], second[1]])
    t = mt.open_table(uri)
    assert _writes(t) == 2
    expected = _python_table(str(tmp_path / "py"), engine, [(base, False), (rows, False)])
    assert _sorted(t).equals(_sorted(expected))
    assert_one_bucket_per_key(t)
    indexes = IndexManifestIO(t.fileio)
    referenced = {e.index_file.file_name for s in SnapshotManager(t.fileio).snapshots() for e in indexes.entries(s)}
    assert {p.name for p in (tmp_path / "t" / "index").iterdir()} <= referenced  # no loser's HASH file left
    assert _orphans(t, tmp_path / "t") == set()  # no file of a losing or killed attempt left
    assert not (tmp_path / "t" / STAGING_DIR).exists()


def _orphans(t: mt.Table, root: Path) -> set[str]:
    """Data files under ``root`` that no snapshot added."""
    added = {e.file.file_name for s in SnapshotManager(t.fileio).snapshots() for e in t.delta_entries(s)}
    return {p.name for p in root.rglob("*.parquet")} - added


def test_a_commit_after_a_concurrent_write_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = _python_table(uri, "deduplicate", [(_rows(range(10), 0, "a"), False)])
    writer = _plan(uri)
    parts = _by_channel(_rows(range(5), 1, "s"), 2)
    tasks = [writer.write_task(_batches(parts[p]), p, 0, p) for p in range(2)]
    t.write(_table(_rows([3], 2, "meanwhile")))  # moves key 3 after the Spark job read the keys
    before = _sorted(t)
    with pytest.raises(mt.BucketAssignmentConflictError, match="cross-partition upsert table"):
        writer.commit(tasks)
    writer.abort(tasks)
    t = mt.open_table(uri)
    assert _writes(t) == 2 and _sorted(t).equals(before)
    assert _orphans(t, tmp_path / "t") == set()
    assert not (tmp_path / "t" / STAGING_DIR).exists()


def _unshuffled(
    uri: str, tasks: Sequence[Sequence[Row]], attempt: int = 0
) -> tuple[MergeTableWriter, list[TaskCommit]]:
    """A ``df.write.format`` job whose tasks got ``tasks``' rows (not shuffled by key), each run once."""
    writer = _plan(uri, channels=None)
    return writer, [writer.write_task(_batches(rows), p, attempt, p) for p, rows in enumerate(tasks)]


def test_unshuffled_tasks_that_leave_a_key_in_two_partitions_are_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = _python_table(uri, "deduplicate", [(_rows(range(10), 0, "a"), False)])  # key 1 in d1, key 2 in d2
    before = _sorted(t)
    moves = [[(1, "d2", "x", 1), (20, "d0", "n", 20)], [(1, "d0", "y", 1), (20, "d1", "m", 20)]]
    in_place = [[(1, "d2", "x", 1)], [(1, "d1", "y", 1)]]  # one moves key 1, the other updates it where it was
    for tasks in (moves, in_place):
        writer, commits = _unshuffled(uri, tasks)
        with pytest.raises(mt.UnsupportedError, match=r"2 key\(s\)|1 key\(s\)") as err:
            writer.commit(commits)
        assert "mergetable.spark.write" in str(err.value) and "repartition" in str(err.value)
        writer.abort(commits)
        t = mt.open_table(uri)
        assert _writes(t) == 1 and _sorted(t).equals(before)
        assert _orphans(t, tmp_path / "t") == set()
        assert not (tmp_path / "t" / STAGING_DIR).exists()


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_unshuffled_tasks_that_agree_commit_and_retry_alike(tmp_path: Path, engine: str) -> None:
    """Both tasks move key 1 to d0, update key 2 in place (partial-update: both merge where it lives), and
    insert key 30 into d1; a retried attempt reports and writes what the first did."""
    uri = str(tmp_path / "t")
    base = _rows(range(10), 0, "a")
    t = _python_table(uri, engine, [(base, False)])
    rows: list[Row] = [(1, "d0", "x", 1), (2, "d2", "x", 2), (30, "d1", "x", 30)]
    tasks = [rows, rows[::-1]]
    writer, first = _unshuffled(uri, tasks)
    second = [writer.write_task(_batches(rows), p, 1, 10 + p) for p, rows in enumerate(tasks)]
    for a, b in zip(first, second, strict=True):
        assert _shape(a) == _shape(b)
        assert a.routing is not None and b.routing is not None
        assert a.routing.hashes is not None and b.routing.hashes is not None
        assert a.routing.hashes.tolist() == b.routing.hashes.tolist() and len(a.routing.hashes) == 3
    writer.commit([first[0], second[1], second[0], first[1]])
    t = mt.open_table(uri)
    expected = _python_table(str(tmp_path / "py"), engine, [(base, False), (tasks[0], False)])
    assert _writes(t) == 2 and _sorted(t).equals(_sorted(expected))
    assert_one_bucket_per_key(t)
    assert _orphans(t, tmp_path / "t") == set()


def test_partition_overwrites_are_refused(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = _python_table(uri, "deduplicate", [(_rows([1], 0, "a"), False)])
    before = _sorted(t)
    df = spark.createDataFrame(_rows([1, 2], 1, "b"), DDL)
    with pytest.raises(Exception, match="partition overwrite"):
        mts.write(df, uri, "overwrite", options={"partitionOverwriteMode": "dynamic"})
    with pytest.raises(Exception, match="partition overwrite"):
        mts.write(df, uri, "overwrite", options={"replaceWhere": "dt = 'd1'"})
    with pytest.raises(Exception, match="partition overwrite"):
        df.write.format("mergetable").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(uri)
    assert _sorted(mt.open_table(uri)).equals(before)


def test_foreach_batch_writes_each_micro_batch_once(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _python_table(uri, "deduplicate", [(_rows(range(6), 0, "a"), False)])
    write_batch = mts.foreach_batch(uri, "app")
    batch = spark.createDataFrame(_rows(range(3, 9), 1, "b"), DDL).repartition(3)
    write_batch(batch, 0)
    write_batch(batch, 0)  # replayed after a failure: skipped
    expected = _python_table(str(tmp_path / "py"), "deduplicate", [(_rows(range(6), 0, "a"), False)])
    expected.write(_table(_rows(range(3, 9), 1, "b")))
    t = mt.open_table(uri)
    assert _writes(t) == 2
    assert _sorted(t).equals(_sorted(expected))


def test_df_write_whose_tasks_disagree_is_refused_through_spark(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = _python_table(uri, "deduplicate", [(_rows(range(6), 0, "a"), False)])
    before = _sorted(t)
    rows = spark.sparkContext.parallelize([(1, "d2", "x", 1), (1, "d0", "y", 1)], 2)  # one row per task
    with pytest.raises(Exception, match=r"cross-partition upsert table: 1 key\(s\).*mergetable\.spark\.write"):
        spark.createDataFrame(rows, DDL).write.format("mergetable").mode("append").save(uri)
    t = mt.open_table(uri)
    assert _writes(t) == 1 and _sorted(t).equals(before)
    assert _orphans(t, tmp_path / "t") == set()
    assert not (tmp_path / "t" / STAGING_DIR).exists()
    mts.write(spark.createDataFrame(rows, DDL), uri)  # shuffled by key: one task routes both rows, in some order
    got = mt.open_table(uri).read().filter(pc.field("id") == 1).to_pylist()
    assert len(got) == 1 and got[0]["dt"] in ("d0", "d2")
