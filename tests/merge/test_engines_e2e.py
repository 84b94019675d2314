"""Seed examples through real tables: several commits, read back, then full compaction and read again."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.functions import bitmap_values, hll_estimate, hll_sketch, to_bitmap


def table(
    uri: str, fields: list[tuple[str, pa.DataType]], options: dict[str, str], pk: tuple[str, ...] = ("k",)
) -> mt.Table:
    schema = pa.schema([pa.field(n, t, n not in pk) for n, t in fields])
    return mt.create_table(uri, schema, primary_key=list(pk), options=options)


def insert(
    t: mt.Table, rows: list[tuple[Any, ...]], row_kind: str | None = None, target_columns: list[str] | None = None
) -> None:
    arrow = t.table_schema.arrow_schema
    cols = target_columns or arrow.names
    data = pa.table({c: pa.array([r[i] for r in rows], arrow.field(c).type) for i, c in enumerate(cols)})
    t.write(data, row_kind=row_kind, target_columns=target_columns)


def read(t: mt.Table) -> list[dict[str, Any]]:
    keys = list(t.table_schema.primary_keys)
    return sorted(t.read().to_pylist(), key=lambda r: tuple(r[k] for k in keys))


def read_before_and_after_compaction(t: mt.Table) -> list[dict[str, Any]]:
    before = read(t)
    t.compact(full=True)
    assert read(t) == before
    return before


def test_aggregation_example(table_uri: str) -> None:
    t = table(
        table_uri,
        [("k", pa.int64()), ("price", pa.float64()), ("sales", pa.int64())],
        {
            "merge-engine": "aggregation",
            "fields.price.aggregate-function": "max",
            "fields.sales.aggregate-function": "sum",
        },
    )
    insert(t, [(1, 23.0, 15)])
    insert(t, [(1, 30.2, 20), (2, 1.0, 1)])
    assert read_before_and_after_compaction(t) == [
        {"k": 1, "price": 30.2, "sales": 35},
        {"k": 2, "price": 1.0, "sales": 1},
    ]
    insert(t, [(1, 10.0, 5)])
    assert read(t)[0] == {"k": 1, "price": 30.2, "sales": 40}


def test_partial_update_example(table_uri: str) -> None:
    t = table(
        table_uri,
        [("k", pa.int64()), ("a", pa.float64()), ("b", pa.int64()), ("c", pa.string())],
        {"merge-engine": "partial-update"},
    )
    insert(t, [(1, 23.0, 10, None)])
    insert(t, [(1, None, None, "This is a book")])
    insert(t, [(1, 25.2, None, None)])
    assert read_before_and_after_compaction(t) == [{"k": 1, "a": 25.2, "b": 10, "c": "This is a book"}]


def test_sequence_group_example(table_uri: str) -> None:
    cols = ["k", "a", "b", "g_1", "c", "d", "g_2"]
    t = table(
        table_uri,
        [(c, pa.int32()) for c in cols],
        {"merge-engine": "partial-update", "fields.g_1.sequence-group": "a,b", "fields.g_2.sequence-group": "c,d"},
    )
    insert(t, [(1, 1, 1, 1, 1, 1, 1)])
    insert(t, [(1, 2, 2, 2, 2, 2, None)])
    assert read(t) == [dict(zip(cols, (1, 2, 2, 2, 1, 1, 1), strict=True))]
    insert(t, [(1, 3, 3, 1, 3, 3, 3)])
    assert read_before_and_after_compaction(t) == [dict(zip(cols, (1, 2, 2, 2, 3, 3, 3), strict=True))]


def test_partial_update_aggregation_example(table_uri: str) -> None:
    t = table(
        table_uri,
        [(c, pa.int32()) for c in ["k", "a", "b", "c", "d"]],
        {
            "merge-engine": "partial-update",
            "fields.a.sequence-group": "b",
            "fields.b.aggregate-function": "first_value",
            "fields.c.sequence-group": "d",
            "fields.d.aggregate-function": "sum",
        },
    )
    for row in [(1, 1, 1, None, None), (1, None, None, 1, 1), (1, 2, 2, None, None), (1, None, None, 2, 2)]:
        insert(t, [row])
    assert read_before_and_after_compaction(t) == [{"k": 1, "a": 2, "b": 1, "c": 2, "d": 3}]


def test_rbm32_example(table_uri: str) -> None:
    t = table(
        table_uri,
        [("user_id", pa.int32()), ("visit_bitmap", pa.binary())],
        {"merge-engine": "aggregation", "fields.visit_bitmap.aggregate-function": "rbm32"},
        ("user_id",),
    )
    insert(t, [(1, to_bitmap(100, 101, 102)), (2, to_bitmap(101, 103)), (3, to_bitmap(102, 104))])
    insert(t, [(1, to_bitmap(103, 105)), (2, to_bitmap(104, 106))])
    got = {r["user_id"]: bitmap_values(r["visit_bitmap"]) for r in read_before_and_after_compaction(t)}
    assert got == {1: [100, 101, 102, 103, 105], 2: [101, 103, 104, 106], 3: [102, 104]}


def test_hll_sketch_example(table_uri: str) -> None:
    t = table(
        table_uri,
        [("id", pa.int32()), ("uv", pa.binary())],
        {"merge-engine": "aggregation", "fields.uv.aggregate-function": "hll_sketch"},
        ("id",),
    )
    for user in ["u1", "u2", "u1", "u3"]:
        insert(t, [(1, hll_sketch(user))])
    assert round(hll_estimate(read_before_and_after_compaction(t)[0]["uv"])) == 3


def test_fluss_product_stats_and_listagg(table_uri: str) -> None:
    t = table(
        table_uri,
        [
            ("product_id", pa.int64()),
            ("price", pa.float64()),
            ("sales", pa.int64()),
            ("tags", pa.string()),
            ("ts", pa.timestamp("ms")),
        ],
        {
            "table.merge-engine": "aggregation",
            "fields.price.agg": "max",
            "fields.sales.agg": "sum",
            "fields.tags.agg": "listagg",
            "fields.tags.listagg.delimiter": ";",
        },
        ("product_id",),
    )
    insert(t, [(1, 23.0, 15, "developer", dt.datetime(2024, 1, 1, 10))])
    insert(t, [(1, 30.2, 20, "java", dt.datetime(2024, 1, 1, 11))])
    insert(t, [(1, None, None, "flink", None)])
    assert read_before_and_after_compaction(t) == [
        {"product_id": 1, "price": 30.2, "sales": 35, "tags": "developer;java;flink", "ts": dt.datetime(2024, 1, 1, 11)}
    ]


def test_first_row_visible_before_compaction(table_uri: str) -> None:
    t = table(table_uri, [("k", pa.int64()), ("v", pa.string())], {"merge-engine": "first-row"})
    insert(t, [(1, "first")])
    assert read(t) == [{"k": 1, "v": "first"}]
    insert(t, [(1, "second"), (2, "x")])
    assert read_before_and_after_compaction(t) == [{"k": 1, "v": "first"}, {"k": 2, "v": "x"}]


def test_versioned(table_uri: str) -> None:
    t = table(
        table_uri,
        [("k", pa.int64()), ("ver", pa.int64()), ("v", pa.string())],
        {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "ver"},
    )
    insert(t, [(1, 5, "five")])
    insert(t, [(1, 3, "three")])
    assert read(t) == [{"k": 1, "ver": 5, "v": "five"}]
    insert(t, [(1, 5, "tie")])
    insert(t, [(1, None, "null")], row_kind="-D")  # deletes are ignored
    assert read_before_and_after_compaction(t) == [{"k": 1, "ver": 5, "v": "tie"}]


def _fluss_agg(uri: str, behavior: str) -> mt.Table:
    return table(
        uri,
        [
            ("id", pa.int64()),
            ("count1", pa.int64()),
            ("sum1", pa.int64()),
            ("count2", pa.int64()),
            ("sum2", pa.int64()),
        ],
        {
            "table.merge-engine": "aggregation",
            "table.delete.behavior": behavior,
            **{f"fields.{c}.agg": "sum" for c in ["count1", "sum1", "count2", "sum2"]},
        },
        ("id",),
    )


def test_fluss_delete_behaviors(tmp_path: Any) -> None:
    ignore = _fluss_agg(str(tmp_path / "ignore"), "ignore")
    insert(ignore, [(1, 1, 10, 2, 20)])
    insert(ignore, [(1, None, None, None, None)], row_kind="-D")
    assert read(ignore) == [{"id": 1, "count1": 1, "sum1": 10, "count2": 2, "sum2": 20}]
    disable = _fluss_agg(str(tmp_path / "disable"), "disable")
    insert(disable, [(1, 1, 10, 2, 20)])
    with pytest.raises(mt.MergeError, match="Delete operations are disabled"):
        insert(disable, [(1, None, None, None, None)], row_kind="-D")
    allow = _fluss_agg(str(tmp_path / "allow"), "allow")
    insert(allow, [(1, 1, 10, 2, 20), (2, 1, 1, 1, 1)])
    insert(allow, [(1, 1, 10, 2, 20)])
    insert(allow, [(1, None, None, None, None)], row_kind="-D")
    assert read_before_and_after_compaction(allow) == [{"id": 2, "count1": 1, "sum1": 1, "count2": 1, "sum2": 1}]


def test_fluss_partial_update_and_partial_delete(table_uri: str) -> None:
    t = _fluss_agg(table_uri, "allow")
    insert(t, [(1, 1, 10, 2, 20)])
    insert(t, [(1, 1, 5)], target_columns=["id", "count1", "sum1"])
    assert read(t) == [{"id": 1, "count1": 2, "sum1": 15, "count2": 2, "sum2": 20}]
    insert(t, [(1, None, None)], row_kind="-D", target_columns=["id", "count1", "sum1"])
    assert read(t) == [{"id": 1, "count1": None, "sum1": None, "count2": 2, "sum2": 20}]
    insert(t, [(1, None, None)], row_kind="-D", target_columns=["id", "count2", "sum2"])
    assert read_before_and_after_compaction(t) == []


def test_invalid_options_rejected_at_create(table_uri: str) -> None:
    with pytest.raises(mt.OptionsError, match="Could not find any factory for identifier 'count'"):
        table(
            table_uri,
            [("k", pa.int64()), ("v", pa.int64())],
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "count"},
        )
    with pytest.raises(mt.SchemaError, match="Data type for sum column must be 'NumericType' but was 'STRING'"):
        table(
            table_uri,
            [("k", pa.int64()), ("v", pa.string())],
            {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
        )
