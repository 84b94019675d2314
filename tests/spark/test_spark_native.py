"""``mergetable.spark.read`` with raw-convertible sections read by Spark's Parquet reader, against the data source.

Every test compares the hybrid DataFrame with ``spark.read.format("mergetable")`` of the same snapshot (and
with ``Table.read``), and checks which way the rows went: ``DataFrame.inputFiles()`` lists Parquet files only
for the files Spark's reader scans.
"""

from __future__ import annotations

import datetime
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession

import mergetable as mt
import mergetable.spark as mts
from mergetable.spark.native import spark_filter
from mergetable.spark.types import spark_schema
from mergetable.write import files

pytestmark = pytest.mark.spark

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("p", pa.string(), False),
        pa.field("v", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("d", pa.date32()),
    ]
)


def _rows(ids: range, tag: str) -> pa.Table:
    return pa.table(
        {
            "id": list(ids),
            "p": ["ab"[i % 2] for i in ids],
            "v": [None if i % 7 == 3 else i * 0.5 for i in ids],
            "s": [f"{tag}{i}" for i in ids],
            "d": [datetime.date(2024, 1, 1) + datetime.timedelta(days=i % 30) for i in ids],
        },
        schema=SCHEMA,
    )


def _table(tmp_path: Path, name: str = "t", bucket: int = 2) -> mt.Table:
    return mt.create_table(str(tmp_path / name), SCHEMA, ["id", "p"], ["p"], options={"bucket": str(bucket)})


def _comparable(row: Any) -> tuple[Any, ...]:
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)


def _sorted(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(_comparable(r) for r in df.collect())


def _expected(t: mt.Table, **read: Any) -> list[tuple[Any, ...]]:
    data = t.read(**read)
    return sorted(_comparable(r) for r in zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True))


def _source(spark: SparkSession, t: mt.Table, **options: Any) -> DataFrame:
    return spark.read.format("mergetable").options(**{k: str(v) for k, v in options.items()}).load(t.uri)


