"""One filter semantics: every front end returns the same rows for the same predicate.

For each predicate (given as Spark SQL and as the equivalent DNF), the keys returned by the Python read, a
pyarrow filter over the merged rows, the Spark ``filter`` option, and Spark SQL with filter pushdown off and
on must be identical. Spark SQL is the reference semantics (SQL nulls, NaN above every number). The ``filter``
option is also checked on a compacted copy, whose files Spark's own Parquet reader scans.
"""

from __future__ import annotations

import datetime
import decimal
import functools
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mergetable as mt
import mergetable.spark as mts
from mergetable.core.filters import bind_filters, to_expression
from mergetable.spark.options import pushdown_scoped_per_scan

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"
NAN, INF = float("nan"), float("inf")
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("part", pa.string(), False),
        pa.field("i", pa.int32()),
        pa.field("big", pa.int64()),
        pa.field("fl", pa.float32()),
        pa.field("f", pa.float64()),
        pa.field("s", pa.string()),
        pa.field("dt", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("dec", pa.decimal128(10, 2)),
    ]
)
F_VALUES = [0.0, 1.0, 1.5, -2.5, NAN, INF, -INF, None, 2.5, 1e300]
DAY0 = datetime.date(2024, 1, 1)


def _rows(ids: range, bump: int) -> pa.Table:
    def nth(i: int, every: int) -> bool:
        return i % every == every - 1

    return pa.table(
        {
            "id": list(ids),
            "part": ["abc"[i % 3] for i in ids],
            "i": [None if nth(i, 7) else (i % 9) - 2 + bump for i in ids],
            "big": [None if nth(i, 8) else (i - 15) * 10**11 for i in ids],
            "fl": [None if nth(i, 6) else (i % 5) * 0.5 - 0.5 for i in ids],
            "f": [F_VALUES[(i + bump) % len(F_VALUES)] for i in ids],
            "s": [None if nth(i, 5) else f"x{i % 6}" for i in ids],
            "dt": [None if nth(i, 9) else DAY0 + datetime.timedelta(days=i % 12) for i in ids],
            "ts": [
                None if nth(i, 10) else datetime.datetime(2024, 1, 1 + i % 11, 6 * (i % 3), tzinfo=datetime.UTC)
                for i in ids
            ],
            "dec": [None if nth(i, 11) else decimal.Decimal(i % 13 * 125 - 500).scaleb(-2) for i in ids],
        },
        schema=SCHEMA,
    )


