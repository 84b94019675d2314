"""The bucket Spark computes for ``mergetable.spark.write``'s shuffle equals ``bucket_of``, and a table written by
``mergetable.spark.write`` holds every row in the bucket a Python write puts it in."""

from __future__ import annotations

import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

import mergetable as mt
import mergetable.spark as mts
from mergetable.core.dynamic_buckets import key_hashes
from mergetable.core.hashing import bucket_of
from mergetable.core.schema import TableSchema
from mergetable.spark.bucketing import spark_hashable, with_bucket, with_channel

EDGES = [0, 1, -1, 2**63 - 1, -(2**63), 2**32, 2**32 - 1, -(2**32), 2**31, -(2**31) - 1]


def _keys_table(rows: int = 3000) -> pa.Table:
    """Random values of every key type Spark hashes itself, 64-bit edge values first."""
    rng = np.random.default_rng(7)
    longs = np.concatenate([np.array(EDGES, np.int64), rng.integers(-(2**63), 2**63 - 1, rows, np.int64)])
    n = len(longs)
    return pa.table(
        {
            "l": longs,
            "i": rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32),
            "s16": rng.integers(-(2**15), 2**15 - 1, n).astype(np.int16),
            "t8": rng.integers(-128, 127, n).astype(np.int8),
            "b": rng.integers(0, 2, n).astype(bool),
            "d": pa.array(rng.integers(-700_000, 2_900_000, n).astype(np.int32), pa.date32()),
            "ts": pa.array(rng.integers(-(2**60), 2**60, n), pa.timestamp("us", tz="UTC")),
            "s": pa.array([f"k{v}" for v in longs % 100_003]),
        }
    )


@pytest.mark.parametrize(
    "keys",
    [["l"], ["i"], ["s16"], ["t8"], ["b"], ["d"], ["ts"], ["l", "i", "d"], ["ts", "b", "t8"], ["s"], ["l", "s"]],
)
def test_spark_bucket_equals_bucket_of(spark: SparkSession, keys: list[str]) -> None:
    data = _keys_table()
    df = spark.createDataFrame(data)
    counts = (2, 3, 7, 1000, 2**31 - 1)
    for buckets in counts:  # one Spark job computes every count
        df = with_bucket(df, TableSchema.create(data.schema, keys, options={"bucket": str(buckets)}), f"bk{buckets}")
    out = df.select(*(f"bk{b}" for b in counts)).toArrow()
    for buckets in counts:
        got = out.column(f"bk{buckets}").to_numpy()
        assert (got == bucket_of([data.column(k) for k in keys], buckets, keys)).all(), (keys, buckets)


@pytest.mark.parametrize("keys", [["l"], ["d"], ["l", "i", "d"], ["ts", "b", "t8"], ["s"], ["l", "s"]])
def test_spark_channel_equals_the_assigners(spark: SparkSession, keys: list[str]) -> None:
    """A dynamic-bucket table's channel, by Spark's expressions (or the Arrow UDF for strings): the key hash the
    assigner uses, read as unsigned, modulo the channel count."""
    data = _keys_table()
    df = spark.createDataFrame(data)
    schema = TableSchema.create(data.schema, keys)
    assert schema.is_dynamic_bucket
    unsigned = key_hashes([data.column(k) for k in keys], keys).view(np.uint32)
    counts = (1, 2, 3, 7, 1000, 2**31 - 1)
    for channels in counts:  # one Spark job computes every count
        df = with_channel(df, schema, f"ch{channels}", channels)
    out = df.select(*(f"ch{c}" for c in counts)).toArrow()
    for channels in counts:
        got = out.column(f"ch{channels}").to_numpy()
        assert (got == unsigned % np.uint32(channels)).all(), (keys, channels)


def test_a_narrower_key_column_hashes_as_the_table_type(spark: SparkSession) -> None:
    """An INT DataFrame column written to a BIGINT key column: the table's bucket of the same values."""
    data = _keys_table().select(["i"])
    df = spark.createDataFrame(data)
    schema = TableSchema.create(pa.schema([("i", pa.int64())]), ["i"], options={"bucket": "5"})
    got = with_bucket(df, schema, "bk").select("bk").toArrow().column("bk").to_numpy()
    assert (got == bucket_of([data.column("i").cast(pa.int64())], 5)).all()


