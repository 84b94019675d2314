"""No write changes a value silently: a decimal that would lose digits and strings into number or boolean
columns are refused (the table unchanged) unless the write asks for ``cast=True``; conversions that keep
every value are made. The same rule holds for the rows delete, update and merge write."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import SchemaError

SCHEMA = pa.schema(
    [("id", pa.int64()), ("d", pa.decimal128(10, 2)), ("x", pa.int32()), ("f", pa.float64()), ("b", pa.bool_())]
)
ROW = {"id": [1], "d": [Decimal("1.50")], "x": pa.array([1], pa.int32()), "f": [1.0], "b": [True]}


def _table(uri: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"])
    t.write(pa.table(ROW, schema=SCHEMA))
    return t


def _unchanged(t: mt.Table) -> None:
    assert t.version == 1 and t.read().to_pylist() == pa.table(ROW, schema=SCHEMA).to_pylist()


@pytest.mark.parametrize(
    ("column", "value", "cast_to"),
    [
        ("d", 0.125, Decimal("0.13")),
        ("d", -0.125, Decimal("-0.13")),
        ("d", Decimal("0.125"), Decimal("0.13")),
        ("d", Decimal("2.675"), Decimal("2.68")),
        ("x", "12", 12),
        ("f", "1.5", 1.5),
        ("d", "0.5", Decimal("0.50")),
        ("b", "true", True),
    ],
)
def test_a_value_that_would_change_is_refused_unless_cast(
    table_uri: str, column: str, value: Any, cast_to: Any
) -> None:
    t = _table(table_uri)
    row = {**ROW, "id": [2], column: [value]}
    with pytest.raises(SchemaError, match=rf"column '{column}'.*cast=True") as err:
        t.write(row)
    assert err.value.column == column
    _unchanged(t)
    w = t.new_writer()
    with pytest.raises(SchemaError, match="cast=True"):
        w.write(row)
    w.abort()
    _unchanged(t)
    t.write(row, cast=True)
    assert t.read(filter=[("id", "=", 2)]).column(column).to_pylist() == [cast_to]


def test_conversions_that_keep_every_value_need_no_cast(table_uri: str) -> None:
    t = _table(table_uri)
    t.write({"id": [2, 3], "d": [0.1, 1e5], "x": [7, -7], "f": [2, 3], "b": [False, None]})
    t.write({"id": [4], "d": [Decimal("0.5")], "x": pa.array([1], pa.int8()), "f": [1.5], "b": [True]})
    rows = t.read(filter=[("id", ">", 1)]).to_pydict()
    assert rows["d"] == [Decimal("0.10"), Decimal("100000.00"), Decimal("0.50")]
    assert rows["x"] == [7, -7, 1] and rows["f"] == [2.0, 3.0, 1.5]


def test_a_cast_does_not_make_an_impossible_conversion(table_uri: str) -> None:
    t = _table(table_uri)
    for row in ({"x": [1.5]}, {"x": [1 << 40]}, {"x": ["twelve"]}, {"d": [1e12]}):
        with pytest.raises(SchemaError, match=r"column '[xd]'"):
            t.write({**ROW, "id": [2], **row}, cast=True)
    _unchanged(t)


def test_dml_rows_follow_the_same_rule(table_uri: str) -> None:
    t = _table(table_uri)
    t.write({"id": [2], "d": [Decimal("2.00")], "x": pa.array([2], pa.int32()), "f": [0.125], "b": [False]})
    version = t.version
    with pytest.raises(SchemaError, match=r"column 'd'.*pc\.round"):
        t.update([("id", "=", 2)], {"d": pc.field("f")})
    source = pa.table({"id": [3], "d": [0.125], "x": ["12"], "f": [1.0], "b": [True]})
    with pytest.raises(SchemaError, match=r"column '(d|x)': merge \(not matched: insert\)"):
        t.merge(source).when_not_matched_insert_all().execute()
    with pytest.raises(SchemaError, match=r"column 'x'.*strings"):
        t.merge(source).when_not_matched_insert({"id": pc.field("source.id"), "x": pc.field("source.x")}).execute()
    assert t.version == version
    t.update([("id", "=", 2)], {"d": pc.round(pc.field("f"), 2)})  # explicitly rounded: 0.12 (half to even)
    values = {"id": pc.field("source.id"), "x": pc.field("source.x").cast(pa.int32())}
    t.merge(source).when_not_matched_insert(values).execute()
    rows = t.read(filter=[("id", ">", 1)]).to_pydict()
    assert rows["d"] == [Decimal("0.12"), None] and rows["x"] == [2, 12]
