"""Deletion-vector tables in Spark: the data source drops the marked rows in its Python reader, and
``mergetable.spark.read`` reads every file with Spark's Parquet reader and drops them inside Spark."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import mergetable as mt
import mergetable.spark as mts
import mergetable.spark.vectors as mts_vectors

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.int64()), pa.field("s", pa.string())])


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids), "s": [f"s{i % 3}" for i in ids]}, schema=SCHEMA)


def _sorted(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _expected(t: mt.Table, **read: Any) -> list[tuple[Any, ...]]:
    data = t.read(**read)
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))


def test_native_read_applies_the_vectors_inside_spark(spark: SparkSession, tmp_path: Path) -> None:
    t = mt.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        ["id"],
        options={"deletion-vectors.enabled": "true", "bucket": "2", "num-sorted-run.compaction-trigger": "10"},
    )
    t.write(_rows(list(range(100)), 0))
    t.write(_rows(list(range(100, 300)), 1))
    t.write(_rows([5, 50, 150, 250], 2))
    t.write(_rows([6, 7], 3))
    assert sum(len(v) for v in t.deletion_vectors().values()) == 6
    source = spark.read.format("mergetable").load(t.uri)
    assert _sorted(source) == _expected(t)
    df = mts.read(spark, t.uri)
    files = {f.rsplit("/", 1)[-1] for f in df.inputFiles()}
    assert files == {f.file_name for _, _, f in t.files()}  # every file through Spark's Parquet reader
    assert "Python" in source._jdf.queryExecution().executedPlan().toString()  # the data source's scan
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "Python" not in plan, plan
    assert _sorted(df) == _expected(t)
    assert df.count() == 300 == source.count()
    assert _sorted(df.where("v = 2")) == _expected(t, filter=[("v", "=", 2)])
    assert _sorted(mts.read(spark, t.uri, columns=["id"], filter=[("id", "<", 10)])) == _expected(
        t, columns=["id"], filter=[("id", "<", 10)]
    )
    old = t.latest_snapshot_id() - 2
    assert _sorted(mts.read(spark, t.uri, snapshot_id=old)) == _expected(t, snapshot_id=old)


def _vector_table(tmp_path: Path) -> mt.Table:
    """Two buckets, files with and without vectors: few marked rows (NOT IN) and many (the bitset)."""
    t = mt.create_table(
        str(tmp_path / "t"),
        SCHEMA,
        ["id"],
        options={
            "deletion-vectors.enabled": "true",
            "bucket": "2",
            "num-sorted-run.compaction-trigger": "10",
        },
    )
    t.write(_rows(list(range(2000)), 0))
    t.write(_rows(list(range(2000, 2500)), 1))  # no key of the first file: no vector
    t.write(_rows(list(range(0, 1500, 3)), 2))  # about 250 marked rows a bucket: bitsets
    t.write(_rows([3, 999, 2100], 3))  # a few marked rows in the newer files
    return t


def _python_scans(df: DataFrame) -> int:
    return str(df._jdf.queryExecution().executedPlan().toString()).count("Python")


def test_bitsets_in_lists_and_the_join_give_the_python_rows(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _vector_table(tmp_path)
    sizes = sorted(len(v) for v in t.deletion_vectors().values())
    assert sizes[-1] > mts_vectors.IN_LIST >= sizes[0], sizes  # both ways of filtering
    expected = _expected(t)
    df = mts.read(spark, t.uri)
    assert _python_scans(df) == 0
    plan = df._jdf.queryExecution().executedPlan().toString()
    assert "row_index" in plan and "BroadcastHashJoin" not in plan, plan
    assert _sorted(df) == expected
    assert type(df).__name__ == "CountedDataFrame" and df.count() == len(expected) == t.count()
    assert df.groupBy().count().collect()[0][0] == len(expected)  # computed by Spark: the same
    assert df.where("v = 2").count() == len(_expected(t, filter=[("v", "=", 2)]))  # an ordinary DataFrame's count
    assert type(df.where("v = 2")).__name__ == "DataFrame"
    filtered = mts.read(spark, t.uri, columns=["s", "id"], filter=[("v", "<=", 2), ("id", ">", 900)])
    assert type(filtered).__name__ == "DataFrame"  # a filtered read is counted by Spark
    assert _sorted(filtered) == _expected(t, columns=["s", "id"], filter=[("v", "<=", 2), ("id", ">", 900)])
    assert filtered.count() == len(_expected(t, columns=["id"], filter=[("v", "<=", 2), ("id", ">", 900)]))
    monkeypatch.setattr(mts_vectors, "FILTERED_FILES", 1)  # the other files through the anti-join
    joined = mts.read(spark, t.uri)
    assert "BroadcastHashJoin" in joined._jdf.queryExecution().executedPlan().toString()
    assert _sorted(joined) == expected and joined.groupBy().count().collect()[0][0] == len(expected)
    monkeypatch.setattr(mts_vectors, "FILTERED_FILES", 0)
    monkeypatch.setattr(mts_vectors, "IN_LIST", 0)
    assert _sorted(mts.read(spark, t.uri, filter=[("s", "=", "s1")])) == _expected(t, filter=[("s", "=", "s1")])


def test_merge_on_read_sections_alone_go_through_the_data_source(spark: SparkSession, tmp_path: Path) -> None:
    t = _vector_table(tmp_path)
    t.alter.set_options({"write-only": "true", "deletion-vectors.merge-on-read": "true"})
    t = mt.open_table(t.uri)
    t.write(_rows([2101, 2102, 2103, 2104], 9))  # level 0: the sections holding these keys need a merge
    merging = {f.file_name for s in t.plan(sections="merging") for f in s.files}
    vectored = {f.file_name for s in t.plan(sections="vectored") for f in s.files}
    raw = {f.file_name for s in t.plan(sections="raw") for f in s.files}
    assert merging and vectored and not merging & vectored and not (merging | vectored) & raw
    assert merging | vectored | raw == {f.file_name for _, _, f in t.files()}
    assert merging | vectored == {f.file_name for s in t.plan(sections="merged") for f in s.files}
    df = mts.read(spark, t.uri)
    assert _python_scans(df) >= 1 and "row_index" in df._jdf.queryExecution().executedPlan().toString()
    native = {f.rsplit("/", 1)[-1] for f in df.inputFiles()}
    assert vectored <= native and not merging & native  # the merging files only through the data source
    expected = _expected(t)
    assert _sorted(df) == expected and df.count() == len(expected)
    assert _sorted(mts.read(spark, t.uri, filter=[("v", ">=", 2)])) == _expected(t, filter=[("v", ">=", 2)])
    t.compact(full=True)
    whole = mts.read(spark, t.uri)
    assert _python_scans(whole) == 0 and _sorted(whole) == _expected(t) == expected
