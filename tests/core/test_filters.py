"""Binding filters to a schema: literal coercion, SQL nulls, Spark's NaN order, typed errors."""

from __future__ import annotations

import datetime
import decimal
import math
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.core.filters import bind_filters, to_expression

SCHEMA = pa.schema(
    [
        ("x", pa.int32()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ntz", pa.timestamp("ms")),
        ("dec", pa.decimal128(6, 2)),
        ("s", pa.string()),
    ]
)


def test_literals_are_coerced_to_the_column_type() -> None:
    assert bind_filters([("x", ">", 1.5), ("x", "<", "7")], SCHEMA) == [[("x", ">=", 2), ("x", "<", 7)]]
    assert bind_filters([("f", "=", 1), ("f", "<", decimal.Decimal("2.5"))], SCHEMA) == [
        [("f", "=", 1.0), ("f", "<", 2.5)]
    ]
    assert bind_filters([("d", ">=", "2024-01-02"), ("d", "<", "2024-01-05T12:00")], SCHEMA) == [
        [("d", ">=", datetime.date(2024, 1, 2)), ("d", "<=", datetime.date(2024, 1, 5))]
    ]
    utc = datetime.UTC
    assert bind_filters([("ts", "=", "2024-01-02 03:04:05")], SCHEMA) == [
        [("ts", "=", datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=utc))]
    ]
    paris = datetime.timezone(datetime.timedelta(hours=1))
    assert bind_filters([("ntz", "<", datetime.datetime(2024, 1, 1, 1, tzinfo=paris))], SCHEMA) == [
        [("ntz", "<", datetime.datetime(2024, 1, 1))]
    ]
    assert bind_filters([("dec", ">", 1.234), ("dec", "=", "2.5"), ("dec", "<", 3)], SCHEMA) == [
        [
            ("dec", ">=", decimal.Decimal("1.24")),
            ("dec", "=", decimal.Decimal("2.50")),
            ("dec", "<", decimal.Decimal("3.00")),
        ]
    ]


def test_literals_no_value_can_equal_become_what_they_mean() -> None:
    never, valid = ("x", "in", []), ("x", "not in", [])
    assert bind_filters([("x", "=", 2.5)], SCHEMA) == [[never]]
    assert bind_filters([("x", "!=", 2.5)], SCHEMA) == [[valid]]
    assert bind_filters([("x", "<", 1 << 40)], SCHEMA) == [[valid]]
    assert bind_filters([("x", ">", 1 << 40)], SCHEMA) == [[never]]
    assert bind_filters([("x", "<", math.nan)], SCHEMA) == [[valid]]  # NaN is above every number
    assert bind_filters([("x", "=", None)], SCHEMA) == [[never]]
    assert bind_filters([("x", "not in", [1, None])], SCHEMA) == [[never]]
    assert bind_filters([("x", "in", [1, 1.5, None, 1])], SCHEMA) == [[("x", "in", [1])]]
    assert bind_filters([("dec", "=", 1 << 40)], SCHEMA) == [[("dec", "in", [])]]


@pytest.mark.parametrize(
    ("column", "value"),
    [("d", "not a date"), ("ts", 1.5), ("s", 5), ("x", "five"), ("dec", [1]), ("f", True), ("x", "in")],
)
def test_a_literal_that_cannot_be_coerced_names_the_column(column: str, value: object) -> None:
    op = "in" if value == "in" else "="
    with pytest.raises(mt.FilterError, match=f"column '{column}'") as info:
        bind_filters([(column, op, value)], SCHEMA)
    assert info.value.column == column and isinstance(info.value, mt.SchemaError)


def _sql_oracle(op: str, x: float | None, v: float) -> bool:
    """Spark SQL's answer for a double column: null never matches, NaN equals NaN and is above everything."""
    if x is None:
        return False
    key = lambda a: (1, 0.0) if math.isnan(a) else (0, a)  # noqa: E731
    a, b = key(x), key(v)
    return {"=": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]


FLOATS = st.sampled_from([0.0, -0.0, 1.0, 1.5, -2.0, math.nan, math.inf, -math.inf])


@settings(max_examples=200, deadline=None)
@given(
    xs=st.lists(st.one_of(st.none(), FLOATS), max_size=12),
    op=st.sampled_from(["=", "!=", "<", "<=", ">", ">="]),
    v=st.one_of(FLOATS, st.integers(-3, 3)),
)
def test_float_comparisons_follow_spark(xs: list[float | None], op: str, v: float) -> None:
    schema = pa.schema([("f", pa.float64())])
    data = pa.table({"f": pa.array(xs, pa.float64())})
    bound = bind_filters([("f", op, v)], schema)
    assert bound is not None
    got = data.filter(to_expression(bound, schema)).column("f").to_pylist()
    want = [x for x in xs if _sql_oracle(op, x, float(v))]
    assert [repr(g) for g in got] == [repr(w) for w in want]


