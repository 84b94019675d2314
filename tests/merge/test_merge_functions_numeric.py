"""sum, product, max, min, bool_and, bool_or (reference §9)."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest
from merge_support import fold

from mergetable.core.errors import MergeError

INT_TYPES = [(pa.int8(), 127), (pa.int16(), 32767), (pa.int32(), 2**31 - 1), (pa.int64(), 2**63 - 1)]


@pytest.mark.parametrize(("type_", "top"), INT_TYPES)
def test_sum_null_rule_and_exact_bounds(type_: pa.DataType, top: int) -> None:
    assert fold("sum", type_, [None, 1, None, 2]) == 3
    assert fold("sum", type_, [None, None]) is None
    assert fold("sum", type_, [top - 1, 1]) == top
    assert fold("sum", type_, [-top, -1]) == -top - 1


@pytest.mark.parametrize(("type_", "top"), INT_TYPES)
def test_sum_overflow_raises_naming_column(type_: pa.DataType, top: int) -> None:
    with pytest.raises(MergeError, match=r"column 'v': sum: \w+ overflow: "):
        fold("sum", type_, [top, 1])
    with pytest.raises(MergeError, match="overflow"):
        fold("sum", type_, [-top, -2])


def test_sum_overflow_message_formats() -> None:
    with pytest.raises(MergeError, match=r"byte overflow: 100 \+ 100 = 200"):
        fold("sum", pa.int8(), [100, 100])
    with pytest.raises(MergeError, match=r"int overflow: 2147483647 \+ 1$"):
        fold("sum", pa.int32(), [2**31 - 1, 1])
    with pytest.raises(MergeError, match=r"long overflow: -9223372036854775808 - 1"):
        fold("sum", pa.int64(), [-(2**63), 1], ["+I", "-U"])


def test_sum_overflow_is_per_step_like_paimon() -> None:
    # 100 + 100 overflows a TINYINT at the second step even though the final sum would fit
    with pytest.raises(MergeError):
        fold("sum", pa.int8(), [100, 100, 50], ["+I", "+I", "-D"])
    assert fold("sum", pa.int8(), [100, 50, 70], ["+I", "-D", "+I"]) == 120


def test_sum_retraction() -> None:
    assert fold("sum", pa.int64(), [10, 3], ["+I", "-U"]) == 7
    assert fold("sum", pa.int64(), [3, 10], ["-D", "+I"]) == 7  # retract(null, 3) = -3
    assert fold("sum", pa.int64(), [10, None], ["+I", "-D"]) == 10
    assert fold("sum", pa.float64(), [1.5, 0.5], ["+I", "-U"]) == 1.0
    with pytest.raises(MergeError, match="byte overflow: --128 = 128"):
        fold("sum", pa.int8(), [-128, 1], ["-D", "+I"])


def test_sum_floats() -> None:
    assert fold("sum", pa.float64(), [0.1, 0.2, None]) == pytest.approx(0.3)
    assert fold("sum", pa.float32(), [1.5, 2.25]) == 3.75


def test_sum_decimal_keeps_precision_and_scale() -> None:
    s = fold("sum", pa.decimal128(10, 2), [Decimal("100.50"), Decimal("200.75"), None])
    assert s == Decimal("301.25")
    assert fold("sum", pa.decimal128(5, 2), [Decimal("1.01"), Decimal("2.02")], ["+I", "-U"]) == Decimal("-1.01")
    big = pa.decimal128(38, 4)
    assert fold("sum", big, [Decimal("12345678901234567890123.4567"), Decimal("1.0001")]) == Decimal(
        "12345678901234567890124.4568"
    )


def test_sum_decimal_overflow_raises() -> None:
    with pytest.raises(MergeError, match=r"DECIMAL\(5, 2\) overflow"):
        fold("sum", pa.decimal128(5, 2), [Decimal("999.99"), Decimal("0.01")])
    with pytest.raises(MergeError, match=r"DECIMAL\(20, 0\) overflow"):
        fold("sum", pa.decimal128(20, 0), [Decimal(10**20 - 1), Decimal(1)])


def test_product() -> None:
    assert fold("product", pa.float64(), [0.9, 0.8]) == pytest.approx(0.72)
    assert fold("product", pa.int32(), [3, None, 4]) == 12
    assert fold("product", pa.int64(), [None]) is None
    with pytest.raises(MergeError, match=r"int overflow: 65536 \* 65536"):
        fold("product", pa.int32(), [65536, 65536])
    with pytest.raises(MergeError, match="overflow"):
        fold("product", pa.int8(), [100, 100, 0])  # overflows before the zero


def test_product_retraction_divides() -> None:
    assert fold("product", pa.int64(), [12, 4], ["+I", "-U"]) == 3
    assert fold("product", pa.int64(), [-7, 2], ["+I", "-U"]) == -3  # Java truncates toward zero
    assert fold("product", pa.int64(), [5, 2], ["-D", "+I"]) == 2  # retract with NULL accumulator keeps NULL
    assert fold("product", pa.float64(), [3.0, 2.0], ["+I", "-U"]) == 1.5
    assert math.isinf(fold("product", pa.float64(), [3.0, 0.0], ["+I", "-U"]))
    with pytest.raises(MergeError, match="/ by zero"):
        fold("product", pa.int64(), [3, 0], ["+I", "-U"])


def test_product_decimal_rounds_half_up_each_step() -> None:
    assert fold("product", pa.decimal128(10, 2), [Decimal("1.05"), Decimal("1.05")]) == Decimal("1.10")
    assert fold("product", pa.decimal128(10, 2), [Decimal("10.00"), Decimal("3.00")], ["+I", "-U"]) == Decimal("3.33")


@pytest.mark.parametrize(
    ("type_", "values", "high", "low"),
    [
        (pa.int32(), [3, None, 7, 1], 7, 1),
        (pa.float64(), [1.5, -2.0, None], 1.5, -2.0),
        (pa.string(), ["pear", "apple", None, "zoo"], "zoo", "apple"),
        (pa.binary(), [b"\x01", b"\xff", b"\x00\x01"], b"\xff", b"\x00\x01"),
        (pa.bool_(), [False, True, None], True, False),
        (pa.date32(), [dt.date(2024, 5, 1), dt.date(2023, 1, 1)], dt.date(2024, 5, 1), dt.date(2023, 1, 1)),
        (
            pa.timestamp("ms"),
            [dt.datetime(2024, 1, 1, 11), dt.datetime(2024, 1, 1, 10)],
            dt.datetime(2024, 1, 1, 11),
            dt.datetime(2024, 1, 1, 10),
        ),
        (pa.time64("us"), [dt.time(3), dt.time(1)], dt.time(3), dt.time(1)),
        (
            pa.decimal128(10, 2),
            [Decimal("99.99"), Decimal("79.99"), Decimal("89.99")],
            Decimal("99.99"),
            Decimal("79.99"),
        ),
    ],
)
def test_max_min(type_: pa.DataType, values: list[object], high: object, low: object) -> None:
    assert fold("max", type_, values) == high
    assert fold("min", type_, values) == low
    assert fold("max", type_, [None, None]) is None


def test_max_min_nan_like_java() -> None:
    assert math.isnan(fold("max", pa.float64(), [1.0, math.nan]))
    assert fold("min", pa.float64(), [1.0, math.nan]) == 1.0
    assert math.isnan(fold("min", pa.float64(), [math.nan, math.nan]))


@pytest.mark.parametrize("function", ["max", "min", "bool_and", "bool_or"])
def test_cannot_retract(function: str) -> None:
    t = pa.bool_() if function.startswith("bool") else pa.int64()
    v = True if function.startswith("bool") else 1
    with pytest.raises(MergeError, match=f"Aggregate function '{function}' does not support retraction"):
        fold(function, t, [v, v], ["+I", "-D"])
    assert fold(function, t, [v, v], ["+I", "-D"], ignore_retract="true") == v


def test_bool_and_or() -> None:
    assert fold("bool_and", pa.bool_(), [True, None, True]) is True
    assert fold("bool_and", pa.bool_(), [True, False, True]) is False
    assert fold("bool_or", pa.bool_(), [False, None, False]) is False
    assert fold("bool_or", pa.bool_(), [None, True]) is True
    assert fold("bool_or", pa.bool_(), [None, None]) is None
