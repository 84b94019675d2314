"""Filters in pyarrow's DNF tuple convention and what can be pruned with them.

A filter is a list of ``(column, op, value)`` tuples (AND) or a list of such lists (OR of ANDs), with ops
``= == != < <= > >= in not in``, exactly as ``pyarrow.parquet.read_table(filters=...)``.
Pruning only ever skips data that cannot match; the exact filter is applied to merged rows. Literals are bound
to the column types (and the filter given its SQL semantics) by :mod:`mergetable.core.filters`.
"""

from __future__ import annotations

import base64
import decimal
import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pyarrow as pa

from mergetable.core.errors import ArgumentError, SchemaError
from mergetable.core.floats import collapse_zero, decode_float, encode_float, order_key
from mergetable.core.hashing import bucket_of
from mergetable.core.schema import check_column

Predicate = tuple[str, str, Any]
Conjunct = list[Predicate]
Filters = Sequence[Predicate] | Sequence[Sequence[Predicate]]
_OPS = {"=", "==", "!=", "<", "<=", ">", ">=", "in", "not in"}
_MAX_BUCKET_COMBINATIONS = 4096


def normalize_filters(filters: Filters | None, schema: pa.Schema) -> list[Conjunct] | None:
    """DNF form ``[[pred, …], …]`` with every column and op checked; None means no filter."""
    if isinstance(filters, str) or not isinstance(filters, Sequence | type(None)):
        raise ArgumentError(
            "filter", f"expected a list of (column, op, value) tuples such as [('id', '>', 1)], got {filters!r}"
        )
    if filters is None or len(filters) == 0:
        return None
    if isinstance(filters, tuple) and len(filters) == 3 and isinstance(filters[0], str):
        raise ArgumentError("filter", f"wrap a single predicate in a list: [{filters!r}]")
    first = filters[0]
    dnf: list[Conjunct]
    if isinstance(first, tuple):
        dnf = [list(filters)]  # type: ignore[arg-type]
    else:
        dnf = [list(c) for c in filters]  # type: ignore[arg-type]
    for conj in dnf:
        for pred in conj:
            if not isinstance(pred, tuple) or len(pred) != 3:
                raise SchemaError(f"filter {pred!r} is not a (column, op, value) tuple")
            col, op, _ = pred
            check_column(col, schema.names, "filter column")
            if op not in _OPS:
                raise SchemaError(f"unknown filter operator '{op}' (expected one of {sorted(_OPS)})", col)
    return dnf


def columns_of(dnf: list[Conjunct] | None) -> list[str]:
    return [] if dnf is None else list(dict.fromkeys(p[0] for c in dnf for p in c))


def restrict(dnf: list[Conjunct] | None, columns: Iterable[str]) -> list[Conjunct] | None:
    """A weaker filter using only ``columns`` (None if it would be always true)."""
    if dnf is None:
        return None
    cols = set(columns)
    out = []
    for conj in dnf:
        kept = [p for p in conj if p[0] in cols]
        if not kept:
            return None
        out.append(kept)
    return out


