"""One filter semantics for every front end: filters bound to the table schema, evaluated as Spark SQL does.

:func:`bind_filters` checks a DNF filter (see :mod:`mergetable.core.predicates`) against the schema and
coerces each literal to its column's type, so the Python API, the Spark ``filter`` option, Spark's pushed
filters and the command line all mean the same rows by the same predicate:

* numbers compare by value whatever their Python type: ``x > 1.5`` on an integer column is ``x >= 2``,
  ``f = 1`` on a float column matches ``1.0``; a literal that no value of the column can equal (``x = 1.5``
  on an integer column, ``1 << 40`` on an INT column) is rewritten into the predicate it means;
* dates and timestamps come from ``date``/``datetime`` objects, ISO-8601 strings or integers in the column's
  storage unit (days, or the timestamp's unit since the epoch); a literal without a
  zone on a timestamp column with a zone is read as UTC (pyarrow's convention; Spark uses its session time
  zone), an aware literal on a column without zone is taken at UTC;
* decimals come from ``Decimal``, ``int``, ``float`` (by its shortest decimal spelling) or strings; numeric
  columns also take numeric strings, as Spark's implicit casts do;
* numpy scalars (``numpy.int64``, ``numpy.str_``, ``numpy.datetime64`` …, what ``df.x.iloc[0]`` gives) are
  the Python values they hold; a ``datetime64`` keeps its precision down to nanoseconds;
* SQL three-valued logic: a null never satisfies ``=``, ``!=``, ``<`` …, ``in`` or ``not in``; a comparison
  with a null literal matches nothing, and so does ``not in`` with a null in its list;
* NaN is ordered as Spark orders it: ``NaN = NaN`` is true and NaN is greater than every other value,
  ``+inf`` included.

A literal that cannot be coerced raises :class:`~mergetable.core.errors.FilterError` naming the column.
Bound literals are plain Python values of the column's type, so stats pruning compares them exactly.
:func:`to_expression` turns a bound filter into the pyarrow expression with exactly these semantics.
"""

from __future__ import annotations

import datetime
import decimal
import math
from collections.abc import Iterable
from fractions import Fraction
from functools import reduce
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import FilterError
from mergetable.core.predicates import Conjunct, Filters, Predicate, normalize_filters

NEVER_OP, VALID_OP = "in", "not in"  # with an empty list: "no row" and "every non-null row"
_EPOCH = datetime.datetime(1970, 1, 1)
_UNITS_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
_DATE_MIN = (datetime.date.min - _EPOCH.date()).days
_DATE_MAX = (datetime.date.max - _EPOCH.date()).days
_INF = float("inf")


def bind_filters(filters: Filters | None, schema: pa.Schema) -> list[Conjunct] | None:
    """The filter in DNF form with every column and op checked and every literal bound (None: no filter).

    >>> import pyarrow as pa
    >>> s = pa.schema([("x", pa.int64()), ("f", pa.float64())])
    >>> bind_filters([("x", ">", 1.5), ("f", "=", 1), ("x", "not in", [1, None])], s)
    [[('x', '>=', 2), ('f', '=', 1.0), ('x', 'in', [])]]
    """
    dnf = normalize_filters(filters, schema)
    if dnf is None:
        return None
    return [[bind_predicate(p, schema.field(p[0])) for p in conj] for conj in dnf]


def bind_predicate(pred: Predicate, field: pa.Field) -> Predicate:
    """One ``(column, op, literal)`` with its literal coerced to ``field``'s type (the op may be rewritten)."""
    column, op, value = pred
    op = "=" if op == "==" else op
    t = field.type
    if op in ("in", "not in"):
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise FilterError(column, f"'{op}' needs a list of values, got {value!r}")
        values = list(value)
        if op == "not in" and any(v is None for v in values):
            return (column, NEVER_OP, [])  # x NOT IN (…, NULL) is never true
        kept: list[Any] = []
        for v in values:
            if v is None:
                continue
            bound = _bind_comparison(column, "=", t, v)
            if bound[1] == "=" and bound[2] not in kept:
                kept.append(bound[2])
        return (column, op, kept)
    if value is None:
        return (column, NEVER_OP, [])  # a comparison with NULL is never true
    return _bind_comparison(column, op, t, value)


