"""The Python ``Table.delete/update/merge`` and Spark's ``MergeTable`` give the same table for the same
statements (same clauses, order, rules), on the deduplicate and partial-update engines."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from pyspark.sql import functions as F

import mergetable as mt
from mergetable.core.errors import MergeError
from mergetable.spark import MergeTable

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64())])
SOURCE = pa.table(
    {
        "id": list(range(5, 15)),
        "name": [f"s{i}" for i in range(5, 15)],
        "v": [float(-i) if i % 4 == 0 else (None if i == 7 else float(i * 10)) for i in range(5, 15)],
    },
    schema=SCHEMA,
)


def _pair(base: str, **options: str) -> tuple[mt.Table, mt.Table]:
    out = []
    for side in ("py", "spark"):
        t = mt.create_table(f"{base}-{side}", SCHEMA, ["id"], options={"bucket": "2", **options})
        t.write(
            pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)], "v": [float(i) for i in range(10)]})
        )
        out.append(t)
    return out[0], out[1]


def _rows(t: mt.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(r.values()) for r in t.read().to_pylist())


def test_delete_update_merge_agree(spark: Any, table_uri: str) -> None:
    py, sp = _pair(table_uri)
    dt = MergeTable.forPath(spark, sp.uri)

    py.delete([[("v", "<", 2)], [("name", "=", "n7")]])
    dt.delete("v < 2 OR name = 'n7'")
    assert _rows(py) == _rows(sp)

    py.update([("id", ">=", 5)], {"v": pc.field("v") * 10, "name": "'upd'"})
    dt.update("id >= 5", {"v": "v * 10", "name": "'upd'"})
    assert _rows(py) == _rows(sp)

    (
        py.merge(SOURCE, source_alias="s", target_alias="t")
        .when_matched_delete(pc.field("s.v") < 0)
        .when_matched_update({"v": pc.field("s.v"), "name": pc.binary_join_element_wise(pc.field("t.name"), "+", "")})
        .when_not_matched_insert(
            {"id": pc.field("s.id"), "name": pc.field("s.name"), "v": pc.field("s.v")}, pc.field("s.id") < 13
        )
        .when_not_matched_by_source_delete(pc.field("t.id") < 3)
        .execute()
    )
    source = spark.createDataFrame(SOURCE.to_pylist(), "id long, name string, v double")
    (
        dt.alias("t")
        .merge(source.alias("s"), "t.id = s.id")
        .whenMatchedDelete("s.v < 0")
        .whenMatchedUpdate(set={"v": "s.v", "name": "concat(t.name, '+')"})
        .whenNotMatchedInsert("s.id < 13", values={"id": "s.id", "name": "s.name", "v": F.col("s.v")})
        .whenNotMatchedBySourceDelete(F.col("t.id") < 3)
        .execute()
    )
    assert _rows(py) == _rows(sp)

    (
        py.merge(SOURCE)
        .when_matched_update_all(pc.field("source.id") >= 9)
        .when_not_matched_insert_all()
        .when_not_matched_by_source_update({"v": -1.0}, pc.field("target.v").is_valid())
        .execute()
    )
    (
        dt.alias("target")
        .merge(source.alias("source"), "target.id = source.id")
        .whenMatchedUpdateAll("source.id >= 9")
        .whenNotMatchedInsertAll()
        .whenNotMatchedBySourceUpdate("target.v IS NOT NULL", set={"v": "-1.0"})
        .execute()
    )
    assert _rows(py) == _rows(sp)


def test_partial_update_and_ambiguous_matches_agree(spark: Any, table_uri: str) -> None:
    py, sp = _pair(table_uri, **{"merge-engine": "partial-update"})
    dt = MergeTable.forPath(spark, sp.uri)
    py.update([("id", "<", 3)], {"v": pc.field("v") + 1})
    dt.update("id < 3", {"v": "v + 1"})
    assert _rows(py) == _rows(sp)
    dup = pa.table({"id": [1, 1], "name": ["a", "b"], "v": [1.0, 2.0]}, schema=SCHEMA)
    with pytest.raises(MergeError, match="several source rows"):
        py.merge(dup).when_matched_update_all().execute()
    with pytest.raises(MergeError, match="several source rows"):
        dt.alias("t").merge(
            spark.createDataFrame(dup.to_pylist(), "id long, name string, v double").alias("s"), "t.id = s.id"
        ).whenMatchedUpdateAll().execute()
    assert _rows(py) == _rows(sp)


def _plain_rows(t: mt.Table) -> list[tuple[Any, ...]]:
    """The rows with NaN spelled out (NaN is not equal to itself in a tuple comparison)."""
    return sorted(tuple("NaN" if v != v else v for v in r.values()) for r in t.read().to_pylist())


def test_evolved_schema_nan_conditions_and_no_clause_agree(spark: Any, table_uri: str) -> None:
    py, sp = _pair(table_uri)
    for t in (py, sp):
        t.write({"id": [20], "name": ["nan"], "v": [float("nan")]})
        t.alter.rename_column("name", "label")
        t.alter.add_columns(pa.field("n", pa.int64()))  # the latest snapshot was written before both changes
    dt = MergeTable.forPath(spark, sp.uri)
    py.update(
        [("id", "<", 3)], {"n": pc.field("id") * 2, "label": pc.binary_join_element_wise(pc.field("label"), "!", "")}
    )
    dt.update("id < 3", {"n": "id * 2", "label": "concat(label, '!')"})
    assert _plain_rows(py) == _plain_rows(sp)

    src = pa.table({"id": [1, 2, 20, 30], "w": [float("nan")] * 4})
    (
        py.merge(src)
        .when_matched_update({"n": 9}, condition=pc.field("source.w") == pc.field("target.v"))
        .when_matched_update({"n": 7}, condition=pc.field("source.w") > pc.field("target.v"))
        .execute()
    )
    source = spark.createDataFrame(src.to_pylist(), "id long, w double").alias("source")
    (
        dt.alias("target")
        .merge(source, "target.id = source.id")
        .whenMatchedUpdate("source.w = target.v", set={"n": "9"})
        .whenMatchedUpdate("source.w > target.v", set={"n": "7"})
        .execute()
    )
    assert _plain_rows(py) == _plain_rows(sp)
    assert {r["id"]: r["n"] for r in py.read(filter=[("id", "in", [1, 2, 20])]).to_pylist()} == {1: 7, 2: 7, 20: 9}

    with pytest.raises(MergeError, match="no clause was added"):
        py.merge(src).execute()
    with pytest.raises(MergeError, match="no clause was added"):
        dt.alias("t").merge(source.alias("s"), "t.id = s.id").execute()
    assert _plain_rows(py) == _plain_rows(sp)