def point_values(dnf: list[Conjunct] | None, column: str, t: pa.DataType, limit: int) -> pa.Array | None:
    """The values of ``column`` (of type ``t``) that every row matching the bound filter ``dnf`` takes one of,
    when they are at most ``limit`` and ``t`` is an integer or string type (exact statistics and sort order);
    else None.

    >>> point_values([[("id", "=", 7), ("v", ">", 1)], [("id", "in", [3, 7])]], "id", pa.int64(), 10).to_pylist()
    [7, 3]
    >>> point_values([[("id", "=", 7)], [("v", "=", 1)]], "id", pa.int64(), 10) is None
    True
    """
    if dnf is None or not (pa.types.is_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
        return None
    out: list[Any] = []
    for conj in dnf:
        pinned: list[Any] | None = None
        for col, op, lit in conj:
            if col != column or op not in ("=", "==", "in"):
                continue
            values = list(lit) if op == "in" else [lit]
            pinned = values if pinned is None else [v for v in pinned if v in values]
        if pinned is None:
            return None
        out.extend(v for v in pinned if v not in out)
    if not out or len(out) > limit or any(v is None for v in out):
        return None
    return pa.array(out, t)


# -- evaluation against a single value or a value range ------------------------------------------------
def comparable(value: Any, t: pa.DataType) -> Any:
    """A Python value that orders like ``value`` does as Arrow type ``t`` (temporal → int, decimal → Decimal)."""
    if value is None:
        return None
    if pa.types.is_floating(t):  # the total order of float keys: an int (see mergetable.core.floats)
        return order_key(decode_float(value))
    if pa.types.is_temporal(t):
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        storage = pa.int32() if t.bit_width == 32 else pa.int64()
        return pa.scalar(value, t).cast(storage).as_py()
    if pa.types.is_decimal(t):
        return decimal.Decimal(str(value))
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return value if isinstance(value, bytes) else base64.b64decode(value)
    return value


def encode_stat(value: Any, t: pa.DataType) -> Any:
    """JSON form of a statistic of type ``t``."""
    if value is None:
        return None
    if isinstance(value, float):
        return encode_float(value)
    if pa.types.is_temporal(t) or pa.types.is_decimal(t):
        c = comparable(value, t)
        return str(c) if isinstance(c, decimal.Decimal) else c
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def _pred_on_range(op: str, lo: Any, hi: Any, lit: Any) -> bool:
    """Can some value v in [lo, hi] satisfy ``v op lit``? (lo/hi None = unknown bound)."""
    try:
        if op in ("=", "=="):
            return not ((lo is not None and lit < lo) or (hi is not None and lit > hi))
        if op == "in":
            return any(_pred_on_range("=", lo, hi, x) for x in lit)
        if op == "<":
            return lo is None or lo < lit
        if op == "<=":
            return lo is None or lo <= lit
        if op == ">":
            return hi is None or hi > lit
        if op == ">=":
            return hi is None or hi >= lit
        if op == "!=":
            return not (lo is not None and lo == hi == lit)
        if op == "not in":
            return not (lo is not None and lo == hi and lo in lit)
    except TypeError:
        return True
    return True


RangeLookup = Callable[[str], tuple[Any, Any] | None]


def may_match(dnf: list[Conjunct] | None, ranges: RangeLookup, types: pa.Schema) -> bool:
    """Whether rows whose columns lie in the given [min, max] ranges may match (False = safe to skip).

    ``ranges(column)`` returns (min, max) in :func:`comparable` form, or None when unknown.
    """
    if dnf is None:
        return True
    for conj in dnf:
        ok = True
        for col, op, lit in conj:
            r = ranges(col)
            if r is None:
                continue
            t = types.field(col).type
            if pa.types.is_floating(t):  # NaN is above every value and absent from statistics
                continue
            try:
                c_lit = [comparable(x, t) for x in lit] if op in ("in", "not in") else comparable(lit, t)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, decimal.InvalidOperation):
                continue
            lo, hi = r
            if c_lit is not None and pa.types.is_floating(t):
                if op in ("!=", "not in"):  # NaN != NaN under IEEE, equal under Spark: never prune
                    continue
                # Filters compare -0.0 equal to 0.0 (IEEE and Spark SQL alike), keys do not.
                lo, hi = (None if v is None else collapse_zero(v) for v in (lo, hi))
                c_lit = [collapse_zero(x) for x in c_lit] if isinstance(c_lit, list) else collapse_zero(c_lit)
            if c_lit is None or not _pred_on_range(op, lo, hi, c_lit):
                ok = False
                break
        if ok:
            return True
    return False


def candidate_buckets(
    dnf: list[Conjunct] | None, bucket_keys: Sequence[str], num_buckets: int, schema: pa.Schema
) -> set[int] | None:
    """Buckets that can hold matching rows, or None if every bucket may (no full bucket-key equality)."""
    if dnf is None or num_buckets <= 1 or not bucket_keys:  # -1: an append table without buckets
        return None
    found: set[int] = set()
    for conj in dnf:
        choices: dict[str, list[Any]] = {}
        for col, op, lit in conj:
            if col not in bucket_keys:
                continue
            vals = [lit] if op in ("=", "==") else list(lit) if op == "in" else None
            if vals is None:
                continue
            choices[col] = vals if col not in choices else [v for v in choices[col] if v in vals]
        if set(choices) != set(bucket_keys):
            return None
        combos = list(
            itertools.islice(itertools.product(*(choices[k] for k in bucket_keys)), _MAX_BUCKET_COMBINATIONS + 1)
        )
        if len(combos) > _MAX_BUCKET_COMBINATIONS:
            return None
        if not combos:
            continue
        try:
            cols = [pa.array([c[i] for c in combos], schema.field(k).type) for i, k in enumerate(bucket_keys)]
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            return None
        found.update(int(b) for b in bucket_of(cols, num_buckets, bucket_keys))
    return found
