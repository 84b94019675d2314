"""Every user-facing example of the seed documents (Paimon and Fluss merge-engine docs), at the merge
function level: each INSERT statement is one commit (pre-merged, then merged with the earlier ones)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest
from merge_support import commits, engine, kv, make_schema, merge, visible
from pyroaring import BitMap, BitMap64

from mergetable.core.errors import MergeError
from mergetable.functions import (
    bitmap_cardinality,
    bitmap_contains,
    bitmap_values,
    hll_estimate,
    hll_sketch,
    theta_estimate,
    theta_sketch,
    to_bitmap,
    to_bitmap64,
)


def ts(hour: int, day: int = 1) -> dt.datetime:
    return dt.datetime(2024, 1, day, hour)


# -- Paimon: primary-key table / merge engine pages -----------------------------------------------------
def test_deduplicate_keeps_latest_and_delete_removes() -> None:
    s = make_schema([("k", pa.int64()), ("v", pa.string())])
    fn = engine(s)
    assert visible(s, commits(fn, s, [[(1, "a")], [(1, "b")]])) == [{"k": 1, "v": "b"}]
    assert visible(s, commits(fn, s, [[(1, "a")], [(1, "b")]], kinds=[None, "-D"])) == []


def test_paimon_partial_update_example() -> None:
    s = make_schema(
        [("k", pa.int64()), ("a", pa.float64()), ("b", pa.int64()), ("c", pa.string())],
        options={"merge-engine": "partial-update"},
    )
    fn = engine(s)
    batches = [[(1, 23.0, 10, None)], [(1, None, None, "This is a book")], [(1, 25.2, None, None)]]
    expected = [{"k": 1, "a": 25.2, "b": 10, "c": "This is a book"}]
    assert visible(s, commits(fn, s, batches)) == expected
    assert visible(s, merge(fn, kv(s, [r for b in batches for r in b]))) == expected


def test_paimon_partial_update_rejects_delete_by_default() -> None:
    s = make_schema([("k", pa.int64()), ("a", pa.int64())], options={"merge-engine": "partial-update"})
    with pytest.raises(MergeError, match="By default, Partial update can not accept delete records"):
        merge(engine(s), kv(s, [(1, 1), (1, 1)], ["+I", "-D"]))
    s = make_schema(
        [("k", pa.int64()), ("a", pa.int64())],
        options={"merge-engine": "partial-update", "partial-update.ignore-delete": "true"},
    )
    assert visible(s, merge(engine(s), kv(s, [(1, 1), (1, 1)], ["+I", "-D"]))) == [{"k": 1, "a": 1}]


def test_paimon_sequence_group_example() -> None:
    cols = ["k", "a", "b", "g_1", "c", "d", "g_2"]
    s = make_schema(
        [(c, pa.int32()) for c in cols],
        options={
            "merge-engine": "partial-update",
            "fields.g_1.sequence-group": "a,b",
            "fields.g_2.sequence-group": "c,d",
        },
    )
    fn = engine(s)
    first = [(1, 1, 1, 1, 1, 1, 1)]
    second = [(1, 2, 2, 2, 2, 2, None)]  # g_2 is null: c and d must not be updated
    third = [(1, 3, 3, 1, 3, 3, 3)]  # g_1 is smaller: a and b must not be updated
    assert visible(s, commits(fn, s, [first, second])) == [dict(zip(cols, (1, 2, 2, 2, 1, 1, 1), strict=True))]
    assert visible(s, commits(fn, s, [first, second, third])) == [dict(zip(cols, (1, 2, 2, 2, 3, 3, 3), strict=True))]


def test_paimon_aggregation_in_partial_update_example() -> None:
    s = make_schema(
        [(c, pa.int32()) for c in ["k", "a", "b", "c", "d"]],
        options={
            "merge-engine": "partial-update",
            "fields.a.sequence-group": "b",
            "fields.b.aggregate-function": "first_value",
            "fields.c.sequence-group": "d",
            "fields.d.aggregate-function": "sum",
        },
    )
    fn = engine(s)
    batches = [[(1, 1, 1, None, None)], [(1, None, None, 1, 1)], [(1, 2, 2, None, None)], [(1, None, None, 2, 2)]]
    expected = [{"k": 1, "a": 2, "b": 1, "c": 2, "d": 3}]
    assert visible(s, commits(fn, s, batches)) == expected
    assert visible(s, merge(fn, kv(s, [r for b in batches for r in b]))) == expected


def test_paimon_aggregation_example() -> None:
    s = make_schema(
        [("product_id", pa.int64()), ("price", pa.float64()), ("sales", pa.int64())],
        ["product_id"],
        {
            "merge-engine": "aggregation",
            "fields.price.aggregate-function": "max",
            "fields.sales.aggregate-function": "sum",
        },
    )
    result = commits(engine(s), s, [[(1, 23.0, 15)], [(1, 30.2, 20)]])
    assert visible(s, result) == [{"product_id": 1, "price": 30.2, "sales": 35}]


def test_paimon_count_via_sum() -> None:
    s = make_schema(
        [("k", pa.int64()), ("cnt", pa.int64())],
        options={"merge-engine": "aggregation", "fields.cnt.aggregate-function": "sum"},
    )
    assert visible(s, merge(engine(s), kv(s, [(1, 1), (1, 0), (1, 1)]))) == [{"k": 1, "cnt": 2}]


def test_paimon_rbm32_example() -> None:
    s = make_schema(
        [("user_id", pa.int32()), ("visit_bitmap", pa.binary())],
        ["user_id"],
        {"merge-engine": "aggregation", "fields.visit_bitmap.aggregate-function": "rbm32"},
    )
    result = commits(
        engine(s),
        s,
        [
            [(1, to_bitmap(100, 101, 102)), (2, to_bitmap(101, 103)), (3, to_bitmap(102, 104))],
            [(1, to_bitmap(103, 105)), (2, to_bitmap(104, 106))],
        ],
    )
    got = {r["user_id"]: bitmap_values(r["visit_bitmap"]) for r in visible(s, result)}
    assert got == {1: [100, 101, 102, 103, 105], 2: [101, 103, 104, 106], 3: [102, 104]}
    user1 = next(r["visit_bitmap"] for r in visible(s, result) if r["user_id"] == 1)
    assert bitmap_cardinality(user1) == 5 and bitmap_contains(user1, 101) and not bitmap_contains(user1, 104)
    assert BitMap.deserialize(user1) == BitMap([100, 101, 102, 103, 105])


def test_paimon_rbm64_example() -> None:
    s = make_schema(
        [("session_id", pa.int64()), ("interaction_bitmap", pa.binary())],
        ["session_id"],
        {"merge-engine": "aggregation", "fields.interaction_bitmap.aggregate-function": "rbm64"},
    )
    result = commits(
        engine(s),
        s,
        [
            [
                (1001, to_bitmap64(1000000001, 1000000002, 1000000003)),
                (1002, to_bitmap64(1000000002, 1000000004)),
                (1003, to_bitmap64(1000000003, 1000000005)),
            ],
            [(1001, to_bitmap64(1000000004, 1000000006)), (1002, to_bitmap64(1000000005, 1000000007))],
        ],
    )
    got = {r["session_id"]: list(BitMap64.deserialize(r["interaction_bitmap"])) for r in visible(s, result)}
    assert got == {
        1001: [1000000001, 1000000002, 1000000003, 1000000004, 1000000006],
        1002: [1000000002, 1000000004, 1000000005, 1000000007],
        1003: [1000000003, 1000000005],
    }


def test_paimon_nested_update_example() -> None:
    sub = pa.struct([("sub_order_id", pa.int64()), ("product_name", pa.string()), ("price", pa.int64())])
    s = make_schema(
        [("order_id", pa.int64()), ("user_name", pa.string()), ("address", pa.string()), ("sub_orders", pa.list_(sub))],
        ["order_id"],
        {
            "merge-engine": "aggregation",
            "fields.sub_orders.aggregate-function": "nested_update",
            "fields.sub_orders.nested-key": "sub_order_id",
        },
    )

    def so(i: int, name: str, price: int) -> list[dict[str, object]]:
        return [{"sub_order_id": i, "product_name": name, "price": price}]

    # orders UNION ALL sub_orders, as in the example
    rows = [(1, "Alice", "Street 1", None), (1, None, None, so(1, "apple", 3)), (1, None, None, so(2, "pear", 4))]
    rows += [(2, "Bob", "Street 2", None), (2, None, None, so(1, "plum", 5))]
    result = visible(s, merge(engine(s), kv(s, rows)))
    assert result == [
        {
            "order_id": 1,
            "user_name": "Alice",
            "address": "Street 1",
            "sub_orders": so(1, "apple", 3) + so(2, "pear", 4),
        },
        {"order_id": 2, "user_name": "Bob", "address": "Street 2", "sub_orders": so(1, "plum", 5)},
    ]
    # a sub-order updated later replaces the nested row with the same key
    later = commits(engine(s), s, [rows, [(1, None, None, so(2, "pear", 6))]])
    assert visible(s, later)[0]["sub_orders"] == so(1, "apple", 3) + so(2, "pear", 6)


def test_paimon_collect_and_merge_map_examples() -> None:
    s = make_schema(
        [("k", pa.int64()), ("tags", pa.list_(pa.string())), ("m", pa.map_(pa.int32(), pa.string()))],
        options={
            "merge-engine": "aggregation",
            "fields.tags.aggregate-function": "collect",
            "fields.tags.distinct": "true",
            "fields.m.aggregate-function": "merge_map",
        },
    )
    fn = engine(s)
    out = visible(s, merge(fn, kv(s, [(1, ["a", "b"], [(1, "A")]), (1, ["b", "c"], [(1, "B"), (2, "C")])])))
    assert out == [{"k": 1, "tags": ["a", "b", "c"], "m": [(1, "B"), (2, "C")]}]
    # retraction docs: collect +I['A','B'] then -U['A'] gives ['B']; the retract arriving first does nothing
    s2 = make_schema(
        [("k", pa.int64()), ("tags", pa.list_(pa.string()))],
        options={"merge-engine": "aggregation", "fields.tags.aggregate-function": "collect"},
    )
    fn2 = engine(s2)
    assert visible(s2, merge(fn2, kv(s2, [(1, ["A", "B"]), (1, ["A"])], ["+I", "-U"])))[0]["tags"] == ["B"]
    disordered = commits(fn2, s2, [[(1, ["A"]), (1, ["X"])], [(1, ["A", "B"])]], kinds=[["-U", "+I"], None])
    assert visible(s2, disordered)[0]["tags"] == ["X", "A", "B"]
    # merge_map: one upstream's -D retracts the key merged from another upstream
    s3 = make_schema(
        [("k", pa.int64()), ("m", pa.map_(pa.int32(), pa.string()))],
        options={"merge-engine": "aggregation", "fields.m.aggregate-function": "merge_map"},
    )
    rows = kv(s3, [(1, [(1, "A")]), (1, [(1, "B")]), (1, [(1, "B")])], ["+I", "+I", "-D"])
    assert visible(s3, merge(engine(s3), rows))[0]["m"] == []


def test_paimon_hll_sketch_example() -> None:
    s = make_schema(
        [("id", pa.int32()), ("uv", pa.binary())],
        ["id"],
        {"merge-engine": "aggregation", "fields.uv.aggregate-function": "hll_sketch"},
    )
    visits = [
        (1, "u1"),
        (1, "u2"),
        (1, "u1"),
        (2, "u3"),
        (1, "u4"),
    ]  # INSERT INTO UV_AGG SELECT id, HLL_SKETCH(user_id)
    result = visible(s, merge(engine(s), kv(s, [(i, hll_sketch(u)) for i, u in visits])))
    assert {r["id"]: round(hll_estimate(r["uv"])) for r in result} == {1: 3, 2: 1}


def test_paimon_theta_sketch_example() -> None:
    s = make_schema(
        [("id", pa.int32()), ("uv", pa.binary())],
        ["id"],
        {"merge-engine": "aggregation", "fields.uv.aggregate-function": "theta_sketch"},
    )
    visits = [(1, "u1"), (1, "u2"), (1, "u1"), (2, "u3"), (1, "u4")]
    result = visible(s, commits(engine(s), s, [[(i, theta_sketch(u))] for i, u in visits]))
    assert {r["id"]: round(theta_estimate(r["uv"])) for r in result} == {1: 3, 2: 1}


def test_paimon_first_row_example() -> None:
    s = make_schema([("k", pa.int64()), ("v", pa.string())], options={"merge-engine": "first-row"})
    fn = engine(s)
    assert visible(s, commits(fn, s, [[(1, "a")], [(1, "b")]])) == [{"k": 1, "v": "a"}]
    with pytest.raises(MergeError, match="First row merge engine can not accept DELETE/UPDATE_BEFORE"):
        merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-D"]))
    s = make_schema(
        [("k", pa.int64()), ("v", pa.string())],
        options={"merge-engine": "first-row", "first-row.ignore-delete": "true"},
    )
    assert visible(s, merge(engine(s), kv(s, [(1, "a"), (1, "a"), (1, "c")], ["+I", "-D", "+I"]))) == [
        {"k": 1, "v": "a"}
    ]


def test_paimon_sequence_field_example() -> None:
    s = make_schema(
        [("pk", pa.int64()), ("v1", pa.float64()), ("v2", pa.int64()), ("dt", pa.timestamp("us"))],
        ["pk"],
        {"sequence.field": "dt"},
    )
    # the record with the largest dt wins regardless of the input order
    result = commits(engine(s), s, [[(1, 2.0, 2, ts(12))], [(1, 1.0, 1, ts(11))]])
    assert visible(s, result) == [{"pk": 1, "v1": 2.0, "v2": 2, "dt": ts(12)}]


# -- Fluss: aggregation merge engine page ------------------------------------------------------------------
def fluss(fields: list[tuple[str, pa.DataType]], **aggs: str) -> dict[str, str]:
    opts = {"table.merge-engine": "aggregation"}
    opts.update({f"fields.{k}.agg": v for k, v in aggs.items()})
    return opts


def test_fluss_product_stats() -> None:
    fields = [
        ("product_id", pa.int64()),
        ("price", pa.float64()),
        ("sales", pa.int64()),
        ("last_update_time", pa.timestamp("ms")),
    ]
    s = make_schema(fields, ["product_id"], fluss(fields, price="max", sales="sum"))
    rows = [(1, 23.0, 15, ts(10)), (1, 30.2, 20, ts(11))]
    expected = [{"product_id": 1, "price": 30.2, "sales": 35, "last_update_time": ts(11)}]
    assert visible(s, merge(engine(s), kv(s, rows))) == expected
    assert visible(s, commits(engine(s), s, [[rows[0]], [rows[1]]])) == expected


@pytest.mark.parametrize(
    ("function", "type_", "values", "expected"),
    [
        ("sum", pa.decimal128(10, 2), [Decimal("100.50"), Decimal("200.75")], Decimal("301.25")),
        ("product", pa.float64(), [0.9, 0.8], pytest.approx(0.72)),
        ("max", pa.float64(), [25.5, 28.3], 28.3),
        ("max", pa.timestamp("ms"), [ts(10), ts(11)], ts(11)),
        ("min", pa.decimal128(10, 2), [Decimal("99.99"), Decimal("79.99"), Decimal("89.99")], Decimal("79.99")),
        ("last_value", pa.string(), ["online", "offline", None], None),
        ("last_value", pa.timestamp("ms"), [ts(10), ts(11), ts(12)], ts(12)),
        ("first_value", pa.date32(), [dt.date(2024, 1, 1), dt.date(2024, 2, 1)], dt.date(2024, 1, 1)),
        ("first_value", pa.string(), ["ProductA", "ProductB"], "ProductA"),
        ("first_value_ignore_nulls", pa.string(), [None, "user@example.com", "other@example.com"], "user@example.com"),
        ("first_value_ignore_nulls", pa.timestamp("ms"), [None, ts(10), ts(10, 2)], ts(10)),
        ("bool_and", pa.bool_(), [True, True, False], False),
        ("bool_or", pa.bool_(), [False, False, True], True),
    ],
)
def test_fluss_function_examples(function: str, type_: pa.DataType, values: list[object], expected: object) -> None:
    s = make_schema(
        [("id", pa.int64()), ("v", type_)], ["id"], {"table.merge-engine": "aggregation", "fields.v.agg": function}
    )
    rows = [(1, v) for v in values]
    assert visible(s, merge(engine(s), kv(s, rows)))[0]["v"] == expected
    assert visible(s, commits(engine(s), s, [[r] for r in rows]))[0]["v"] == expected


def test_fluss_last_value_ignore_nulls_steps() -> None:
    s = make_schema(
        [("id", pa.int64()), ("email", pa.string()), ("phone", pa.string())],
        ["id"],
        {
            "table.merge-engine": "aggregation",
            "fields.email.agg": "last_value_ignore_nulls",
            "fields.phone.agg": "last_value_ignore_nulls",
        },
    )
    steps = [(1, "user@example.com", "123-456"), (1, None, "789-012"), (1, "new@example.com", None)]
    results = [
        {"id": 1, "email": "user@example.com", "phone": "123-456"},
        {"id": 1, "email": "user@example.com", "phone": "789-012"},
        {"id": 1, "email": "new@example.com", "phone": "789-012"},
    ]
    for n in range(1, 4):
        assert visible(s, commits(engine(s), s, [[r] for r in steps[:n]])) == [results[n - 1]]


def test_fluss_last_value_steps() -> None:
    s = make_schema(
        [("id", pa.int64()), ("status", pa.string()), ("last_login", pa.timestamp("ms"))],
        ["id"],
        {"table.merge-engine": "aggregation", "fields.status.agg": "last_value", "fields.last_login.agg": "last_value"},
    )
    steps = [(1, "online", ts(10)), (1, "offline", ts(11)), (1, None, ts(12))]
    for n, status in [(1, "online"), (2, "offline"), (3, None)]:
        out = visible(s, commits(engine(s), s, [[r] for r in steps[:n]]))
        assert out == [{"id": 1, "status": status, "last_login": ts(9 + n)}]


@pytest.mark.parametrize("function", ["listagg", "string_agg"])
def test_fluss_listagg_and_string_agg(function: str) -> None:
    s = make_schema(
        [("id", pa.int64()), ("tags1", pa.string()), ("tags2", pa.string())],
        ["id"],
        {
            "table.merge-engine": "aggregation",
            "fields.tags1.agg": function,
            "fields.tags2.agg": function,
            f"fields.tags2.{function}.delimiter": ";",
        },
    )
    rows = [(1, "developer", "developer"), (1, "java", "java"), (1, "flink", "flink")]
    expected = [{"id": 1, "tags1": "developer,java,flink", "tags2": "developer;java;flink"}]
    assert visible(s, merge(engine(s), kv(s, rows))) == expected
    assert visible(s, commits(engine(s), s, [[r] for r in rows])) == expected


@pytest.mark.parametrize("function", ["rbm32", "rbm64"])
def test_fluss_bitmap_tables(function: str) -> None:
    s = make_schema(
        [("user_id", pa.int64()), ("visit_bitmap", pa.binary())],
        ["user_id"],
        {"table.merge-engine": "aggregation", "fields.visit_bitmap.agg": function},
    )
    build = to_bitmap if function == "rbm32" else to_bitmap64
    out = visible(s, merge(engine(s), kv(s, [(1, build(1, 2)), (1, build(3)), (1, None)])))
    assert bitmap_values(out[0]["visit_bitmap"], 32 if function == "rbm32" else 64) == [1, 2, 3]


def _delete_table(behavior: str) -> tuple[object, object]:
    s = make_schema(
        [
            ("id", pa.int64()),
            ("count1", pa.int64()),
            ("sum1", pa.int64()),
            ("count2", pa.int64()),
            ("sum2", pa.int64()),
        ],
        ["id"],
        {
            "table.merge-engine": "aggregation",
            "table.delete.behavior": behavior,
            "fields.count1.agg": "sum",
            "fields.sum1.agg": "sum",
            "fields.count2.agg": "sum",
            "fields.sum2.agg": "sum",
        },
    )
    return s, engine(s)


def test_fluss_delete_behavior_ignore() -> None:
    s, fn = _delete_table("ignore")
    result = commits(fn, s, [[(1, 1, 10, 2, 20)], [(1, None, None, None, None)]], kinds=[None, "-D"])
    assert visible(s, result) == [{"id": 1, "count1": 1, "sum1": 10, "count2": 2, "sum2": 20}]


def test_fluss_delete_behavior_disable() -> None:
    s, fn = _delete_table("disable")
    with pytest.raises(MergeError, match="Delete operations are disabled for this table"):
        commits(fn, s, [[(1, 1, 10, 2, 20)], [(1, None, None, None, None)]], kinds=[None, "-D"])


def test_fluss_delete_behavior_allow_full_update() -> None:
    s, fn = _delete_table("allow")
    result = commits(
        fn, s, [[(1, 1, 10, 2, 20)], [(1, 5, 5, 5, 5)], [(1, None, None, None, None)]], kinds=[None, None, "-D"]
    )
    assert visible(s, result) == []
    again = commits(
        fn, s, [[(1, 1, 10, 2, 20)], [(1, None, None, None, None)], [(1, 3, 3, 3, 3)]], kinds=[None, "-D", None]
    )
    assert visible(s, again) == [{"id": 1, "count1": 3, "sum1": 3, "count2": 3, "sum2": 3}]


def test_fluss_delete_behavior_allow_partial_update() -> None:
    s, fn = _delete_table("allow")
    target = ["id", "count1", "sum1"]
    # partial delete nulls count1/sum1, keeps count2/sum2
    result = commits(
        fn,
        s,
        [[(1, 1, 10, 2, 20)], [(1, 4, 40, None, None)], [(1, None, None, None, None)]],
        kinds=[None, None, "-D"],
        masks=[None, [target], [target]],
    )
    assert visible(s, result) == [{"id": 1, "count1": None, "sum1": None, "count2": 2, "sum2": 20}]
    # ... and removes the row when count2/sum2 are null
    gone = commits(
        fn,
        s,
        [[(1, 1, 10, None, None)], [(1, None, None, None, None)]],
        kinds=[None, "-D"],
        masks=[[target], [target]],
    )
    assert visible(s, gone) == []