# -- literals ------------------------------------------------------------------------------------------
def _plain(value: Any) -> Any:
    """A numpy scalar (what ``df.x.iloc[0]`` gives) as the Python value it holds; anything else as it is.

    >>> import numpy as np
    >>> _plain(np.int64(3)), _plain(np.bool_(True)), _plain(np.datetime64("2024-01-02T03:04:05.123456789"))
    (3, True, Fraction(1704164645123456789, 1000))
    """
    if not isinstance(value, np.generic):
        return value
    if isinstance(value, np.datetime64):
        if np.isnat(value):
            return None
        unit = np.datetime_data(value.dtype)[0]
        if unit in ("Y", "M", "W", "D"):
            return value.astype("datetime64[D]").item()  # a date
        if unit not in _UNITS_PER_SECOND:
            value, unit = value.astype("datetime64[s]"), "s"
        return Fraction(int(value.astype(np.int64)) * 1_000_000, _UNITS_PER_SECOND[unit])  # microseconds
    return value.item()


def _bind_comparison(column: str, op: str, t: pa.DataType, value: Any) -> Predicate:
    value = _plain(value)
    if value is None:
        return (column, NEVER_OP, [])
    if pa.types.is_floating(t):
        return (column, op, _float(column, t, value))
    if _is_discrete(t):
        return _discrete(column, op, t, value)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        if not isinstance(value, str):
            raise _bad(column, t, value)
        return (column, op, value)
    if pa.types.is_boolean(t):
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return (column, op, value.strip().lower() == "true")
        if not isinstance(value, bool):
            raise _bad(column, t, value)
        return (column, op, value)
    try:
        return (column, op, pa.scalar(value, type=t).as_py())
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        raise _bad(column, t, value) from None


def _bad(column: str, t: pa.DataType, value: Any) -> FilterError:
    return FilterError(column, f"filter literal {value!r} is not a valid {t}")


def _float(column: str, t: pa.DataType, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal | str):
        raise _bad(column, t, value)
    try:
        return float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):
        raise _bad(column, t, value) from None


def _is_discrete(t: pa.DataType) -> bool:
    return bool(pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_date(t) or pa.types.is_timestamp(t))


def _number(column: str, t: pa.DataType, value: Any) -> Fraction | float:
    """An exact rational for a numeric literal, or ±inf (NaN counts as +inf: Spark orders it above all)."""
    if isinstance(value, bool) or not isinstance(value, int | float | decimal.Decimal | str):
        raise _bad(column, t, value)
    if isinstance(value, int):
        return Fraction(value)
    try:
        d = decimal.Decimal(repr(value) if isinstance(value, float) else value)
    except (decimal.InvalidOperation, ValueError):
        raise _bad(column, t, value) from None
    if d.is_nan():
        return _INF
    if d.is_infinite():
        return _INF if d > 0 else -_INF
    return Fraction(d)