NAN_SQL, INF_SQL = "double('NaN')", "double('Infinity')"
# (Spark SQL, DNF) pairs; a DNF is a list of predicates (AND) or a list of such lists (OR)
CASES: list[tuple[str, Any]] = [
    # integers, and integers against fractional or out-of-range literals
    ("i = 3", [("i", "=", 3)]),
    ("i != 3", [("i", "!=", 3)]),
    ("i < 3", [("i", "<", 3)]),
    ("i <= 3", [("i", "<=", 3)]),
    ("i > 3", [("i", ">", 3)]),
    ("i >= 3", [("i", ">=", 3)]),
    ("i > 1.5", [("i", ">", 1.5)]),
    ("i < 1.5", [("i", "<", 1.5)]),
    ("i = 2.0", [("i", "=", 2.0)]),
    ("i = 2.5", [("i", "=", 2.5)]),
    ("i != 2.5", [("i", "!=", 2.5)]),
    ("i <= -1.5", [("i", "<=", -1.5)]),
    ("i > 3000000000", [("i", ">", 3000000000)]),
    ("i < 3000000000", [("i", "<", 3000000000)]),
    ("i = null", [("i", "=", None)]),
    ("i in (1, 2, 3)", [("i", "in", [1, 2, 3])]),
    ("i in (1, null)", [("i", "in", [1, None])]),
    ("i not in (1, 2)", [("i", "not in", [1, 2])]),
    ("i not in (1, null)", [("i", "not in", [1, None])]),
    ("big >= 0", [("big", ">=", 0)]),
    ("big < -500000000000", [("big", "<", -500000000000)]),
    ("big in (0, 100000000000, 7)", [("big", "in", [0, 100000000000, 7])]),
    ("big > 1.5", [("big", ">", 1.5)]),
    # floating point: ints vs floats, NaN, infinities, nulls
    ("f = 1", [("f", "=", 1)]),
    ("f = 1.5", [("f", "=", 1.5)]),
    ("f != 1", [("f", "!=", 1)]),
    ("f > 1", [("f", ">", 1)]),
    ("f >= 2.5", [("f", ">=", 2.5)]),
    ("f < 0", [("f", "<", 0)]),
    ("f <= 1.5", [("f", "<=", 1.5)]),
    (f"f = {NAN_SQL}", [("f", "=", NAN)]),
    (f"f != {NAN_SQL}", [("f", "!=", NAN)]),
    (f"f > {NAN_SQL}", [("f", ">", NAN)]),
    (f"f >= {NAN_SQL}", [("f", ">=", NAN)]),
    (f"f < {NAN_SQL}", [("f", "<", NAN)]),
    (f"f <= {NAN_SQL}", [("f", "<=", NAN)]),
    (f"f >= {INF_SQL}", [("f", ">=", INF)]),
    (f"f < {INF_SQL}", [("f", "<", INF)]),
    (f"f > -{INF_SQL}", [("f", ">", -INF)]),
    (f"f in (1.0, {NAN_SQL})", [("f", "in", [1.0, NAN])]),
    ("f in (0, 2.5)", [("f", "in", [0, 2.5])]),
    ("f not in (1.0, 0.0)", [("f", "not in", [1.0, 0.0])]),
    (f"f not in ({NAN_SQL})", [("f", "not in", [NAN])]),
    ("f not in (1.0, null)", [("f", "not in", [1.0, None])]),
    ("fl = 0.5", [("fl", "=", 0.5)]),
    ("fl > 1", [("fl", ">", 1)]),
    ("fl != 0", [("fl", "!=", 0)]),
    # strings
    ("s = 'x3'", [("s", "=", "x3")]),
    ("s != 'x3'", [("s", "!=", "x3")]),
    ("s < 'x2'", [("s", "<", "x2")]),
    ("s >= 'x4'", [("s", ">=", "x4")]),
    ("s in ('x1', 'x4', null)", [("s", "in", ["x1", "x4", None])]),
    ("s not in ('x1')", [("s", "not in", ["x1"])]),
    # dates and timestamps from strings and objects
    ("dt = '2024-01-05'", [("dt", "=", "2024-01-05")]),
    ("dt < '2024-01-05'", [("dt", "<", "2024-01-05")]),
    ("dt >= date'2024-01-10'", [("dt", ">=", datetime.date(2024, 1, 10))]),
    ("dt in (date'2024-01-01', date'2024-01-03')", [("dt", "in", ["2024-01-01", datetime.date(2024, 1, 3)])]),
    ("dt != '2024-01-02'", [("dt", "!=", "2024-01-02")]),
    ("ts > '2024-01-05 00:00:00'", [("ts", ">", "2024-01-05 00:00:00")]),
    ("ts = '2024-01-03 12:00:00'", [("ts", "=", "2024-01-03T12:00:00Z")]),
    ("ts <= timestamp'2024-01-08 06:00:00'", [("ts", "<=", datetime.datetime(2024, 1, 8, 6))]),
    ("ts < '2024-01-04'", [("ts", "<", "2024-01-04")]),
    (
        "ts in (timestamp'2024-01-02 06:00:00', timestamp'2024-01-03 12:00:00')",
        [("ts", "in", ["2024-01-02T06:00:00+00:00", datetime.datetime(2024, 1, 3, 12, tzinfo=datetime.UTC)])],
    ),
    ("ts != '2024-01-01 00:00:00'", [("ts", "!=", "2024-01-01 00:00:00")]),
    # decimals from decimals, ints, floats and strings
    ("dec = 1.5", [("dec", "=", decimal.Decimal("1.5"))]),
    ("dec > 1.234", [("dec", ">", 1.234)]),
    ("dec < 2", [("dec", "<", 2)]),
    ("dec <= -1.255", [("dec", "<=", "-1.255")]),
    ("dec != 1.25", [("dec", "!=", 1.25)]),
    ("dec in (1.50, 3.75, 0.001)", [("dec", "in", ["1.50", 3.75, 0.001])]),
    ("dec not in (0, null)", [("dec", "not in", [0, None])]),
    # partition and key columns (pruning)
    ("part = 'a'", [("part", "=", "a")]),
    ("part in ('a', 'c')", [("part", "in", ["a", "c"])]),
    ("part != 'b'", [("part", "!=", "b")]),
    ("id = 7", [("id", "=", 7)]),
    ("id in (1, 2, 40)", [("id", "in", [1, 2, 40])]),
    ("id not in (1, 2)", [("id", "not in", [1, 2])]),
    ("id >= 25.5", [("id", ">=", 25.5)]),
    ("id < 10 and part = 'b'", [("id", "<", 10), ("part", "=", "b")]),
    # and / or / not
    ("i > 3 and part = 'a'", [("i", ">", 3), ("part", "=", "a")]),
    ("i < 0 or s = 'x5'", [[("i", "<", 0)], [("s", "=", "x5")]]),
    ("not (i = 2)", [("i", "!=", 2)]),
    ("not (f > 1)", [("f", "<=", 1)]),
    ("not (i in (1, 2))", [("i", "not in", [1, 2])]),
    ("not (s < 'x3')", [("s", ">=", "x3")]),
    (
        "(part = 'a' or part = 'b') and f > 0",
        [[("part", "=", "a"), ("f", ">", 0)], [("part", "=", "b"), ("f", ">", 0)]],
    ),
    (
        "dt >= '2024-01-06' and dec > 0 or ts < '2024-01-03'",
        [[("dt", ">=", "2024-01-06"), ("dec", ">", 0)], [("ts", "<", "2024-01-03")]],
    ),
]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> mt.Table:
    uri = str(Path(tmp_path_factory.mktemp("differential")) / "t")
    t = mt.create_table(uri, SCHEMA, ["id", "part"], ["part"], options={"bucket": "1"})
    t.write(_rows(range(40), 0))
    t.write(_rows(range(0, 40, 3), 1))  # updates: new versions of some keys
    t.delete_keys(pa.table({"id": pa.array([4, 5, 6], pa.int64()), "part": ["b", "c", "a"]}))
    t.write(_rows(range(40, 46), 2))
    return t


