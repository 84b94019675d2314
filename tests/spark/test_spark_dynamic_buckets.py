"""Spark writes into dynamic-bucket tables (``bucket`` = -1, the default of new key tables): both write APIs give
the table the Python writer gives, no key is ever live in two buckets, retried attempts commit once, streaming
writes, and reads split by bucket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

import mergetable as mt
import mergetable.spark as mts
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.dynamic_buckets import HASH_INDEX, key_hashes
from mergetable.metadata.models import CommitKind
from mergetable.spark.dynamic import open_buckets, take_channels
from mergetable.spark.writer import STAGING_DIR, MergeTableWriter, plan_write

PSCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
DDL = "dt string, id long, v string"
TARGET = "10"


def _writes(t: mt.Table) -> int:
    """How many snapshots are not compactions (each write job commits one)."""
    return sum(s.commit_kind is not CommitKind.COMPACT for s in SnapshotManager(t.fileio).snapshots())


def _rows(ids: Any, v: str) -> list[tuple[str, int, str]]:
    return [(f"d{i % 2}", i, f"{v}{i}") for i in ids]


def _frame(spark: SparkSession, rows: list[tuple[str, int, str]], tasks: int = 4) -> DataFrame:
    """Rows spread round-robin over ``tasks`` Spark partitions, so each task sees keys of every bucket."""
    return spark.createDataFrame(rows, DDL).repartition(tasks)


def keys_by_bucket(t: mt.Table) -> dict[tuple[tuple[str | None, ...], int], set[Any]]:
    """(partition, bucket) → the keys its live data files hold (any row kind), read bucket by bucket."""
    out: dict[tuple[tuple[str | None, ...], int], set[Any]] = {}
    for e in t._manifests.live_entries(t.latest_snapshot()):
        path = t.path_factory.data_file(e.partition, e.bucket, e.file.file_name)
        out.setdefault((e.partition, e.bucket), set()).update(pq.read_table(path, columns=["id"])["id"].to_pylist())
    return out


def assert_one_bucket_per_key(t: mt.Table) -> None:
    """No key is live in two buckets of its partition, and each bucket's HASH index lists its keys."""
    where: dict[Any, int] = {}
    index = {
        (e.partition, e.bucket): e.index_file
        for e in IndexManifestIO(t.fileio).entries(t.latest_snapshot())
        if e.index_file.index_type == HASH_INDEX
    }
    for (partition, bucket), ids in keys_by_bucket(t).items():
        for k in ids:
            assert where.setdefault((partition, k), bucket) == bucket, f"key {k} of {partition} in two buckets"
        hashes = key_hashes([pa.array(sorted(ids), pa.int64())], ["id"])
        data = t.fileio.read_bytes(t.path_factory.index_file(index[(partition, bucket)].file_name))
        listed = np.frombuffer(data, dtype=">i4").astype(np.int32)
        assert set(hashes.tolist()) <= set(listed.tolist())


def _python_table(uri: str, writes: list[tuple[list[tuple[str, int, str]], bool]]) -> pa.Table:
    t = mt.create_table(uri, PSCHEMA, ["dt", "id"], ["dt"], options={"dynamic-bucket.target-row-num": TARGET})
    for rows, overwrite in writes:
        data = pa.table({"dt": [r[0] for r in rows], "id": [r[1] for r in rows], "v": [r[2] for r in rows]})
        t.write(data.cast(PSCHEMA), overwrite=overwrite)
    return t.read().sort_by([("dt", "ascending"), ("id", "ascending")])


WRITES = [
    (_rows(range(60), "a"), False),  # load
    (_rows([*range(0, 60, 3), *range(60, 90)], "b"), False),  # upsert: a third existing, new keys
    (_rows(range(100, 140), "c"), False),
    (_rows(range(30, 50), "d"), True),  # overwrite (dynamic partition overwrite by default: both partitions)
    (_rows(range(40, 70), "e"), False),
]