def _instant_us(column: str, t: pa.DataType, value: Any) -> Fraction:
    """Microseconds since the epoch (UTC wall clock) of a date/datetime/ISO-8601 literal (or a numpy datetime64's)."""
    if isinstance(value, Fraction):
        return value
    if isinstance(value, str):
        text = value.strip()
        text = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
        try:
            value = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise _bad(column, t, value) from None
    if isinstance(value, datetime.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(datetime.UTC).replace(tzinfo=None)
        return Fraction((value - _EPOCH) // datetime.timedelta(microseconds=1))
    if isinstance(value, datetime.date):
        return Fraction((value - _EPOCH.date()).days * 86_400_000_000)
    raise _bad(column, t, value)


def _units(column: str, t: pa.DataType, value: Any) -> tuple[Fraction | float, int, int]:
    """(literal in the column's storage units, smallest unit value, largest) of a discrete type."""
    if pa.types.is_integer(t):
        bits = t.bit_width
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if pa.types.is_signed_integer(t) else (0, (1 << bits) - 1)
        return _number(column, t, value), lo, hi
    if pa.types.is_decimal(t):
        n = _number(column, t, value)
        top = 10**t.precision - 1
        return (n * 10**t.scale if isinstance(n, Fraction) else n), -top, top
    raw = isinstance(value, int) and not isinstance(value, bool)  # already in storage units
    if pa.types.is_date(t):
        return Fraction(value) if raw else _instant_us(column, t, value) / 86_400_000_000, _DATE_MIN, _DATE_MAX
    per_second = _UNITS_PER_SECOND[t.unit]
    lo = max(-(1 << 63), (datetime.datetime.min - _EPOCH) // datetime.timedelta(seconds=1) * per_second)
    hi = min((1 << 63) - 1, (datetime.datetime.max - _EPOCH) // datetime.timedelta(seconds=1) * per_second)
    return Fraction(value) if raw else _instant_us(column, t, value) * per_second / 1_000_000, lo, hi


def _from_units(t: pa.DataType, n: int) -> Any:
    if pa.types.is_integer(t):
        return n
    if pa.types.is_decimal(t):
        return decimal.Decimal(n).scaleb(-t.scale)
    if pa.types.is_date(t):
        return _EPOCH.date() + datetime.timedelta(days=n)
    if t.unit == "ns":
        return n  # Python datetimes stop at microseconds: nanosecond literals stay in storage form
    micros = n * 1_000_000 // _UNITS_PER_SECOND[t.unit]
    out = _EPOCH + datetime.timedelta(microseconds=micros)
    return out.replace(tzinfo=datetime.UTC) if t.tz is not None else out


def _discrete(column: str, op: str, t: pa.DataType, value: Any) -> Predicate:
    """Compare a column of whole storage units with any literal, exactly, by rewriting inexact literals."""
    u, lo, hi = _units(column, t, value)
    never: Predicate = (column, NEVER_OP, [])
    valid: Predicate = (column, VALID_OP, [])
    if isinstance(u, float):  # ±inf (NaN sorts as +inf)
        above = u > 0
        if op in ("=",):
            return never
        if op == "!=":
            return valid
        return valid if (op in ("<", "<=")) == above else never
    exact = u.denominator == 1 and lo <= u <= hi
    if op in ("=", "!="):
        if exact:
            return (column, op, _from_units(t, int(u)))
        return never if op == "=" else valid
    if op in ("<", "<="):
        bound = math.ceil(u) - 1 if op == "<" else math.floor(u)
        if bound >= hi:
            return valid
        if bound < lo:
            return never
        return (column, op, _from_units(t, int(u))) if exact else (column, "<=", _from_units(t, bound))
    bound = math.floor(u) + 1 if op == ">" else math.ceil(u)
    if bound <= lo:
        return valid
    if bound > hi:
        return never
    return (column, op, _from_units(t, int(u))) if exact else (column, ">=", _from_units(t, bound))


# -- evaluation ----------------------------------------------------------------------------------------
def to_expression(dnf: list[Conjunct], schema: pa.Schema) -> pc.Expression:
    """The exact pyarrow expression of a bound filter (a null result means "no match")."""
    ors = [reduce(lambda a, b: a & b, (_atom(p, schema.field(p[0]).type) for p in conj)) for conj in dnf]
    return reduce(lambda a, b: a | b, ors)


def _atom(pred: Predicate, t: pa.DataType) -> pc.Expression:
    column, op, lit = pred
    f = pc.field(column)
    if op in ("in", "not in") and not lit:
        return f.is_valid() if op == "not in" else pc.scalar(False)
    if pa.types.is_floating(t):
        x = f if t == pa.float64() else f.cast(pa.float64())
        if op == "in":
            return reduce(lambda a, b: a | b, (_float_atom(x, "=", v) for v in lit))
        if op == "not in":
            return reduce(lambda a, b: a & b, (_float_atom(x, "!=", v) for v in lit))
        return _float_atom(x, op, lit)
    if op == "in":
        return f.isin(pa.array(lit, t))
    if op == "not in":
        return ~f.isin(pa.array(lit, t)) & f.is_valid()
    s = pa.scalar(lit, t)
    return {"=": f == s, "!=": f != s, "<": f < s, "<=": f <= s, ">": f > s, ">=": f >= s}[op]


def _float_atom(x: pc.Expression, op: str, v: float) -> pc.Expression:
    """``x op v`` with Spark's NaN: equal to itself, greater than everything else."""
    nan = pc.Expression._call("is_nan", [x])
    if math.isnan(v):
        return {
            "=": nan,
            "!=": ~nan,
            "<": ~nan,
            "<=": x.is_valid(),
            ">": pc.scalar(False),
            ">=": nan,
        }[op]
    s = pa.scalar(v, pa.float64())
    # NaN is not in Parquet min/max statistics: an "or is_nan" keeps row groups of NaNs from being skipped
    return {
        "=": x == s,
        "!=": (x != s) | nan,
        "<": x < s,
        "<=": x <= s,
        ">": (x > s) | nan,
        ">=": (x >= s) | nan,
    }[op]


__all__ = ["bind_filters", "bind_predicate", "to_expression"]
