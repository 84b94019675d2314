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
