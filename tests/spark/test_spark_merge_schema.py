"""Spark writes that evolve the schema: ``mergeSchema`` / ``write.merge-schema``, batch and streaming; rollbackTo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.core.errors import SchemaError
from mergetable.spark import MergeTable

pytestmark = pytest.mark.spark


def _table(uri: str) -> mt.Table:
    t = mt.create_table(uri, pa.schema([("id", pa.int64()), ("v", pa.int32())]), ["id"])
    t.write(pa.table({"id": [1], "v": pa.array([1], pa.int32())}))
    return t


def test_merge_schema_adds_columns_and_widens_types(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    df = spark.createDataFrame([(2, 20, "b")], "id long, v long, note string")
    with pytest.raises(Exception, match=r"column '(v|note)'"):  # without the option: refused by name
        df.write.format("mergetable").mode("append").save(table_uri)
    assert mt.open_table(table_uri).table_schema.id == 0
    df.write.format("mergetable").mode("append").option("mergeSchema", "true").save(table_uri)
    t = mt.open_table(table_uri)
    assert t.schema.field("v").type == pa.int64() and t.schema.names == ["id", "v", "note"]
    assert t.read().to_pylist() == [{"id": 1, "v": 1, "note": None}, {"id": 2, "v": 20, "note": "b"}]


def test_paimon_merge_schema_adds_columns_and_widens_only_when_asked(spark: Any, table_uri: str) -> None:
    _table(table_uri)
    df = spark.createDataFrame([(2, 20, 1.5)], "id long, v int, Extra double")
    df.write.format("mergetable").mode("append").option("write.merge-schema", "true").save(table_uri)
    t = mt.open_table(table_uri)
    assert t.schema.names == ["id", "v", "Extra"] and t.schema.field("v").type == pa.int32()
    wide = spark.createDataFrame([(3, 2**40, 2.5)], "id long, v long, extra double")  # case-insensitive match
    with pytest.raises(Exception, match="'v'"):
        wide.write.format("mergetable").mode("append").option("write.merge-schema", "true").save(table_uri)
    wide.write.format("mergetable").mode("append").option("write.merge-schema", "true").option(
        "write.merge-schema.type-widening", "true"
    ).save(table_uri)
    t = mt.open_table(table_uri)
    assert t.schema.names == ["id", "v", "Extra"] and t.schema.field("v").type == pa.int64()
    assert t.read().column("v").to_pylist() == [1, 20, 2**40]
    with pytest.raises(Exception, match="explicit-cast"):
        wide.write.format("mergetable").mode("append").option("write.merge-schema", "true").option(
            "write.merge-schema.explicit-cast", "true"
        ).save(table_uri)


def test_streaming_sink_merges_the_schema(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _table(uri)
    source = tmp_path / "in"
    source.mkdir()
    pq.write_table(pa.table({"id": [5, 6], "v": [50, 60], "tag": ["x", "y"]}), source / "part-0.parquet")
    df = spark.readStream.schema("id long, v long, tag string").parquet(str(source))
    q = (
        df.writeStream.format("mergetable")
        .option("mergeSchema", "true")
        .option("checkpointLocation", str(tmp_path / "cp"))
        .trigger(availableNow=True)
        .start(uri)
    )
    q.awaitTermination()
    rows = mt.open_table(uri).read().to_pylist()
    assert rows == [{"id": 1, "v": 1, "tag": None}, {"id": 5, "v": 50, "tag": "x"}, {"id": 6, "v": 60, "tag": "y"}]


def test_merge_schema_never_narrows_or_changes_keys(spark: Any, table_uri: str) -> None:
    _table(table_uri)
    df = spark.createDataFrame([(2, "text")], "id long, v string")
    with pytest.raises(Exception, match="'v'"):
        df.write.format("mergetable").mode("append").option("mergeSchema", "true").save(table_uri)
    assert mt.open_table(table_uri).table_schema.id == 0
    assert issubclass(SchemaError, Exception)


def test_rollback_to_a_snapshot_or_tag(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    t.create_tag("one")
    t.write(pa.table({"id": [2], "v": pa.array([2], pa.int32())}))
    t.write(pa.table({"id": [3], "v": pa.array([3], pa.int32())}))
    table = MergeTable.forPath(spark, table_uri)
    assert table.rollbackTo(2).removed_snapshots == [3]
    assert sorted(r["id"] for r in mt.open_table(table_uri).read().to_pylist()) == [1, 2]
    assert table.rollbackTo("one").snapshot_id == 1
    assert mt.open_table(table_uri).read().column("id").to_pylist() == [1]


def test_spark_time_travel_reads_the_schema_the_snapshot_was_committed_with(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    t.alter.rename_column("v", "value")
    t.alter.add_columns(("note", pa.string()))
    t.write(pa.table({"id": [2], "value": pa.array([2], pa.int32()), "note": ["b"]}))
    old = spark.read.format("mergetable").option("snapshot-id", "1").load(table_uri)
    assert old.columns == ["id", "v"] and [tuple(r) for r in old.collect()] == [(1, 1)]
    assert [tuple(r) for r in old.where("v = 1").select("v").collect()] == [(1,)]
    now = spark.read.format("mergetable").load(table_uri)
    assert now.columns == ["id", "value", "note"]
    assert sorted(tuple(r) for r in now.collect()) == [(1, 1, None), (2, 2, "b")]
    assert spark.read.format("mergetable").option("versionAsOf", "2").load(table_uri).columns == ["id", "value", "note"]
