"""Spark pushed-down filters → mergetable DNF predicates.

A filter is *accepted* only when mergetable applies it with exactly Spark's semantics (its literal is bound by
:func:`mergetable.core.filters.bind_predicate`, as every other filter is); the reader then
uses it to prune partitions, buckets and key ranges, and applies it to the merged rows. Everything else
goes back to Spark. Not accepted:

* columns of floating-point type (nothing to prune by: their statistics leave NaN out), and of nested,
  binary or time types;
* comparisons whose literal no value of the column can equal (binding would rewrite them);
* ``IsNull``/``IsNotNull`` and the string filters (no DNF operator for them);
* ``NOT IN`` on a nullable column or with a NULL in the list (Spark's three-valued logic);
* nested column paths, and literals that do not convert to the column's type.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    Not,
)

from mergetable.core.errors import FilterError
from mergetable.core.filters import bind_predicate
from mergetable.core.predicates import Conjunct, Predicate

_OPS: dict[type[Filter], str] = {
    EqualTo: "=",
    EqualNullSafe: "=",
    GreaterThan: ">",
    GreaterThanOrEqual: ">=",
    LessThan: "<",
    LessThanOrEqual: "<=",
}
_NEGATED = {"=": "!=", ">": "<=", ">=": "<", "<": ">=", "<=": ">"}


def _exact_type(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
    )


def _bound(column: str, op: str, value: Any, fld: pa.Field) -> Predicate | None:
    """The predicate bound by mergetable's filter semantics, or None when binding had to rewrite it."""
    try:
        pred = bind_predicate((column, op, value), fld)
    except FilterError:
        return None
    return pred if pred[1] == op else None


def to_predicate(f: Filter, schema: pa.Schema) -> Predicate | None:
    """The DNF predicate equivalent to Spark filter ``f``, or None if it cannot be applied exactly."""
    negated = isinstance(f, Not)
    inner: Any = f.child if isinstance(f, Not) else f
    attribute = getattr(inner, "attribute", None)
    if not isinstance(attribute, tuple) or len(attribute) != 1:
        return None
    column = attribute[0]
    if column not in schema.names:
        return None
    fld = schema.field(column)
    if not _exact_type(fld.type):
        return None
    op = _OPS.get(type(inner))
    if op is not None:
        if inner.value is None or (negated and isinstance(inner, EqualNullSafe)):  # NOT (a <=> v) keeps nulls
            return None
        return _bound(column, _NEGATED[op] if negated else op, inner.value, fld)
    if isinstance(inner, In):
        values = list(inner.value)
        if negated and (fld.nullable or any(v is None for v in values)):
            return None
        # x IN (…, NULL) is never true because of the NULL: binding drops it
        pred = _bound(column, "not in" if negated else "in", values, fld)
        if pred is None or len(pred[2]) != len([v for v in values if v is not None]):
            return None  # a value no row can equal: Spark applies the filter
        return pred
    return None


def split_filters(filters: list[Filter], schema: pa.Schema) -> tuple[Conjunct, list[Filter]]:
    """(accepted predicates, filters Spark must still apply)."""
    accepted: Conjunct = []
    rejected: list[Filter] = []
    for f in filters:
        pred = to_predicate(f, schema)
        if pred is None:
            rejected.append(f)
        else:
            accepted.append(pred)
    return accepted, rejected


def and_dnf(dnf: list[Conjunct] | None, conjunct: Conjunct) -> list[Conjunct] | None:
    """``dnf AND conjunct`` in DNF form (None = no filter)."""
    if not conjunct:
        return dnf
    if dnf is None:
        return [list(conjunct)]
    return [[*c, *conjunct] for c in dnf]


__all__ = ["and_dnf", "split_filters", "to_predicate"]
