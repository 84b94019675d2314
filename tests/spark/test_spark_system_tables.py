"""System tables and temporary views from Spark."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
import mergetable.spark as mts
from mergetable.read.system_tables import SYSTEM_TABLES
from mergetable.spark.types import spark_schema

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])


@pytest.fixture
def table(table_uri: str) -> mt.Table:
    t = mt.create_table(table_uri, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": [1.0, None, 3.0]}, schema=SCHEMA))
    t.write(pa.table({"id": [1, 4], "dt": ["a", "b"], "v": [10.0, 4.0]}, schema=SCHEMA))
    t.create_tag("first", snapshot_id=1)
    return t


def _python_rows(t: mt.Table, name: str, **travel: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.system_table(name, **travel).to_pylist())


def _spark_rows(df: Any) -> list[tuple[Any, ...]]:
    out = []
    for row in df.collect():
        out.append(tuple(list(v) if isinstance(v, list) else v for v in row))
    return sorted(out)


def test_every_system_table_reads_the_same_in_spark(spark: Any, table: mt.Table) -> None:
    for name in SYSTEM_TABLES:
        df = spark.read.format("mergetable").load(table.uri + "$" + name)
        assert df.schema == spark_schema(table.system_table(name).schema), name
        assert _spark_rows(df) == _python_rows(table, name), name


def test_time_travel_and_projection(spark: Any, table: mt.Table) -> None:
    df = spark.read.format("mergetable").option("snapshot-id", "1").load(table.uri + "$files")
    assert df.count() == len(table.files(snapshot_id=1))
    assert _spark_rows(
        spark.read.format("mergetable").option("scan.tag-name", "first").load(table.uri + "$partitions")
    ) == _python_rows(table, "partitions", tag="first")
    ids = spark.read.format("mergetable").load(table.uri + "$snapshots").select("snapshot_id").collect()
    assert [r.snapshot_id for r in ids] == [1, 2]
    spark.read.format("mergetable").load(table.uri + "$snapshots").createOrReplaceTempView("snaps")
    assert spark.sql("SELECT max(snapshot_id) AS m FROM snaps").collect()[0].m == 2


def test_unknown_system_table_is_a_clear_error(spark: Any, table: mt.Table) -> None:
    with pytest.raises(Exception, match=r"unknown system table '\$nope'"):
        spark.read.format("mergetable").load(table.uri + "$nope").collect()


def test_register_view_sees_every_new_commit(spark: Any, table: mt.Table) -> None:
    mts.register_view(spark, "live_orders", table.uri)
    pinned = spark.read.format("mergetable").load(table.uri)
    pinned.createOrReplaceTempView("pinned_orders")
    assert spark.sql("SELECT count(*) AS n FROM live_orders").collect()[0].n == 4
    table.write(pa.table({"id": [7], "dt": ["b"], "v": [7.0]}, schema=SCHEMA))
    assert spark.sql("SELECT count(*) AS n FROM live_orders").collect()[0].n == 5
    assert spark.sql("SELECT count(*) AS n FROM pinned_orders").collect()[0].n == 4  # a DataFrame keeps its snapshot
    table.delete_keys(pa.table({"id": [1, 2], "dt": ["a", "a"]}))
    rows = spark.sql("SELECT id FROM live_orders WHERE dt = 'a'").collect()
    assert rows == []
    mts.register_view(spark, "orders_at_1", table.uri, snapshot_id=1)
    assert spark.sql("SELECT count(*) AS n FROM orders_at_1").collect()[0].n == 3


@pytest.mark.parametrize("bucket", ["-1", "2"])
def test_buckets_and_table_indexes_of_hash_and_vector_files_read_the_same_in_spark(
    spark: Any, tmp_path: Any, bucket: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64())])
    opts = {"bucket": bucket, "dynamic-bucket.target-row-num": "4", "deletion-vectors.enabled": "true"}
    t = mt.create_table(str(tmp_path / "t"), schema, ["id"], options=opts)
    t.write(pa.table({"id": range(10), "v": range(10)}, schema=schema))
    t.delete([("id", "in", [1, 5, 8])])
    indexes = t.system_table("table_indexes").to_pylist()
    kinds = {r["index_type"] for r in indexes}
    assert kinds == ({"HASH", "DELETION_VECTORS"} if bucket == "-1" else {"DELETION_VECTORS"})

    def plain(v: Any) -> Any:
        if isinstance(v, list):
            return [plain(x) for x in v]
        if hasattr(v, "asDict"):
            return {k: plain(x) for k, x in v.asDict().items()}
        return v

    for name in ("buckets", "table_indexes"):
        df = spark.read.format("mergetable").load(t.uri + "$" + name)
        assert df.schema == spark_schema(t.system_table(name).schema), name
        got = sorted(repr([plain(v) for v in r]) for r in df.collect())
        want = sorted(repr(list(r.values())) for r in t.system_table(name).to_pylist())
        assert got == want, name