@pytest.mark.parametrize("api", ["helper", "format"])
def test_spark_writes_give_the_python_table(spark: SparkSession, tmp_path: Path, api: str) -> None:
    expected = _python_table(str(tmp_path / "py"), WRITES)
    uri = str(tmp_path / "spark")
    opts = {"primary-key": "dt,id", "partition-keys": "dt", "dynamic-bucket.target-row-num": TARGET}
    for rows, overwrite in WRITES:
        df, mode = _frame(spark, rows), "overwrite" if overwrite else "append"
        if api == "helper":
            mts.write(df, uri, mode, options=opts, num_partitions=3)
        else:
            df.write.format("mergetable").mode(mode).options(**opts).save(uri)
        t = mt.open_table(uri)
        assert t.table_schema.is_dynamic_bucket
        assert_one_bucket_per_key(t)
    t = mt.open_table(uri)
    assert t.read().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(expected)
    assert _writes(t) == len(WRITES)  # each job one snapshot
    buckets = keys_by_bucket(t)
    assert len(buckets) >= 4
    if api == "helper":  # exact placement: no bucket holds more keys than the target
        assert max(len(ids) for ids in buckets.values()) <= int(TARGET)


def test_a_key_in_several_tasks_gets_one_bucket(spark: SparkSession, tmp_path: Path) -> None:
    """Every task of a plain ``df.write`` sees every key (4 copies, one per task): the key still gets one bucket,
    and the aggregation engine sums all copies."""
    uri = str(tmp_path / "t")
    rows = [(f"d{i % 2}", i, "1") for i in range(40)] * 4
    df = spark.createDataFrame(rows, DDL).selectExpr("dt", "id", "CAST(v AS long) AS v").repartition(4)
    opts = {
        "primary-key": "dt,id",
        "partition-keys": "dt",
        "merge-engine": "aggregation",
        "fields.v.aggregate-function": "sum",
        "dynamic-bucket.target-row-num": "5",
        "dynamic-bucket.initial-buckets": "3",
    }
    for _ in range(2):
        df.write.format("mergetable").mode("append").options(**opts).save(uri)
        assert_one_bucket_per_key(mt.open_table(uri))
    more = spark.createDataFrame([(f"d{i % 2}", i, 1) for i in range(30, 70)] * 2, "dt string, id long, v long")
    df2 = more.repartition(4)
    df2.write.format("mergetable").mode("append").options(**opts).save(uri)
    t = mt.open_table(uri)
    assert_one_bucket_per_key(t)
    totals = {r["id"]: r["v"] for r in t.read().to_pylist()}
    assert totals == {i: (8 if i < 40 else 0) + (2 if i >= 30 else 0) for i in range(70)}
    assert len(keys_by_bucket(t)) >= 6  # 3 channels per partition, and full buckets make way for new ones