@settings(max_examples=200, deadline=None)
@given(
    xs=st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=12),
    op=st.sampled_from(["=", "!=", "<", "<=", ">", ">=", "in", "not in"]),
    v=st.one_of(st.integers(-6, 6), st.sampled_from([-1.5, 0.5, 2.25, math.nan, math.inf, -math.inf])),
    extra=st.one_of(st.none(), st.integers(-6, 6)),
)
def test_integer_predicates_follow_sql(xs: list[int | None], op: str, v: float, extra: int | None) -> None:
    schema = pa.schema([("x", pa.int8())])
    data = pa.table({"x": pa.array(xs, pa.int8())})
    lit: object = [v, extra] if op in ("in", "not in") else v
    bound = bind_filters([("x", op, lit)], schema)
    assert bound is not None
    got = data.filter(to_expression(bound, schema)).column("x").to_pylist()
    if op == "in":
        want = [
            x for x in xs if x is not None and any(_sql_oracle("=", x, float(w)) for w in (v, extra) if w is not None)
        ]
    elif op == "not in":
        want = (
            [] if extra is None else [x for x in xs if x is not None and x != extra and _sql_oracle("!=", x, float(v))]
        )
    else:
        want = [x for x in xs if x is not None and _sql_oracle(op, float(x), float(v))]
    assert got == want


def test_python_read_binds_filters_and_prunes_with_them(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("p", pa.date32()), ("v", pa.float64())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["id", "p"], ["p"], options={"bucket": "2"})
    days = [datetime.date(2024, 1, 1 + i % 3) for i in range(12)]
    t.write(pa.table({"id": list(range(12)), "p": days, "v": [math.nan, None, 1.0, 2.0] * 3}, schema=schema))
    assert sorted(t.read(filter=[("p", "=", "2024-01-02")]).column("id").to_pylist()) == [1, 4, 7, 10]
    assert sorted(t.read(filter=[("id", "=", 4.0)]).column("id").to_pylist()) == [4]
    assert t.read(filter=[("id", "=", 4.5)]).num_rows == 0
    assert sorted(t.read(filter=[("v", ">", 1)]).column("id").to_pylist()) == [0, 3, 4, 7, 8, 11]
    assert sorted(t.read(filter=[("v", "not in", [1])]).column("id").to_pylist()) == [0, 3, 4, 7, 8, 11]
    assert len(t.plan(filter=[("p", "in", ["2024-01-02", "2024-01-09"])])) < len(t.plan())
    with pytest.raises(mt.FilterError, match="column 'p'"):
        t.read(filter=[("p", "=", "yesterday")])


def test_numpy_scalars_are_literals_like_the_python_values_they_hold(tmp_path: Path) -> None:
    np = pytest.importorskip("numpy")
    pairs = [
        (("x", "=", np.int64(3)), ("x", "=", 3)),
        (("x", "<", np.uint8(3)), ("x", "<", 3)),
        (("f", ">", np.float32(0.5)), ("f", ">", 0.5)),
        (("f", "=", np.float64("nan")), ("f", "=", float("nan"))),
        (("s", "=", np.str_("a")), ("s", "=", "a")),
        (("d", "=", np.datetime64("2024-01-02")), ("d", "=", datetime.date(2024, 1, 2))),
        (("ts", ">=", np.datetime64("2024-01-02T03:04:05.000001")), ("ts", ">=", "2024-01-02T03:04:05.000001")),
        (("ntz", "=", np.datetime64("2024-01-02T03:04:05.123", "ns")), ("ntz", "=", "2024-01-02T03:04:05.123")),
        (("ntz", "=", np.datetime64("2024-01-02T03:04:05.1234", "ns")), ("ntz", "in", [])),  # no such ms
        (("x", "in", np.array([1, 2])), ("x", "in", [1, 2])),
        (("x", "=", np.datetime64("NaT")), ("x", "in", [])),
    ]
    for numpy_literal, plain in pairs:
        assert str(bind_filters([numpy_literal], SCHEMA)) == str(bind_filters([plain], SCHEMA)), numpy_literal
    t = mt.create_table(str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("b", pa.bool_())]), ["id"])
    t.write({"id": [1, 2, 3], "b": [True, False, True]})
    first = np.asarray(t.read().column("id"))[0]  # numpy.int64, as df.id.iloc[0] gives
    assert t.read(filter=[("id", "=", first), ("b", "=", np.bool_(True))]).to_pydict() == {"id": [1], "b": [True]}
    t.delete([("id", "=", first)])
    t.update([("id", "=", np.int64(2))], {"b": np.bool_(True)})
    assert t.read().to_pydict() == {"id": [2, 3], "b": [True, True]}
