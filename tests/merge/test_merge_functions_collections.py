"""listagg, collect, merge_map, merge_map_with_keytime, nested_update, nested_partial_update."""

from __future__ import annotations

import pyarrow as pa
import pytest
from merge_support import commits, engine, fold, kv, make_schema, merge, visible

from mergetable.core.errors import MergeError

STR = pa.string()


# -- listagg -----------------------------------------------------------------------------------------------
def test_listagg_skips_null_and_blank() -> None:
    assert fold("listagg", STR, ["a", None, "", "  ", "\t\n", "\u3000", "b"]) == "a,b"
    assert fold("listagg", STR, ["a", "\u00a0", "b"]) == "a,\u00a0,b"  # NBSP is not Java whitespace
    assert fold("listagg", STR, [None, None]) is None
    assert fold("listagg", STR, ["  ", None]) is None


def test_listagg_delimiter() -> None:
    assert fold("listagg", STR, ["a", "b"], list_agg_delimiter=" | ") == "a | b"
    assert fold("listagg", STR, ["a", "b"], list_agg_delimiter="") == "ab"


def test_listagg_blank_accumulator_is_replaced() -> None:
    s = make_schema(
        [("k", pa.int64()), ("v", STR)],
        options={
            "merge-engine": "aggregation",
            "fields.v.aggregate-function": "listagg",
            "aggregation.remove-record-on-delete": "true",
        },
    )
    fn = engine(s)
    # the -D re-initialises the accumulator to a blank string, which the next value replaces
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "   "), (1, "x")], ["+I", "-D", "+I"]))) == [{"k": 1, "v": "x"}]
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "   "), (1, None)], ["+I", "-D", "+I"]))) == [{"k": 1, "v": "   "}]
    # a lone blank passes through; merged with another record it is skipped like any blank input
    assert visible(s, commits(fn, s, [[(1, "   ")], [(1, None)]])) == [{"k": 1, "v": None}]


def test_listagg_distinct() -> None:
    assert fold("listagg", STR, ["a,b", "b,c", "a", "d,d"], distinct="true") == "a,b,c,d"
    assert fold("listagg", STR, ["a;b", "b;c"], distinct="true", list_agg_delimiter=";") == "a;b;c"
    # input tokens that are blank are skipped; the accumulator itself is not re-deduplicated
    s = make_schema(
        [("k", pa.int64()), ("v", STR)],
        options={"merge-engine": "aggregation", "fields.v.aggregate-function": "listagg", "fields.v.distinct": "true"},
    )
    fn = engine(s)
    assert visible(s, commits(fn, s, [[(1, "a,a")], [(1, "a, ,b")]]))[0]["v"] == "a,a,b"


def test_listagg_cannot_retract() -> None:
    with pytest.raises(MergeError, match="'listagg' does not support retraction"):
        fold("listagg", STR, ["a", "a"], ["+I", "-U"])


# -- collect -----------------------------------------------------------------------------------------------
def test_collect_concatenates() -> None:
    assert fold("collect", pa.list_(pa.int64()), [[1, 2], None, [2, 3]]) == [1, 2, 2, 3]
    assert fold("collect", pa.list_(pa.int64()), [None, None]) is None


@pytest.mark.parametrize(
    ("element", "values", "expected"),
    [
        (pa.int64(), [[1, 2], [2, 3, 3]], [1, 2, 3]),
        (pa.binary(), [[b"x"], [b"x", b"y"]], [b"x", b"y"]),
        (pa.struct([("a", pa.int32())]), [[{"a": 1}], [{"a": 1}, {"a": 2}]], [{"a": 1}, {"a": 2}]),
        (pa.list_(pa.int32()), [[[1, 2]], [[1, 2], [3]]], [[1, 2], [3]]),
        (pa.map_(pa.string(), pa.int32()), [[[("a", 1)]], [[("a", 1)], [("b", 2)]]], [[("a", 1)], [("b", 2)]]),
    ],
)
def test_collect_distinct_by_value(element: pa.DataType, values: list[object], expected: list[object]) -> None:
    assert fold("collect", pa.list_(element), values, distinct="true") == expected


