"""Spark reach: partitionOverwriteMode, replaceWhere, case-insensitive columns, writes from other threads."""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
import mergetable.spark as mts
from mergetable.core.errors import SchemaError, UnsupportedError
from mergetable.spark.write_modes import SESSION_OVERWRITE_MODE, case_renames, parse_replace_where

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("Amount", pa.float64())])


def _table(uri: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "1"})
    t.write(pa.table({"id": [1, 2, 3], "dt": ["a", "b", "c"], "Amount": [1.0, 2.0, 3.0]}, schema=SCHEMA))
    return t


def _rows(t: mt.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.read().to_pylist())


def _df(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, "id long, dt string, Amount double")


def test_partition_overwrite_mode(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    writer = _df(spark, [(9, "a", 9.0)]).write.format("mergetable").mode("overwrite")
    writer.option("partitionOverwriteMode", "dynamic").save(table_uri)
    assert _rows(t) == [(2, "b", 2.0), (3, "c", 3.0), (9, "a", 9.0)]
    writer = _df(spark, [(8, "b", 8.0)]).write.format("mergetable").mode("overwrite")
    writer.option("partitionOverwriteMode", "static").save(table_uri)
    assert _rows(t) == [(8, "b", 8.0)]
    assert mt.open_table(table_uri).table_options.dynamic_partition_overwrite is True  # per write only


def test_plain_overwrite_is_static_unless_the_session_or_the_option_says_dynamic(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    _df(spark, [(9, "a", 9.0)]).write.format("mergetable").mode("overwrite").save(table_uri)
    assert _rows(t) == [(9, "a", 9.0)]  # Spark's, Delta's and Paimon's default: the whole table
    _df(spark, [(1, "b", 1.0)]).write.format("mergetable").mode("append").save(table_uri)
    spark.conf.set(SESSION_OVERWRITE_MODE, "dynamic")
    try:
        _df(spark, [(8, "a", 8.0)]).repartition(2).write.format("mergetable").mode("overwrite").save(table_uri)
        assert _rows(t) == [(1, "b", 1.0), (8, "a", 8.0)]  # the session's setting, as Delta 2.0+ honours it
        writer = _df(spark, [(7, "c", 7.0)]).write.format("mergetable").mode("overwrite")
        writer.option("partitionOverwriteMode", "static").save(table_uri)
        assert _rows(t) == [(7, "c", 7.0)]  # the write's option wins over the session
        with pytest.raises(Exception, match=r"replaceWhere.*cannot be combined"):
            writer = _df(spark, [(6, "c", 6.0)]).write.format("mergetable").mode("overwrite")
            writer.option("partitionOverwriteMode", "dynamic").option("replaceWhere", "dt = 'c'").save(table_uri)
        writer = _df(spark, [(5, "c", 5.0)]).write.format("mergetable").mode("overwrite")
        writer.option("replaceWhere", "dt = 'c'").save(table_uri)  # replaceWhere wins over the session
        assert _rows(t) == [(5, "c", 5.0)]
    finally:
        spark.conf.unset(SESSION_OVERWRITE_MODE)
    assert mt.open_table(table_uri).table_options.dynamic_partition_overwrite is True  # the table option stays


def test_write_helper_follows_the_session_conf(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    spark.conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")
    try:
        mts.write(_df(spark, [(9, "a", 9.0)]), table_uri, mode="overwrite")
        assert _rows(t) == [(2, "b", 2.0), (3, "c", 3.0), (9, "a", 9.0)]
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    mts.write(_df(spark, [(7, "c", 7.0)]), table_uri, mode="overwrite")  # Spark's default: static
    assert _rows(t) == [(7, "c", 7.0)]


def test_replace_where(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    writer = _df(spark, [(5, "b", 5.0), (6, "b", 6.0)]).write.format("mergetable").mode("overwrite")
    writer.option("replaceWhere", "dt = 'b'").save(table_uri)
    assert _rows(t) == [(1, "a", 1.0), (3, "c", 3.0), (5, "b", 5.0), (6, "b", 6.0)]
    before = _rows(t)
    with pytest.raises(Exception, match="outside the overwrite spec"):  # Delta's constraint check
        bad = _df(spark, [(7, "c", 7.0)]).write.format("mergetable").mode("overwrite")
        bad.option("replaceWhere", "dt = 'b'").save(table_uri)
    with pytest.raises(Exception, match="only equalities on partition columns"):
        bad = _df(spark, [(7, "b", 7.0)]).write.format("mergetable").mode("overwrite")
        bad.option("replaceWhere", "Amount > 1").save(table_uri)
    assert _rows(t) == before


def test_replace_where_parsing() -> None:
    assert parse_replace_where("dt = 'x''y' AND `Region`=3", ["dt", "region"]) == {"dt": "x'y", "region": "3"}
    with pytest.raises(SchemaError, match="'id'"):
        parse_replace_where("id = 1", ["dt"])
    with pytest.raises(UnsupportedError):
        parse_replace_where("dt IN ('a')", ["dt"])
    assert case_renames(["ID", "amount", "dt"], ["id", "dt", "Amount"], False) == {"ID": "id", "amount": "Amount"}
    assert case_renames(["ID"], ["id"], True) == {}


def test_column_names_match_case_insensitively(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    df = spark.createDataFrame([(4, "d", 4.0)], "ID long, DT string, amount double")
    df.write.format("mergetable").mode("append").save(table_uri)
    assert (4, "d", 4.0) in _rows(t)
    with pytest.raises(Exception, match="column is not in the table schema"):
        df.write.format("mergetable").mode("append").option("caseSensitive", "true").save(table_uri)


def test_writes_from_other_threads(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    errors: list[BaseException] = []

    def write(i: int) -> None:
        try:
            session = spark.newSession() if i % 2 else spark
            rows = [(100 + i, "t", float(i))]
            session.createDataFrame(rows, "id long, dt string, Amount double").write.format("mergetable").mode(
                "append"
            ).save(table_uri)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(3)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == [], [str(e)[-3000:] for e in errors]
    assert sorted(r[0] for r in _rows(t) if r[1] == "t") == [100, 101, 102]
