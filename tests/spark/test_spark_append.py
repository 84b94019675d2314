"""Append tables (no primary key) through Spark: created by a write without ``primary-key``, read natively,
compacted by the Spark job, streamed as +I rows."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

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


def test_read_stream_delivers_appended_rows(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "events")
    t = mt.create_table(uri, SCHEMA)
    t.write(pa.table({"id": [1, 2], "tag": ["a", "b"]}))
    t.write(pa.table({"id": [3], "tag": ["c"]}))
    query = (
        spark.readStream.format("mergetable")
        .load(uri)
        .writeStream.format("memory")
        .queryName("append_events")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    got = spark.sql("select * from append_events").collect()
    assert sorted(r.id for r in got) == [1, 2, 3]
    kinds = {r["_row_kind"] for r in got} if "_row_kind" in got[0].asDict() else {"+I"}
    assert kinds == {"+I"}
