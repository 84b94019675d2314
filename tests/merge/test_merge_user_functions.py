"""mergetable.functions (plain Python) and their Spark Arrow UDFs (mergetable.spark.functions)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyroaring import BitMap, BitMap64

from mergetable import functions as f
from mergetable.spark.functions import function_names, register_functions


def test_bitmaps() -> None:
    b = f.to_bitmap(100, [101, None], 102, None)
    assert BitMap.deserialize(b) == BitMap([100, 101, 102])
    assert f.bitmap_cardinality(b) == 3 and f.bitmap_cardinality(None) == 0
    assert f.bitmap_contains(b, 101) and not f.bitmap_contains(b, 5) and not f.bitmap_contains(None, 1)
    assert f.bitmap_values(f.bitmap_or(b, None, f.to_bitmap(1))) == [1, 100, 101, 102]
    assert f.bitmap_values(f.to_bitmap(-1)) == [2**32 - 1]  # Java's unsigned view of negative ints
    with pytest.raises(ValueError, match="does not fit a 32-bit bitmap"):
        f.to_bitmap(2**32)
    with pytest.raises(ValueError, match="not a serialized 32-bit RoaringBitmap"):
        f.bitmap_cardinality(b"junk")


def test_bitmaps64() -> None:
    b = f.to_bitmap64(1000000001, 2**40)
    assert BitMap64.deserialize(b) == BitMap64([1000000001, 2**40])
    assert f.bitmap_cardinality(b, 64) == 2 and f.bitmap_contains(b, 2**40, 64)
    assert f.bitmap_values(f.bitmap_or(b, f.to_bitmap64(3), bits=64), 64) == [3, 1000000001, 2**40]


def test_sketches() -> None:
    h = f.hll_sketch(*[f"user{i}" for i in range(1000)])
    assert f.hll_estimate(h) == pytest.approx(1000, rel=0.05)
    assert f.hll_estimate(None) == 0.0
    assert round(f.hll_estimate(f.hll_union(f.hll_sketch(1, 2), f.hll_sketch(2, 3), None))) == 3
    t = f.theta_sketch("a", "b", [b"c", None], 1.5, True)
    assert f.theta_estimate(t) == 5.0 and f.theta_estimate(None) == 0.0
    assert f.theta_estimate(f.theta_union(f.theta_sketch(1, 2), f.theta_sketch(2, 3))) == 3.0
    with pytest.raises(ValueError, match="not a serialized HLL sketch"):
        f.hll_estimate(b"junk")
    for junk in (b"ju", b"junk-junk-junk"):  # shorter than a sketch header, and a wrong one
        with pytest.raises(ValueError, match="not a serialized Theta sketch"):
            f.theta_estimate(junk)


def test_udf_implementations_without_spark() -> None:
    from mergetable.spark.functions import _builders

    impl = {name: fn for name, (_, fn) in _builders().items()}
    bitmaps = impl["TO_BITMAP"](pa.array([100, 1]), pa.array([101, None]))
    assert [f.bitmap_values(b) for b in bitmaps.to_pylist()] == [[100, 101], [1]]
    assert impl["FROM_BITMAP"](bitmaps).to_pylist() == [2, 1]
    assert impl["BITMAP_CONTAINS"](bitmaps, pa.array([101, 101])).to_pylist() == [True, False]
    assert impl["HLL_SKETCH_COUNT"](impl["HLL_SKETCH"](pa.array(["a", None]))).to_pylist() == [1.0, 0.0]
    assert impl["BITMAP64_VALUES"](impl["TO_BITMAP64"](pa.array([2**63 - 1]))).to_pylist() == [[2**63 - 1]]


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    existing = SparkSession.getActiveSession()
    if existing is not None:  # share a session another test module started; do not stop it
        yield existing
        return
    session = (
        SparkSession.builder.master("local[1]")
        .appName("mergetable-merge-udfs")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.mark.spark
def test_seed_udf_examples_in_spark(spark: Any) -> None:
    assert sorted(register_functions(spark)) == sorted(function_names())
    spark.createDataFrame(
        [(1, "u1"), (1, "u2"), (1, "u1"), (2, "u3")], "id INT, user_id STRING"
    ).createOrReplaceTempView("VISITS")
    spark.sql(
        "SELECT 1 AS user_id, TO_BITMAP(100, 101, 102) AS page_visits "
        "UNION ALL SELECT 2, TO_BITMAP(101, 103) UNION ALL SELECT 3, TO_BITMAP(102, 104)"
    ).createOrReplaceTempView("user_page_visits")
    rows = spark.sql(
        "SELECT user_id, FROM_BITMAP(page_visits) AS unique_pages, "
        "BITMAP_CONTAINS(page_visits, 101) AS visited_page_101 FROM user_page_visits ORDER BY user_id"
    ).collect()
    assert [(r.user_id, r.unique_pages, r.visited_page_101) for r in rows] == [
        (1, 3, True),
        (2, 2, True),
        (3, 2, False),
    ]
    uv = spark.sql(
        "SELECT id, HLL_SKETCH_COUNT(HLL_SKETCH_UNION(s1, s2)) AS uv, THETA_SKETCH_COUNT(THETA_SKETCH(user_id)) AS t "
        "FROM (SELECT id, user_id, HLL_SKETCH(user_id) AS s1, HLL_SKETCH('x') AS s2 FROM VISITS) ORDER BY id, user_id"
    ).collect()
    assert [(r.id, round(r.uv), r.t) for r in uv] == [(1, 2, 1.0), (1, 2, 1.0), (1, 2, 1.0), (2, 2, 1.0)]
    big = spark.sql("SELECT BITMAP64_VALUES(TO_BITMAP64(1000000001, 1000000002)) AS v").collect()[0].v
    assert big == [1000000001, 1000000002]
