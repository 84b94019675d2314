"""``MergeTable``: Delta's delete/update/merge on each merge engine, against oracles computed with plain
DataFrame operations, plus history, restore, optimize and vacuum."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

import mergetable as mt
from mergetable.core.errors import MergeError, OptionsError, SchemaError, UnsupportedError
from mergetable.metadata.models import CommitKind
from mergetable.spark import MergeTable

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())])


def _table(uri: str, n: int = 10, **options: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "2", **options})
    t.write(
        pa.table(
            {"id": list(range(n)), "name": [f"n{i}" for i in range(n)], "v": [float(i) for i in range(n)]},
            schema=SCHEMA,
        )
    )
    return t


def _rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in df.select("id", "name", "v").collect())


def _table_rows(t: mt.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.read().to_pylist())


def _data_commits(t: mt.Table) -> int:
    """Snapshots other than the compactions that writes trigger."""
    return sum(1 for s in t.snapshots() if s.commit_kind is not CommitKind.COMPACT)


def _holds(cond: Any) -> Any:
    return F.coalesce(cond, F.lit(False))


def _source(spark: Any) -> DataFrame:
    rows = [(i, f"s{i}", float(-i) if i % 4 == 0 else (None if i == 7 else float(i * 10))) for i in range(5, 15)]
    return spark.createDataFrame(rows, "id long, name string, v double")


def test_delete_and_update_equal_the_dataframe_oracle(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    dt = MergeTable.forPath(spark, table_uri)
    before = dt.toDF()
    expected = _rows(before.filter(~_holds(F.expr("v < 3 OR name = 'n7'"))))
    dt.delete("v < 3 OR name = 'n7'")
    assert _table_rows(t) == expected
    before = dt.toDF()
    cond = F.col("id") % 2 == 0
    expected = _rows(
        before.select(
            "id",
            F.when(cond, F.upper("name")).otherwise(F.col("name")).alias("name"),
            F.when(cond, F.col("v") * 10).otherwise(F.col("v")).alias("v"),
        )
    )
    snaps = _data_commits(t)
    dt.update(cond, {"v": "v * 10", "name": F.upper(F.col("name"))})
    assert _table_rows(t) == expected
    assert _data_commits(t) == snaps + 1  # one commit
    dt.delete()
    assert t.read().num_rows == 0


def test_merge_equals_the_dataframe_oracle(spark: Any, table_uri: str) -> None:
    t = _table(table_uri)
    dt = MergeTable.forPath(spark, table_uri)
    target, source = dt.toDF().alias("t"), _source(spark).alias("s")
    on = F.col("t.id") == F.col("s.id")
    matched = target.join(source, on)
    m_delete = _holds(F.col("s.v") < 0)
    updated = matched.filter(~m_delete).select(
        "t.id", F.concat(F.col("t.name"), F.lit("+")).alias("name"), F.col("s.v").alias("v")
    )
    inserted = source.join(target, on, "left_anti").filter(F.col("s.id") < 13).select("s.id", "s.name", "s.v")
    kept = target.join(source, on, "left_anti").filter(~_holds(F.col("t.id") < 2)).select("t.id", "t.name", "t.v")
    expected = _rows(updated.unionByName(inserted).unionByName(kept))

    snaps = _data_commits(t)
    (
        dt.alias("t")
        .merge(_source(spark).alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.v < 0")
        .whenMatchedUpdate(set={"v": "s.v", "name": "concat(t.name, '+')"})
        .whenNotMatchedInsert("s.id < 13", values={"id": "s.id", "name": "s.name", "v": F.col("s.v")})
        .whenNotMatchedBySourceDelete(F.col("t.id") < 2)
        .execute()
    )
    assert _table_rows(t) == expected
    assert _data_commits(t) == snaps + 1


def test_merge_all_clauses_and_clause_order(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=6)
    dt = MergeTable.forPath(spark, table_uri)
    target, source = dt.toDF().alias("t"), _source(spark).alias("s")
    on = F.col("t.id") == F.col("s.id")
    # first matching clause wins: ids divisible by 5 are deleted before the update-all can apply
    updated = target.join(source, on).filter(~_holds(F.col("s.id") % 5 == 0)).select("s.id", "s.name", "s.v")
    inserted = source.join(target, on, "left_anti").select("s.id", "s.name", "s.v")
    kept = target.join(source, on, "left_anti").select("t.id", "t.name", "t.v")
    expected = _rows(updated.unionByName(inserted).unionByName(kept))
    (
        dt.alias("t")
        .merge(_source(spark).alias("s"), F.col("t.id") == F.col("s.id"))
        .whenMatchedDelete("s.id % 5 = 0")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll()
        .execute()
    )
    assert _table_rows(t) == expected


def test_a_target_row_matched_twice_is_an_error_and_changes_nothing(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=4)
    dt = MergeTable.forPath(spark, table_uri)
    before, snaps = _table_rows(t), len(t.snapshots())
    dup = spark.createDataFrame([(1, "a", 1.0), (1, "b", 2.0)], "id long, name string, v double")
    with pytest.raises(MergeError, match=r'several source rows.*"id": 1'):
        dt.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedUpdateAll().execute()
    assert _table_rows(t) == before and _data_commits(t) == snaps
    # an unconditional delete is allowed to match a row several times, as in Delta
    dt.alias("t").merge(dup.alias("s"), "t.id = s.id").whenMatchedDelete().execute()
    assert [r[0] for r in _table_rows(t)] == [0, 2, 3]


def test_bad_clauses_are_typed_errors(spark: Any, table_uri: str) -> None:
    _table(table_uri, n=2)
    dt = MergeTable.forPath(spark, table_uri)
    with pytest.raises(SchemaError, match="'nope'"):
        dt.update("id = 1", {"nope": "1"})
    with pytest.raises(SchemaError, match="primary-key column"):
        dt.update("id = 1", {"id": "id + 1"})
    with pytest.raises(SchemaError, match="primary key"):
        dt.merge(_source(spark), "id = id").whenNotMatchedInsert(values={"v": "1.0"})


def test_partial_update_engine(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=4, **{"merge-engine": "partial-update"})
    dt = MergeTable.forPath(spark, table_uri)
    with pytest.raises(OptionsError, match=r"partial-update\.remove-record-on-delete"):
        dt.delete("id = 1")
    before = dt.toDF()
    expected = _rows(
        before.select("id", "name", F.when(F.col("id") < 2, F.col("v") + 1).otherwise(F.col("v")).alias("v"))
    )
    dt.update("id < 2", {"v": "v + 1"})
    assert _table_rows(t) == expected
    with pytest.raises(MergeError, match="NULL"):
        dt.update("id = 3", {"name": "CAST(NULL AS STRING)"})
    assert _table_rows(t) == expected


def test_partial_update_with_remove_record_on_delete(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=4, **{"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"})
    MergeTable.forPath(spark, table_uri).delete("id >= 2")
    assert [r[0] for r in _table_rows(t)] == [0, 1]


def test_aggregation_engine(spark: Any, table_uri: str) -> None:
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
    t = _table(table_uri, n=4, **opts)
    dt = MergeTable.forPath(spark, table_uri)
    with pytest.raises(OptionsError, match=r"aggregation\.remove-record-on-delete"):
        dt.delete("id = 1")
    with pytest.raises(UnsupportedError, match="aggregat"):
        dt.update("id = 1", {"v": "0"})
    with pytest.raises(OptionsError, match=r"aggregation\.remove-record-on-delete"):
        dt.merge(_source(spark), "id = id").whenMatchedDelete()
    src = spark.createDataFrame([(3, "x", 5.0), (20, "y", 1.0)], "id long, name string, v double")
    dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    assert _table_rows(t) == [(0, "n0", 0.0), (1, "n1", 1.0), (2, "n2", 2.0), (3, "n3", 3.0), (20, "y", 1.0)]
    t2 = _table(table_uri + "2", n=4, **opts, **{"aggregation.remove-record-on-delete": "true"})
    MergeTable.forPath(spark, t2.uri).delete("id < 2")
    assert [r[0] for r in _table_rows(t2)] == [2, 3]


def test_first_row_engine(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=3, **{"merge-engine": "first-row"})
    dt = MergeTable.forPath(spark, table_uri)
    with pytest.raises(UnsupportedError, match="first-row"):
        dt.delete("id = 1")
    with pytest.raises(UnsupportedError, match="first-row"):
        dt.update("id = 1", {"v": "0"})
    src = spark.createDataFrame([(1, "x", 9.0), (5, "y", 1.0)], "id long, name string, v double")
    dt.alias("t").merge(src.alias("s"), "t.id = s.id").whenNotMatchedInsertAll().execute()
    assert _table_rows(t) == [(0, "n0", 0.0), (1, "n1", 1.0), (2, "n2", 2.0), (5, "y", 1.0)]


def test_history_restore_optimize_vacuum(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=4)
    dt = MergeTable.forPath(spark, table_uri)
    at_1 = _table_rows(t)
    dt.delete("id = 0")
    dt.update("id = 1", {"v": "-1.0"})
    history = dt.history().collect()
    assert [h.version for h in history] == [3, 2, 1]
    assert history[-1].operation == "APPEND" and dt.history(1).count() == 1
    restored = dt.restoreToVersion(1)
    assert restored is not None and restored.properties == {"restored-from": "1"}
    assert _table_rows(t) == at_1
    dt.delete("id = 3")
    dt.restoreToTimestamp(t.snapshot(3).time_millis)
    assert [r[0] for r in _table_rows(t)] == [1, 2, 3]
    before = _table_rows(t)
    compacted = dt.optimize().executeCompaction()
    assert compacted is not None and compacted.commit_kind is CommitKind.COMPACT
    assert _table_rows(t) == before
    dt.vacuum()
    assert _table_rows(t) == before
    with pytest.raises(mt.MergeTableError, match="retentionHours"):
        dt.vacuum(0)


def test_versioned_engine(spark: Any, table_uri: str) -> None:
    t = _table(table_uri, n=3, **{"merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "id"})
    dt = MergeTable.forPath(spark, table_uri)
    with pytest.raises(UnsupportedError, match="versioned"):
        dt.delete("id = 1")
    before = dt.toDF()
    expected = _rows(
        before.select("id", F.when(F.col("id") == 1, F.lit("x")).otherwise(F.col("name")).alias("name"), "v")
    )
    dt.update("id = 1", {"name": "'x'"})  # the same version: the newer row wins
    assert _table_rows(t) == expected