def test_collect_distinct_dedups_first_input() -> None:
    assert fold("collect", pa.list_(pa.int64()), [None, [1, 1]], distinct="true") == [1]


def test_collect_retraction_removes_one_occurrence() -> None:
    t = pa.list_(pa.int64())
    assert fold("collect", t, [[1, 1, 2], [1]], ["+I", "-U"]) == [1, 2]
    assert fold("collect", t, [[1], [5]], ["-U", "+I"]) == [5]  # NULL accumulator stays NULL
    assert fold("collect", t, [[1, 2], []], ["+I", "-D"]) == [1, 2]
    assert fold("collect", t, [[1, 2], None], ["+I", "-D"]) == [1, 2]


# -- merge_map ---------------------------------------------------------------------------------------------
def test_merge_map_later_value_wins() -> None:
    t = pa.map_(pa.string(), pa.int64())
    assert fold("merge_map", t, [[("a", 1), ("b", 2)], None, [("b", 3), ("c", 4)]]) == [("a", 1), ("b", 3), ("c", 4)]


def test_merge_map_binary_keys_by_content() -> None:
    t = pa.map_(pa.binary(), pa.int64())
    assert fold("merge_map", t, [[(b"k", 1)], [(b"k", 2)]]) == [(b"k", 2)]


def test_merge_map_retraction_removes_keys() -> None:
    t = pa.map_(pa.string(), pa.int64())
    assert fold("merge_map", t, [[("a", 1), ("b", 2)], [("a", 99)]], ["+I", "-U"]) == [("b", 2)]
    assert fold("merge_map", t, [[("a", 1)], [("a", 1)]], ["-D", "+I"]) == [("a", 1)]


# -- merge_map_with_keytime ----------------------------------------------------------------------------
ROW = pa.struct([("val", pa.string()), ("ts", pa.string())])
KEYTIME = pa.map_(pa.string(), ROW)


def entry(val: str, ts: str | None) -> dict[str, str | None]:
    return {"val": val, "ts": ts}


def test_keytime_keeps_larger_timestamp_compared_as_strings() -> None:
    acc = [("k", entry("old", "50"))]
    newer_by_number = [("k", entry("new", "100"))]
    # "100" < "50" as strings: the old entry stays (Paimon's code, contrary to its docs)
    assert fold("merge_map_with_keytime", KEYTIME, [acc, newer_by_number]) == acc
    assert fold("merge_map_with_keytime", KEYTIME, [acc, [("k", entry("new", "60"))]]) == [("k", entry("new", "60"))]
    assert fold("merge_map_with_keytime", KEYTIME, [acc, [("j", entry("x", "1"))]]) == [*acc, ("j", entry("x", "1"))]


def test_keytime_null_row_removes_and_null_ts_is_skipped() -> None:
    acc = [("a", entry("x", "5")), ("b", entry("y", "5"))]
    assert fold("merge_map_with_keytime", KEYTIME, [acc, [("a", None), ("b", entry("z", None))]]) == [
        ("b", entry("y", "5"))
    ]


def test_keytime_ts_field_option() -> None:
    row = pa.struct([("ts", pa.string()), ("val", pa.string())])
    t = pa.map_(pa.string(), row)
    acc = [("k", {"ts": "2", "val": "a"})]
    got = fold("merge_map_with_keytime", t, [acc, [("k", {"ts": "3", "val": "b"})]], ts_field="ts")
    assert got == [("k", {"ts": "3", "val": "b"})]


def test_keytime_cannot_retract() -> None:
    with pytest.raises(MergeError, match="'merge_map_with_keytime' does not support retraction"):
        fold("merge_map_with_keytime", KEYTIME, [[("k", entry("x", "1"))]] * 2, ["+I", "-D"])


# -- nested_update / nested_partial_update -----------------------------------------------------------------
NESTED = pa.list_(pa.struct([("id", pa.int64()), ("name", pa.string()), ("seq", pa.int64())]))


def r(i: int | None, name: str | None, seq: int | None = None) -> dict[str, object]:
    return {"id": i, "name": name, "seq": seq}