def test_which_key_types_spark_hashes() -> None:
    assert spark_hashable(T.LongType(), pa.int64()) and spark_hashable(T.ByteType(), pa.int32())
    assert spark_hashable(T.DateType(), pa.date32()) and spark_hashable(T.BooleanType(), pa.bool_())
    assert spark_hashable(T.TimestampType(), pa.timestamp("us", tz="UTC"))
    assert not spark_hashable(T.TimestampType(), pa.timestamp("ns", tz="UTC"))  # the hash reads the table unit
    assert not spark_hashable(T.TimestampNTZType(), pa.timestamp("us"))
    assert not spark_hashable(T.LongType(), pa.string())  # the table column decides the hash
    assert not spark_hashable(T.StringType(), pa.string()) and not spark_hashable(T.DoubleType(), pa.float64())
    assert not spark_hashable(None, pa.int64())


def _rows_per_bucket(uri: str, key: str) -> dict[tuple[tuple[str | None, ...], int], list[object]]:
    table = mt.open_table(uri)
    out: dict[tuple[tuple[str | None, ...], int], list[object]] = {}
    for partition, bucket, f in table.files():
        path = table.path_factory.data_file(partition, bucket, f.file_name)
        out.setdefault((partition, bucket), []).extend(pq.read_table(path, columns=[key]).column(key).to_pylist())
    return {k: sorted(v, key=str) for k, v in out.items()}


@pytest.mark.parametrize(
    ("keys", "partition"),
    [("id", None), ("id,day", "day"), ("name", None)],  # a BIGINT key, BIGINT + DATE with a partition, a STRING key
)
def test_spark_write_puts_rows_in_the_buckets_of_a_python_write(
    spark: SparkSession, tmp_path: Path, keys: str, partition: str | None
) -> None:
    n = 2000
    days = [datetime.date(2024, 5, 1) + datetime.timedelta(days=i % 3) for i in range(n)]
    data = pa.table(
        {
            "id": pa.array([i * 7919 - 5000 for i in range(n)], pa.int64()),
            "day": pa.array(days, pa.date32()),
            "name": [f"n{i}" for i in range(n)],
            "v": [float(i) for i in range(n)],
        }
    )
    options = {"bucket": "3"}
    parts = [partition] if partition else []
    python_uri, spark_uri = str(tmp_path / "python"), str(tmp_path / "spark")
    mt.create_table(python_uri, data.schema, keys.split(","), parts, options).write(data)
    df = spark.createDataFrame(data).repartition(4)
    mts.write(df, spark_uri, primary_key=keys, partition_keys=partition or "", options=options, num_partitions=2)
    column = keys.split(",")[0]
    assert _rows_per_bucket(spark_uri, column) == _rows_per_bucket(python_uri, column)
    files = mt.open_table(spark_uri).files()
    assert len(files) == len({(p, b) for p, b, _ in files})  # one writer per bucket: one file each
    assert mt.open_table(spark_uri).read().sort_by("id") == mt.open_table(python_uri).read().sort_by("id")


def test_spark_write_refuses_a_null_key_naming_the_column(spark: SparkSession, tmp_path: Path) -> None:
    df = spark.createDataFrame([(1, 1.0), (None, 2.0)], "id bigint, v double")
    with pytest.raises(Exception, match="column 'id'"):
        mts.write(df, str(tmp_path / "t"), primary_key="id", bucket=2)
    assert not mt.table_exists(str(tmp_path / "t"))
    appended = str(tmp_path / "a")  # an append table's bucket key may be nullable: the writing task refuses a null
    with pytest.raises(Exception, match="column 'id'"):
        mts.write(df, appended, bucket=2, bucket_key="id")
    assert not mt.table_exists(appended)


def test_the_bucket_column_does_not_clash_with_a_data_column(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.range(50).select("id", (F.col("id") * 2).alias("_mergetable_bucket"))
    mts.write(df, uri, primary_key="id", bucket=2)
    got = mt.open_table(uri).read().sort_by("id")
    assert got.column("_mergetable_bucket").to_pylist() == [2 * i for i in range(50)]
