"""last_value, last_non_null_value, first_value, first_non_null_value (+ legacy and Fluss names)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from merge_support import engine, fold, kv, make_schema, merge

from mergetable.core.errors import MergeError


def test_last_value() -> None:
    assert fold("last_value", pa.int64(), [1, 2, None]) is None
    assert fold("last_value", pa.int64(), [1, None, 3]) == 3
    assert fold("last_value", pa.int64(), [1, 5], ["+I", "-U"]) is None  # retraction sets NULL
    assert fold("last_value", pa.int64(), [1, 5, 6], ["+I", "-U", "+U"]) == 6


def test_last_non_null_value() -> None:
    assert fold("last_non_null_value", pa.string(), ["a", None, "b", None]) == "b"
    assert fold("last_non_null_value", pa.string(), [None, None]) is None
    assert fold("last_non_null_value", pa.string(), ["a", "x"], ["+I", "-D"]) is None
    assert fold("last_non_null_value", pa.string(), ["a", None], ["+I", "-D"]) == "a"
    assert fold("last_value_ignore_nulls", pa.string(), ["a", None]) == "a"


def test_first_value_keeps_leading_null() -> None:
    assert fold("first_value", pa.int64(), [None, 2, 3]) is None
    assert fold("first_value", pa.int64(), [1, 2, None]) == 1


def test_first_non_null_value() -> None:
    assert fold("first_non_null_value", pa.int64(), [None, 2, 3]) == 2
    assert fold("first_not_null_value", pa.int64(), [None, None, 3]) == 3
    assert fold("first_value_ignore_nulls", pa.int64(), [None, 4, 3]) == 4


@pytest.mark.parametrize("function", ["first_value", "first_non_null_value"])
def test_first_functions_cannot_retract(function: str) -> None:
    with pytest.raises(MergeError, match=f"Aggregate function '{function}' does not support retraction"):
        fold(function, pa.int64(), [1, 1], ["+I", "-U"])
    assert fold(function, pa.int64(), [1, 1, 2], ["+I", "-U", "+I"], ignore_retract="true") == 1


def test_first_value_after_remove_record_on_delete_keeps_its_state() -> None:
    # the -D re-initialises the row but not the aggregator: first_value's "initialised" flag survives
    s = make_schema(
        [("k", pa.int64()), ("v", pa.int64())],
        options={
            "merge-engine": "aggregation",
            "aggregation.remove-record-on-delete": "true",
            "fields.v.aggregate-function": "first_value",
        },
    )
    fn = engine(s)
    assert merge(fn, kv(s, [(1, 1), (1, 7), (1, 9)], ["+I", "-D", "+I"])).column("v").to_pylist() == [7]
    assert merge(fn, kv(s, [(1, 7), (1, 9)], ["-D", "+I"])).column("v").to_pylist() == [9]


@pytest.mark.parametrize(
    ("type_", "values"),
    [
        (pa.timestamp("ns"), [dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)]),
        (pa.list_(pa.int32()), [[1], [2, 3]]),
        (pa.struct([("x", pa.int32())]), [{"x": 1}, {"x": 2}]),
        (pa.map_(pa.string(), pa.int32()), [[("a", 1)], [("b", 2)]]),
        (pa.binary(), [b"1", b"2"]),
    ],
)
def test_value_pick_on_any_type(type_: pa.DataType, values: list[object]) -> None:
    assert fold("last_value", type_, values) == values[-1]
    assert fold("first_value", type_, values) == values[0]
    assert fold("last_non_null_value", type_, [values[0], None]) == values[0]
