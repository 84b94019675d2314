"""Append tables (no primary key) through Spark: created by a write without ``primary-key``, read natively,
compacted by the Spark job, streamed as +I rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

import mergetable as mt
import mergetable.spark as mts
from mergetable.spark.compact import compact

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("id", pa.int64()), ("tag", pa.string())])


def test_a_write_without_primary_key_creates_an_append_table(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    df = spark.createDataFrame([(1, "a"), (1, "a"), (2, "b")], "id long, tag string")
    df.write.format("mergetable").mode("append").save(uri)
    df.write.format("mergetable").mode("append").save(uri)
    t = mt.open_table(uri)
    assert t.primary_key == () and t.options["bucket"] == "-1"
    assert sorted(t.read().column("id").to_pylist()) == [1, 1, 1, 1, 2, 2]  # duplicates kept
    for path in Path(uri).rglob("data-*.parquet"):
        assert pq.read_schema(path).names == ["id", "tag"]  # plain Parquet: no system columns
    rows = spark.read.format("mergetable").load(uri).where("id = 1").collect()
    assert len(rows) == 4
    assert mts.read(spark, uri, filter=[("tag", "=", "b")]).count() == 2  # Spark's own Parquet reader
    mts.write(spark.createDataFrame([(3, "c")], "id long, tag string"), uri)  # no shuffle for bucket -1
    assert mt.open_table(uri).count() == 7


def test_the_spark_compaction_job_compacts_an_append_table(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    for i in range(6):
        t.write(pa.table({"id": [i, i + 100], "tag": ["x", "y"]}))
    before = t.read().column("id").to_pylist()
    snap = compact(spark, uri)
    assert snap is not None and snap.commit_kind.name == "COMPACT"
    t = mt.open_table(uri)
    assert len(t.files()) == 1
    assert t.read().column("id").to_pylist() == before
    t.write(pa.table({"id": [50, -1], "tag": ["z", "z"]}))
    sorted_snap = compact(spark, uri, order_by=["id"], strategy="order")  # a sort compaction in Spark tasks
    assert sorted_snap is not None
    assert mt.open_table(uri).read().column("id").to_pylist() == sorted([*before, 50, -1])


def test_read_stream_delivers_appended_rows(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA)
    t.write(pa.table({"id": [1, 2], "tag": ["a", "b"]}))
    t.write(pa.table({"id": [3], "tag": ["c"]}))
    got: list[dict[str, object]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        got.extend(r.asDict() for r in df.collect())

    _drain(spark, uri, tmp_path / "checkpoint", collect, {"read.changelog": "true"})
    assert sorted(r["id"] for r in got) == [1, 2, 3]  # type: ignore[type-var]
    assert {r["_row_kind"] for r in got} == {"+I"}


def test_write_stream_appends_each_batch_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "events")
    source.mkdir()
    for n in range(2):
        pq.write_table(pa.table({"id": [n, n], "tag": ["x", "x"]}, schema=SCHEMA), source / f"part-{n}.parquet")

    def run() -> None:
        df = spark.readStream.schema("id long, tag string").option("maxFilesPerTrigger", 1).parquet(str(source))
        query = (
            df.writeStream.format("mergetable")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start(uri)
        )
        query.awaitTermination()
        assert query.exception() is None

    run()
    t = mt.open_table(uri)
    assert t.primary_key == () and sorted(t.read().column("id").to_pylist()) == [0, 0, 1, 1]
    (checkpoint / "commits" / "1").unlink()  # a crash between the sink's commit and the commit log
    crc = checkpoint / "commits" / ".1.crc"
    if crc.exists():
        crc.unlink()
    run()  # batch 1 replayed: already committed, skipped
    assert sorted(mt.open_table(uri).read().column("id").to_pylist()) == [0, 0, 1, 1]


def test_spark_reads_apply_an_append_tables_deletion_vectors(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA, options={"deletion-vectors.enabled": "true", "write-only": "true"})
    t.write(pa.table({"id": list(range(10)), "tag": ["x"] * 10}))
    t.write(pa.table({"id": [10, 11], "tag": ["y", "y"]}))
    t.delete([("id", "in", [1, 4, 11])])
    t.write(pa.table({"id": [4, 4], "tag": ["x", "x"]}), row_kind=["-D", "+I"])  # removes nothing stored: cancels
    assert t.deletion_vectors()
    expected = sorted(i for i in range(12) if i not in (1, 4, 11))
    native = mts.read(spark, uri)
    assert native.inputFiles()  # Spark's Parquet reader, the marked rows dropped in Spark
    assert sorted(r.id for r in native.collect()) == expected
    assert native.count() == len(expected)
    assert sorted(r.id for r in mts.read(spark, uri, filter=[("tag", "=", "y")]).collect()) == [10]
    assert sorted(r.id for r in spark.read.format("mergetable").load(uri).collect()) == expected


def test_scattered_marks_are_dropped_by_a_join_and_few_runs_by_a_filter(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA, options={"deletion-vectors.enabled": "true", "write-only": "true"})
    t.write(pa.table({"id": list(range(200)), "tag": ["x"] * 200}))
    t.delete([("id", "in", list(range(0, 100, 2)))])  # 50 runs of one row: more than a filter takes
    t.delete([("id", ">=", 150)])  # one run
    expected = [i for i in range(150) if i >= 100 or i % 2]
    assert sorted(r.id for r in mts.read(spark, uri).collect()) == expected
    assert mts.read(spark, uri).count() == len(expected)
    t.compact(full=True, progress=False)
    t.delete([("id", "<", 120)])  # one run of the compacted file
    assert sorted(r.id for r in mts.read(spark, uri).collect()) == list(range(120, 150))


def test_spark_merge_table_refuses_an_append_table(spark: SparkSession, tmp_path: Path) -> None:
    from mergetable.spark.delta import MergeTable

    uri = str(tmp_path / "events")
    mt.create_table(uri, SCHEMA).write(pa.table({"id": [1], "tag": ["a"]}))
    table = MergeTable.forPath(spark, uri)
    with pytest.raises(mt.UnsupportedError, match="needs a primary key"):
        table.delete("id = 1")
    with pytest.raises(mt.UnsupportedError, match="needs a primary key"):
        table.merge(spark.createDataFrame([(1, "b")], "id long, tag string"), "target.id = source.id")
    assert mt.open_table(uri).count() == 1


def test_read_stream_keeps_each_buckets_rows_in_commit_order(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA, options={"bucket": "2", "bucket-key": "id", "write-only": "true"})
    commits = [[9, 4, 7, 1, 3], [8, 2, 6, 5, 0], [14, 11, 13, 10, 12], [19, 16, 18, 15, 17]]
    got: list[int] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        got.extend(r.id for r in df.collect())

    def run() -> None:
        _drain(spark, uri, tmp_path / "checkpoint", collect)

    for ids in commits[:2]:
        t.write(pa.table({"id": ids, "tag": ["x"] * len(ids)}, schema=SCHEMA))
    run()  # the snapshot at the start, read whole
    for ids in commits[2:]:
        t.write(pa.table({"id": ids, "tag": ["y"] * len(ids)}, schema=SCHEMA))
    run()  # then the appends since, commit by commit
    bucket_of = {i: next(s.bucket for s in t.plan(filter=[("id", "=", i)])) for ids in commits for i in ids}
    assert set(bucket_of.values()) == {0, 1}
    assert sorted(got) == sorted(i for ids in commits for i in ids)  # every row once
    for b in (0, 1):
        assert [i for i in got if bucket_of[i] == b] == [i for ids in commits for i in ids if bucket_of[i] == b]


def test_the_spark_job_z_orders_an_append_table(spark: SparkSession, tmp_path: Path) -> None:
    import numpy as np

    uri = str(tmp_path / "xy")
    rng = np.random.default_rng(7)
    data = pa.table({"x": rng.integers(0, 1000, 40_000), "y": rng.integers(0, 1000, 40_000)})
    t = mt.create_table(uri, data.schema, options={"target-file-size": "32 kb", "write-only": "true"})
    for i in range(4):
        t.write(data.slice(i * 10_000, 10_000))
    box = [[("x", ">=", 100), ("x", "<", 200), ("y", ">=", 300), ("y", "<", 400)]]

    def files_read(table: mt.Table) -> int:
        return len({f.file_name for s in table.plan(filter=box) for f in s.files})

    before, expected = files_read(t), sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"]))
    snap = compact(spark, uri, order_by=["x", "y"], strategy="zorder")
    assert snap is not None and snap.commit_kind.name == "COMPACT"
    t = mt.open_table(uri)
    assert files_read(t) * 2 <= before, (before, files_read(t))
    assert sorted(t.read(filter=box).to_pylist(), key=lambda r: (r["x"], r["y"])) == expected
    assert t.count() == data.num_rows


@pytest.mark.parametrize("api", ["format", "helper"])
def test_spark_writes_hash_bucketed_append_rows_as_python_does(spark: SparkSession, tmp_path: Path, api: str) -> None:
    uri = str(tmp_path / "events")
    ddl = "id long, tag string, dt string"
    opts = {"bucket": "3", "bucket-key": "id", "partition-keys": "dt"}
    first = spark.createDataFrame([(i, f"t{i}", f"d{i % 2}") for i in range(40)], ddl).repartition(4)
    if api == "format":
        first.write.format("mergetable").mode("append").options(**opts).save(uri)
    else:
        mts.write(first, uri, options=opts)
    t = mt.open_table(uri)
    assert t.primary_key == () and t.options["bucket"] == "3"
    python = mt.create_table(str(tmp_path / "python"), t.schema, partition_keys=["dt"], options=t.options)
    python.write(t.read())

    def placement(table: mt.Table) -> dict[int, tuple[tuple[str | None, ...], int]]:
        out = {}
        for partition, bucket, f in table.files():
            path = table.path_factory.data_file(partition, bucket, f.file_name)
            for i in pq.read_table(path, columns=["id"])["id"].to_pylist():
                out[i] = (partition, bucket)
        return out

    assert placement(t) == placement(python)  # the same hash: Spark and Python agree on every row's bucket
    assert len({b for _, b in placement(t).values()}) == 3
    # a dynamic partition overwrite replaces only the partitions the data holds
    again = spark.createDataFrame([(100, "x", "d0"), (100, "x", "d0")], ddl)
    again.write.format("mergetable").mode("overwrite").option("partitionOverwriteMode", "dynamic").save(uri)
    got = sorted((r["id"], r["dt"]) for r in mt.open_table(uri).read().to_pylist())
    assert got == sorted([(100, "d0"), (100, "d0"), *((i, "d1") for i in range(1, 40, 2))])


def test_spark_writes_of_minus_d_rows_into_an_append_table_are_refused_by_column(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA, options={"write-only": "true"})
    t.write(pa.table({"id": [1, 2], "tag": ["a", "b"]}, schema=SCHEMA))
    ddl = "id long, tag string, _row_kind string"
    cancelled = spark.createDataFrame([(4, "d", "+I"), (4, "d", "-D"), (5, "e", "+I")], ddl).coalesce(1)
    cancelled.write.format("mergetable").mode("append").save(uri)  # a -D of a row of the same task cancels it
    assert sorted((r["id"], r["tag"]) for r in mt.open_table(uri).read().to_pylist()) == [(1, "a"), (2, "b"), (5, "e")]
    removing = spark.createDataFrame([(1, "a", "-D"), (6, "f", "+I")], ddl)
    with pytest.raises(Exception, match=r"column '_row_kind': -D rows .* append table are not written through Spark"):
        removing.write.format("mergetable").mode("append").save(uri)
    update = spark.createDataFrame([(2, "b", "-U"), (2, "c", "+U")], ddl)
    with pytest.raises(Exception, match=r"-U/\+U rows need a primary key"):
        update.write.format("mergetable").mode("append").save(uri)
    t = mt.open_table(uri)
    assert sorted((r["id"], r["tag"]) for r in t.read().to_pylist()) == [(1, "a"), (2, "b"), (5, "e")]
    assert {p.name for p in Path(uri).rglob("data-*.parquet")} == {f.file_name for _, _, f in t.files()}


def _drain(
    spark: SparkSession,
    uri: str,
    checkpoint: Path,
    collect: Callable[[DataFrame, int], None],
    options: dict[str, str] | None = None,
) -> None:
    """Run a ``readStream`` of ``uri`` into ``collect`` once (``availableNow``), from ``checkpoint``."""
    query = (
        spark.readStream.format("mergetable")
        .options(**(options or {}))
        .load(uri)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert query.exception() is None