def test_nested_update_without_key_appends() -> None:
    assert fold("nested_update", NESTED, [[r(1, "a")], [r(1, "a"), None]]) == [r(1, "a"), r(1, "a")]


def test_nested_update_by_key() -> None:
    got = fold("nested_update", NESTED, [[r(1, "a"), r(2, "b")], [r(1, "c")]], nested_key="id")
    assert got == [r(1, "c"), r(2, "b")]


def test_nested_update_sequence_field() -> None:
    got = fold(
        "nested_update",
        NESTED,
        [[r(1, "a", 5)], [r(1, "old", 3)], [r(1, "tie", 5)]],
        nested_key="id",
        nested_sequence_field="seq",
    )
    assert got == [r(1, "tie", 5)]


def test_nested_update_count_limit() -> None:
    got = fold(
        "nested_update", NESTED, [[r(1, "a"), r(2, "b")], [r(3, "c"), r(1, "z")]], nested_key="id", count_limit="2"
    )
    assert got == [r(1, "z"), r(2, "b")]  # existing keys still update, new keys beyond the limit are dropped
    assert fold("nested_update", NESTED, [[r(1, "a"), r(2, "b")], [r(3, "c")]], count_limit="2") == [
        r(1, "a"),
        r(2, "b"),
    ]


def test_nested_update_null_key_strategies() -> None:
    values = [[r(None, "a")], [r(None, "b"), r(1, "c")]]
    assert fold("nested_update", NESTED, values, nested_key="id") == [r(None, "b"), r(1, "c")]
    assert fold("nested_update", NESTED, values, nested_key="id", nested_key_null_strategy="ignore") == [r(1, "c")]
    with pytest.raises(MergeError, match="Nested key contains null values"):
        fold("nested_update", NESTED, values, nested_key="id", nested_key_null_strategy="error")


def test_nested_update_retraction() -> None:
    assert fold("nested_update", NESTED, [[r(1, "a"), r(2, "b")], [r(1, "zzz")]], ["+I", "-U"], nested_key="id") == [
        r(2, "b")
    ]
    assert fold("nested_update", NESTED, [[r(1, "a"), r(1, "a"), r(2, "b")], [r(1, "a")]], ["+I", "-U"]) == [r(2, "b")]


def test_nested_partial_update() -> None:
    got = fold("nested_partial_update", NESTED, [[r(1, "a", 1), r(2, "b")], [r(1, None, 9)]], nested_key="id")
    assert got == [r(1, "a", 9), r(2, "b")]
    with pytest.raises(MergeError, match="does not support retraction"):
        fold("nested_partial_update", NESTED, [[r(1, "a")], [r(1, "a")]], ["+I", "-U"], nested_key="id")


def test_nested_update_table_level() -> None:
    s = make_schema(
        [("k", pa.int64()), ("v", NESTED)],
        options={
            "merge-engine": "aggregation",
            "fields.v.aggregate-function": "nested_update",
            "fields.v.nested-key": "id",
        },
    )
    out = visible(s, merge(engine(s), kv(s, [(1, [r(1, "a")]), (2, [r(1, "x")]), (1, [r(2, "b")])])))
    assert out == [{"k": 1, "v": [r(1, "a"), r(2, "b")]}, {"k": 2, "v": [r(1, "x")]}]


def test_collect_distinct_maps_with_the_same_entries_in_another_order_are_equal() -> None:
    maps = pa.list_(pa.map_(pa.string(), pa.int32()))
    out = fold("collect", maps, [[[("a", 1), ("b", 2)]], [[("b", 2), ("a", 1)], [("c", 3)]]], distinct="true")
    assert out == [[("a", 1), ("b", 2)], [("c", 3)]]
    rows = pa.list_(pa.struct([("m", pa.map_(pa.string(), pa.int32()))]))
    nested = fold("collect", rows, [[{"m": [("a", 1), ("b", 2)]}], [{"m": [("b", 2), ("a", 1)]}]], distinct="true")
    assert nested == [{"m": [("a", 1), ("b", 2)]}]
    assert fold("collect", maps, [[[("a", 1), ("b", 2)]], [[("b", 2), ("a", 1)]]], ["+I", "-U"]) == []