def test_a_compacted_table_is_read_by_sparks_parquet_reader(spark: SparkSession, tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.write(_rows(range(100), "a"))
    t.write(_rows(range(50, 150), "b"))
    t.delete_keys(pa.table({"id": pa.array([10, 11], pa.int64()), "p": ["a", "b"]}))
    t.compact(full=True)
    df = mts.read(spark, t.uri)
    assert df.inputFiles() and all(f.endswith(".parquet") for f in df.inputFiles())
    assert _sorted(df) == _sorted(_source(spark, t)) == _expected(t)
    assert df.count() == 148
    assert _sorted(df.where("p = 'a' AND id > 120")) == _expected(t, filter=[("p", "=", "a"), ("id", ">", 120)])
    assert mts.read(spark, t.uri, columns=["s", "id"]).columns == ["s", "id"]
    assert _sorted(mts.read(spark, t.uri, columns=["s"], filter=[("id", "in", [1, 2, 10])])) == [("a1",), ("a2",)]
    assert not mts.read(spark, t.uri, native=False).inputFiles()  # the data source alone


def test_merged_sections_still_go_through_the_data_source(spark: SparkSession, tmp_path: Path) -> None:
    t = _table(tmp_path, bucket=1)
    t.write(_rows(range(100), "a"))
    t.compact(full=True)
    t.write(_rows(range(90, 95), "b"))  # overlaps the compacted run: that section needs a merge
    t.write(_rows(range(200, 220), "c"))  # a section of its own: one run, read as Parquet
    raw = {f.file_name for s in t.plan(sections="raw") for f in s.files}
    merged = {f.file_name for s in t.plan(sections="merged") for f in s.files}
    assert raw and merged and not raw & merged and raw | merged == {f.file_name for _, _, f in t.files()}
    df = mts.read(spark, t.uri)
    assert {f.rsplit("/", 1)[-1] for f in df.inputFiles()} == raw
    assert _sorted(df) == _sorted(_source(spark, t)) == _expected(t)
    assert _sorted(df.where("id BETWEEN 92 AND 205")) == _expected(t, filter=[("id", ">=", 92), ("id", "<=", 205)])


def test_the_hybrid_frame_keeps_its_snapshot_and_honours_time_travel(spark: SparkSession, tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.write(_rows(range(40), "a"))
    t.compact(full=True)
    first = t.latest_snapshot_id()
    df = mts.read(spark, t.uri)
    before = _sorted(df)
    t.write(_rows(range(20, 60), "b"))
    assert _sorted(df) == before  # pinned when it was made, on both sides of the union
    assert len(_sorted(mts.read(spark, t.uri))) == 60
    old = mts.read(spark, t.uri, snapshot_id=first)
    assert old.inputFiles() and _sorted(old) == before == _expected(t, snapshot_id=first)


def test_files_that_need_the_reader_are_never_read_raw(spark: SparkSession, tmp_path: Path) -> None:
    t = _table(tmp_path, bucket=1)
    # a single run holding retracts: its -D records must not show
    t.write(_rows(range(10), "a"), row_kind=["+I"] * 8 + ["-D"] * 2)
    assert not t.plan(sections="raw")
    assert _sorted(mts.read(spark, t.uri)) == _expected(t) and len(_expected(t)) == 8
    # files of an older schema: read through the data source, the new column as null
    t.compact(full=True)
    t.alter.add_columns([pa.field("extra", pa.int32())])
    t = mt.open_table(t.uri)
    df = mts.read(spark, t.uri)
    assert not df.inputFiles() and _sorted(df) == _expected(t) and all(r[-1] is None for r in _sorted(df))


def test_types_spark_reads_otherwise_keep_the_data_source(spark: SparkSession, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("at", pa.timestamp("us"))])
    t = mt.create_table(str(tmp_path / "ntz"), schema, ["id"], options={"bucket": "1"})
    t.write(pa.table({"id": [1, 2], "at": [datetime.datetime(2024, 5, 1, 12), None]}, schema=schema))
    df = mts.read(spark, t.uri)
    assert not df.inputFiles()
    assert _sorted(df) == [(1, datetime.datetime(2024, 5, 1, 12)), (2, None)]
    assert mts.read(spark, t.uri, columns=["id"]).inputFiles()  # a column Spark reads as the table means it


@pytest.mark.parametrize(
    "dnf",
    [
        [("v", ">", 10)],
        [("v", "!=", 10.0)],
        [("s", "not in", ["a1", "a3"])],
        [("s", "not in", ["a1", None])],
        [("id", "in", [])],
        [("d", "<=", "2024-01-03")],
        [[("id", "<", 3)], [("v", "=", float("nan")), ("p", "=", "b")]],
        [("v", "=", None)],
    ],
)
def test_the_filter_means_the_same_rows_as_the_python_reader(
    spark: SparkSession, tmp_path: Path, dnf: list[Any]
) -> None:
    t = _table(tmp_path, bucket=1)
    rows = _rows(range(40), "a")
    values = [float("nan") if i == 5 else v for i, v in enumerate(rows["v"].to_pylist())]
    t.write(rows.set_column(2, "v", pa.array(values, pa.float64())))
    df = mts.read(spark, t.uri, filter=dnf)
    expected = _expected(t, filter=dnf)
    assert df.inputFiles() or not expected  # a filter that matches nothing may prune every file
    assert _sorted(df) == expected


def test_spark_filter_is_null_safe(spark: SparkSession) -> None:
    schema = spark_schema(SCHEMA)
    df = spark.createDataFrame([(1, "a", None, None, None), (2, "b", 1.0, "x", None)], schema)
    assert [r.id for r in df.where(spark_filter([[("v", "!=", 5.0)]], schema)).collect()] == [2]
    assert [r.id for r in df.where(spark_filter([[("s", "not in", ["y"])]], schema)).collect()] == [2]


def test_nan_rows_survive_sparks_own_filter_pushdown(
    spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.float64()), pa.field("f", pa.float32())])
    rows = pa.table({"id": [1, 2, 3], "v": [1.0, float("nan"), 2.0], "f": [1.0, float("nan"), 2.0]}, schema=schema)
    t = mt.create_table(str(tmp_path / "nan"), schema, ["id"], options={"bucket": "1"})
    t.write(rows)
    df = mts.read(spark, t.uri)
    assert df.inputFiles()  # float columns without Parquet min/max: Spark cannot skip the NaN rows by them
    for sql in ("v > 10", "v >= 10", "v = 'NaN'", "f > 10", "v <=> 'NaN'"):
        assert [r.id for r in df.where(sql).collect()] == [2], sql
    # files that record float min/max (Arrow leaves NaN out of them) are read through the data source
    monkeypatch.setattr(files, "statistics_columns", lambda s: s.names)
    old = mt.create_table(str(tmp_path / "old"), schema, ["id"], options={"bucket": "1"})
    old.write(rows)
    df = mts.read(spark, old.uri)
    assert not df.inputFiles() and [r.id for r in df.where("v > 10").collect()] == [2]
    assert mts.read(spark, old.uri, columns=["id"]).inputFiles()  # no float column read


def test_merge_table_reads_and_rewrites_through_the_parquet_scan(spark: SparkSession, tmp_path: Path) -> None:
    t = _table(tmp_path)
    t.write(_rows(range(30), "a"))
    t.compact(full=True)
    mtab = mts.MergeTable.forPath(spark, t.uri)
    assert mtab.toDF().inputFiles()
    mtab.delete("id < 5")
    mtab.update("id >= 25", {"s": "'updated'"})
    rows = mt.open_table(t.uri).read().sort_by("id")
    assert rows.column("id").to_pylist() == list(range(5, 30))
    assert rows.column("s").to_pylist() == [f"a{i}" for i in range(5, 25)] + ["updated"] * 5


def test_partition_directories_with_escaped_names(spark: SparkSession, tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("p", pa.string(), False)])
    values = ["a b", "x/y", "c%d", "é", "plain"]
    t = mt.create_table(str(tmp_path / "esc"), schema, ["id", "p"], ["p"], options={"bucket": "1"})
    t.write(pa.table({"id": list(range(len(values))), "p": values}, schema=schema))
    df = mts.read(spark, t.uri)
    assert len(df.inputFiles()) == len(values)
    assert _sorted(df) == _sorted(_source(spark, t)) == sorted(enumerate(values))
    assert [r.id for r in df.where("p = 'c%d'").collect()] == [2]
