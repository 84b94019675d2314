"""Reads of one loaded DataFrame used by many queries, counts, pruning and writes, checked against pyarrow.

PySpark 4.3 keeps one read plan per loaded relation and runs it for every later scan of that DataFrame,
however it is filtered (see ``mergetable/spark/source.py``): these tests reuse a DataFrame with and without
filters, in one query and across queries, with Spark's filter pushdown on and off.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import DataFrame, SparkSession

import mergetable as mt
from mergetable.core.options import DEFAULT_SPLIT_SIZE
from mergetable.spark.packing import pack_splits
from mergetable.spark.source import pushdown_scoped_per_scan

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64()), ("s", pa.string())])
DAYS = ("d1", "d2", "d3")


def _rows(ids: range, bump: int) -> pa.Table:
    return pa.table(
        {
            "id": list(ids),
            "dt": [DAYS[i % 3] for i in ids],
            "v": [i * 10 + bump for i in ids],
            "s": [None if i % 7 == 0 else f"s{(i + bump) % 5}" for i in ids],
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    """Three sorted runs per bucket (never compacted) and deletes: every read merges."""
    uri = str(tmp_path_factory.mktemp("reuse") / "t")
    t = mt.create_table(
        uri, SCHEMA, primary_key=["id", "dt"], partition_keys=["dt"], options={"bucket": "2", "write-only": "true"}
    )
    t.write(_rows(range(120), 0))
    t.write(_rows(range(60, 150), 1))
    t.delete_keys(_rows(range(100, 110), 0).select(["id", "dt"]))
    t.write(_rows(range(140, 160), 2))
    return t


def _expected(t: mt.Table, where: pc.Expression | None = None) -> list[tuple[Any, ...]]:
    data = t.read()
    if where is not None:
        data = data.filter(where)
    return sorted(zip(*(data.column(n).to_pylist() for n in SCHEMA.names), strict=True))


def _got(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.collect())


def _load(spark: SparkSession, t: mt.Table, **options: str) -> DataFrame:
    return spark.read.format("mergetable").options(**options).load(t.uri)


@pytest.mark.parametrize("conf", ["true", "false"])
def test_a_reused_dataframe_answers_every_query_like_pyarrow(spark: SparkSession, table: mt.Table, conf: str) -> None:
    everything = _expected(table)
    d2 = _expected(table, pc.field("dt") == "d2")
    low = _expected(table, pc.field("id") < 50)
    key = _expected(table, (pc.field("id") == 7) & (pc.field("dt") == "d2"))
    spark.conf.set(PUSHDOWN_CONF, conf)
    try:
        df = _load(spark, table)
        assert df.count() == len(everything)
        assert _got(df.where("dt = 'd2'")) == d2
        assert df.count() == len(everything)  # the filtered query before must not leak into this one
        assert df.where("id < 50").count() == len(low)
        assert _got(df) == everything
        assert _got(df.where("id = 7 and dt = 'd2'")) == key
        assert df.where("dt = 'd2'").count() == len(d2)
        # one query scanning the DataFrame twice, filtered two ways
        left, right = df.where("dt = 'd2'").alias("l"), df.where("id < 50").alias("r")
        joined = left.join(right, ["id", "dt"]).select("id", "dt", "l.v", "l.s")
        assert _got(joined) == sorted(set(d2) & set(low))
        assert df.unionByName(df.where("dt = 'd2'")).count() == len(everything) + len(d2)
        crossed = df.where("id = 7").crossJoin(df.where("id = 8").select(df.v.alias("w")))
        assert [(r.id, r.w) for r in crossed.collect()] == [(7, next(r[2] for r in everything if r[0] == 8))]
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")


def test_default_pushdown_takes_filters_only_where_plans_are_per_scan(spark: SparkSession, table: mt.Table) -> None:
    """On PySpark 4.3 every filter stays in Spark's plan; where plans are per scan, partition filters go."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        plan = _load(spark, table).where("dt = 'd2'")._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")
    assert ("isnotnull(dt" not in plan and "= d2" not in plan) is pushdown_scoped_per_scan()


def test_count_matches_pyarrow_with_deletes_runs_and_filters(spark: SparkSession, table: mt.Table) -> None:
    assert len(table.plan()) > 1 and any(len(s.sections[0]) > 1 for s in table.plan())  # several runs merge
    df = _load(spark, table)
    assert df.count() == table.read().num_rows == table.count()
    assert df.where("s is null").count() == len(_expected(table, pc.field("s").is_null()))
    assert df.where("v > 1000").count() == len(_expected(table, pc.field("v") > 1000))
    filtered = _load(spark, table, filter='[["dt", "=", "d3"], ["id", ">=", 100]]')
    assert filtered.count() == len(_expected(table, (pc.field("dt") == "d3") & (pc.field("id") >= 100)))


def test_partition_and_key_filters_prune_the_splits_read(spark: SparkSession, table: mt.Table) -> None:
    assert len(table.plan()) == 6  # 3 partitions x 2 buckets
    assert len(table.plan(filter=[("dt", "=", "d2")])) == 2
    assert len(table.plan(filter=[("dt", "=", "d2"), ("id", "=", 7)])) == 1  # then bucket pruning on the key
    everything = _load(spark, table).rdd.getNumPartitions()
    assert everything == len(pack_splits(table.plan(), DEFAULT_SPLIT_SIZE)) < 6  # small splits share a task
    one_day = _load(spark, table, filter='[["dt", "=", "d2"]]')
    day_splits = table.plan(filter=[("dt", "=", "d2")])
    assert one_day.rdd.getNumPartitions() == len(pack_splits(day_splits, DEFAULT_SPLIT_SIZE))
    one_key = _load(spark, table, filter='[["dt", "=", "d2"], ["id", "=", 7]]')
    assert one_key.rdd.getNumPartitions() == 1
    assert _got(one_key) == _expected(table, (pc.field("id") == 7) & (pc.field("dt") == "d2"))
    assert _got(one_day) == _expected(table, pc.field("dt") == "d2")
    if not pushdown_scoped_per_scan():  # pushdown=true is refused there (see test_spark_read_write)
        return
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:  # explicit pushdown on a DataFrame loaded for one query prunes the same splits
        pushed = _load(spark, table, pushdown="true").where("dt = 'd2' and id = 7")
        assert pushed.rdd.getNumPartitions() == 1
        assert _got(pushed) == _got(one_key)
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")


def test_dataframe_write_gives_the_rows_in_one_file_per_bucket_and_task(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "w")
    df = spark.range(0, 20_000, numPartitions=2).selectExpr("id", "id % 3 as g", "cast(id as string) as s")
    df.write.format("mergetable").mode("append").options(**{"primary-key": "id", "bucket": "3"}).save(uri)
    t = mt.open_table(uri)
    assert sorted(t.read().column("id").to_pylist()) == list(range(20_000))
    assert t.read().sort_by("id").column("s").to_pylist()[:3] == ["0", "1", "2"]
    files = list(t.files())
    assert len({(p, b) for p, b, _ in files}) == 3 and len(files) <= 2 * 3  # 2 tasks x 3 buckets at most