def test_spark_read_plans_a_task_per_bucket_or_finer(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    opts = {"primary-key": "dt,id", "partition-keys": "dt", "dynamic-bucket.target-row-num": TARGET}
    mts.write(_frame(spark, _rows(range(80), "a")), uri, options=opts, num_partitions=2)
    mts.write(_frame(spark, _rows(range(0, 80, 2), "b")), uri, options=opts, num_partitions=2)
    buckets = keys_by_bucket(mt.open_table(uri))
    assert len(buckets) >= 8
    bucket_of = {(p[0], k): (p, b) for (p, b), ids in buckets.items() for k in ids}
    expected = sorted((i, ("b" if i % 2 == 0 else "a") + str(i)) for i in range(80))
    assert sorted((r.id, r.v) for r in spark.read.format("mergetable").load(uri).collect()) == expected
    # small buckets are packed into few tasks; with a tiny split size every bucket is a task of its own
    df = spark.read.format("mergetable").option("split.target-size", "1").load(uri)
    assert df.rdd.getNumPartitions() >= len(buckets)
    rows = df.select(F.spark_partition_id().alias("task"), "dt", "id", "v").collect()
    per_task: dict[int, set[Any]] = {}
    for r in rows:
        per_task.setdefault(r.task, set()).add(bucket_of[(r.dt, r.id)])
    assert all(len(b) == 1 for b in per_task.values())  # no task reads two buckets
    assert sorted((r.id, r.v) for r in rows) == expected


def test_streaming_write_into_a_dynamic_table(spark: SparkSession, tmp_path: Path) -> None:
    source, uri = tmp_path / "in", str(tmp_path / "t")
    source.mkdir()
    batches = [list(range(30)), list(range(20, 50)), list(range(40, 70))]
    for n, ids in enumerate(batches):
        table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([n + 1] * len(ids), pa.int64())})
        pq.write_table(table, source / f"part-{n:04d}.parquet")
    df = spark.readStream.schema("id long, v long").option("maxFilesPerTrigger", 1).parquet(str(source))
    query = (
        df.repartition(3)
        .writeStream.format("mergetable")
        .options(
            **{
                "primary-key": "id",
                "merge-engine": "aggregation",
                "fields.v.aggregate-function": "sum",
                "dynamic-bucket.target-row-num": "8",
            }
        )
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start(uri)
    )
    query.awaitTermination(120)
    t = mt.open_table(uri)
    assert t.table_schema.is_dynamic_bucket and _writes(t) == 3
    expected: dict[int, int] = {}
    for n, ids in enumerate(batches):
        for i in ids:
            expected[i] = expected.get(i, 0) + n + 1
    assert {r["id"]: r["v"] for r in t.read().to_pylist()} == expected
    assert_one_bucket_per_key(t)
    assert len(keys_by_bucket(t)) >= 3  # each micro-batch placed its new keys against the previous one's index


def test_the_spark_compaction_job_keeps_a_dynamic_tables_buckets(spark: SparkSession, tmp_path: Path) -> None:
    from mergetable.spark.compact import compact

    uri = str(tmp_path / "t")
    opts = {"primary-key": "dt,id", "partition-keys": "dt", "dynamic-bucket.target-row-num": TARGET}
    opts["write-only"] = "true"
    mts.write(_frame(spark, _rows(range(60), "a")), uri, options=opts)
    mts.write(_frame(spark, _rows(range(0, 80, 3), "b")), uri, options=opts)
    before = mt.open_table(uri)
    expected, buckets = before.read().sort_by([("dt", "ascending"), ("id", "ascending")]), keys_by_bucket(before)
    snap = compact(spark, uri, full=True)
    assert snap is not None and snap.commit_kind is CommitKind.COMPACT
    t = mt.open_table(uri)
    assert t.read().sort_by([("dt", "ascending"), ("id", "ascending")]).equals(expected)
    assert {k: set(v) for k, v in keys_by_bucket(t).items()} == {k: set(v) for k, v in buckets.items()}
    assert_one_bucket_per_key(t)  # every key still in its bucket and its bucket's HASH index
    mts.write(_frame(spark, _rows(range(50, 70), "c")), uri, options=opts)  # upserts after it find their bucket
    assert_one_bucket_per_key(mt.open_table(uri))
    assert mt.open_table(uri).count() == len({*range(60), *range(0, 80, 3), *range(50, 70)})


# -- exactly once: the writer protocol driven by hand -----------------------------------------------------
DF_SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])


def _batches(ids: range, tag: str) -> list[pa.RecordBatch]:
    return [pa.record_batch({"id": pa.array(list(ids), pa.int64()), "v": [f"{tag}{i}" for i in ids]})]