def _keys(rows: Any) -> list[int]:
    return sorted(int(r) for r in rows)


def _tagged_union(frames: list[DataFrame]) -> dict[int, list[int]]:
    """Run many filtered reads as one Spark job: {case index: sorted ids}."""
    tagged = [df.select(F.lit(n).alias("case"), "id") for n, df in enumerate(frames)]
    out: dict[int, list[int]] = {n: [] for n in range(len(frames))}
    for row in functools.reduce(DataFrame.unionAll, tagged).collect():
        out[row.case].append(row.id)
    return {n: sorted(ids) for n, ids in out.items()}


def test_predicates_cover_every_kind() -> None:
    assert len(CASES) >= 60
    ops = {p[1] for _, dnf in CASES for conj in (dnf if isinstance(dnf[0], list) else [dnf]) for p in conj}
    assert ops == {"=", "!=", "<", "<=", ">", ">=", "in", "not in"}


@pytest.mark.slow
def test_every_front_end_returns_the_same_rows(spark: SparkSession, table: mt.Table) -> None:
    merged = table.read()
    expected = {}
    for n, (sql, dnf) in enumerate(CASES):
        python = _keys(table.read(columns=["id"], filter=dnf).column("id").to_pylist())
        bound = bind_filters(dnf, table.schema)
        assert bound is not None
        by_arrow = _keys(merged.filter(to_expression(bound, table.schema)).column("id").to_pylist())
        assert python == by_arrow, (sql, dnf)
        expected[n] = python
    assert any(expected.values()) and any(not v for v in expected.values())  # the cases do discriminate

    option = _tagged_union([mts.read(spark, table.uri, filter=dnf) for _, dnf in CASES])
    try:
        spark.conf.set(PUSHDOWN_CONF, "false")
        # Without pushdown Spark filters every row it reads: one scan evaluates every predicate (a row passes
        # df.filter(sql) exactly when the predicate is true, not false or null)
        shared = spark.read.format("mergetable").option("pushdown", "false").load(table.uri)
        checks = shared.select("id", *[F.expr(sql).alias(f"case{n}") for n, (sql, _) in enumerate(CASES)]).collect()
        sql_off = {n: sorted(r.id for r in checks if r[f"case{n}"] is True) for n in range(len(CASES))}
        assert sql_off[0] == sorted(r.id for r in shared.filter(CASES[0][0]).collect())
        spark.conf.set(PUSHDOWN_CONF, "true")
        # PySpark 4.3 keeps the last pushed-down plan on a DataFrame (and refuses pushdown=true): one fresh
        # DataFrame per filtered query, taking the filters where plans are per scan
        on = {"pushdown": "true"} if pushdown_scoped_per_scan() else {}
        fresh = [spark.read.format("mergetable").options(**on).load(table.uri) for _ in CASES]
        sql_on = _tagged_union([df.filter(sql) for df, (sql, _) in zip(fresh, CASES, strict=True)])
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")
    for n, (sql, dnf) in enumerate(CASES):
        got = {"filter option": option[n], "SQL, pushdown off": sql_off[n], "SQL, pushdown on": sql_on[n]}
        assert got == dict.fromkeys(got, expected[n]), (sql, dnf, expected[n], got)


@pytest.mark.slow
def test_the_filter_option_on_files_spark_reads_itself(spark: SparkSession, table: mt.Table, tmp_path: Path) -> None:
    copy = str(tmp_path / "compacted")
    shutil.copytree(table.uri, copy)
    compacted = mt.open_table(copy)
    compacted.compact(full=True)
    assert not compacted.plan(sections="merged") and mts.read(spark, copy).inputFiles()
    got = _tagged_union([mts.read(spark, copy, filter=dnf) for _, dnf in CASES])
    for n, (sql, dnf) in enumerate(CASES):
        expected = _keys(table.read(columns=["id"], filter=dnf).column("id").to_pylist())
        assert got[n] == expected, (sql, dnf, expected, got[n])


def test_a_bad_filter_option_literal_names_the_column(spark: SparkSession, table: mt.Table) -> None:
    with pytest.raises(Exception, match="column 'dt'"):
        mts.read(spark, table.uri, filter=[("dt", "=", "not a date")]).collect()
    with pytest.raises(mt.FilterError, match="column 'dt'"):
        table.read(filter=[("dt", "=", "not a date")])