@pytest.mark.parametrize("channels", [None, 2])
def test_retried_and_speculative_attempts_place_keys_alike_and_commit_once(
    tmp_path: Path, channels: int | None
) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(
        uri, pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"], options={"dynamic-bucket.target-row-num": "6"}
    )
    t.write(pa.table({"id": pa.array(range(8), pa.int64()), "v": ["old"] * 8}))
    options = {"path": uri}
    if channels is not None:
        options["dynamic-bucket.assigner-channels"] = str(channels)
    writer = MergeTableWriter(plan_write(options, DF_SCHEMA, False))
    meanwhile = [100] if channels is None else []
    if meanwhile:  # committed after the plan: not in the tasks' base index
        t.write(pa.table({"id": pa.array(meanwhile, pa.int64()), "v": ["meanwhile"]}))
    if channels is None:  # rows anywhere: tasks overlap in keys
        parts = [range(20), range(10, 30), range(25, 40)]
    else:  # rows shuffled by channel (key hash mod 2), as mergetable.spark.write does
        ids = np.arange(40)
        group = key_hashes([pa.array(ids)], ["id"]).view(np.uint32) % 2
        parts = [ids[group == 0].tolist(), ids[group == 1].tolist()]

    def task(p: int, attempt: int, tid: int) -> Any:
        return writer.write_task(_batches(parts[p], f"t{p}-"), p, attempt, tid)  # type: ignore[arg-type]

    first = [task(p, 0, 10 + p) for p in range(len(parts))]
    second = [task(p, 1, 20 + p) for p in range(len(parts))]  # a retry, or a speculative copy, of each task
    for a, b in zip(first, second, strict=True):
        assert {(m.partition, m.bucket) for m in a.messages} == {(m.partition, m.bucket) for m in b.messages}
        assert [m.new_index_files[0].row_count if m.new_index_files else 0 for m in a.messages] == [
            m.new_index_files[0].row_count if m.new_index_files else 0 for m in b.messages
        ]
    task(0, 2, 30)  # killed: its message (and so its HASH files) never reaches the driver, found by the job's tag
    winners = [second[0], *first[1:]]
    writer.commit([*winners, first[0], *second[1:]])
    t = mt.open_table(uri)
    assert _writes(t) == 2 + len(meanwhile)
    assert sorted(t.read()["id"].to_pylist()) == [*range(40), *meanwhile]
    assert_one_bucket_per_key(t)
    indexes = IndexManifestIO(t.fileio)
    referenced = {e.index_file.file_name for s in SnapshotManager(t.fileio).snapshots() for e in indexes.entries(s)}
    assert {p.name for p in (tmp_path / "t" / "index").iterdir()} == referenced  # losers' and killed HASH files gone
    assert not (tmp_path / "t" / STAGING_DIR).exists()
    if channels is not None:  # exact placement: no bucket beyond the target
        assert max(len(ids) for ids in keys_by_bucket(t).values()) <= 6


def test_open_buckets_and_the_channels_option() -> None:
    counts = {0: 6, 1: 2, 2: 6}
    new = np.array([10, 11, 12, 13], np.int32)
    assert open_buckets(new, counts, 6, 2, -1).tolist() == [4, 1, 4, 1]  # bucket 0 and 2 full: the next free one
    assert open_buckets(new, counts, 6, 2, 3).tolist() == [2, 1, 0, 1]  # no free id below 3: spread by hash
    assert take_channels({"Dynamic-Bucket.Assigner-Channels": "3"})[1] == 3
    with pytest.raises(mt.OptionsError, match=r"dynamic-bucket\.assigner-channels"):
        take_channels({"dynamic-bucket.assigner-channels": "0"})


def test_more_channels_than_max_buckets_keep_within_them(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    options = {
        "path": uri,
        "primary-key": "id",
        "dynamic-bucket.max-buckets": "2",
        "dynamic-bucket.target-row-num": "3",
    }
    writer = MergeTableWriter(plan_write({**options, "dynamic-bucket.assigner-channels": "4"}, DF_SCHEMA, False))
    ids = np.arange(30)
    channel = key_hashes([pa.array(ids)], ["id"]).view(np.uint32) % 2
    tasks = [writer.write_task(_batches(ids[channel == c].tolist(), "x"), c, 0, c) for c in range(2)]  # type: ignore[arg-type]
    writer.commit(tasks)
    t = mt.open_table(uri)
    assert sorted(t.read()["id"].to_pylist()) == list(range(30))
    assert {b for _, b in keys_by_bucket(t)} == {0, 1}
    assert_one_bucket_per_key(t)
