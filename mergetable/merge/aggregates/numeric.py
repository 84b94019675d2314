"""Numeric aggregate functions: ``sum``, ``product``, ``max``, ``min``, ``bool_and``, ``bool_or``.

All follow Paimon's null rule (``agg(null, x) = x``, ``agg(acc, null) = acc``) and are computed with
``numpy.ufunc.at`` over the records' group ids (commutative, so records need not be contiguous); a
``RESET`` restarts the accumulator from its value. Integer ``sum``/``product`` raise on overflow at the
step where Paimon's ``Math.addExact``/``multiplyExact`` would (groups whose magnitude bound says an
overflow is possible are re-folded exactly, record by record). DECIMAL keeps the column's precision and
scale; a result that no longer fits raises as well. ``sum`` retracts by subtracting, ``product`` by
dividing (Java integer division); the others cannot retract.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from mergetable.core.errors import MergeError
from mergetable.merge.aggregates.base import (
    RETRACT,
    FoldInput,
    NullSkipping,
    considered_records,
    groups_with,
    paimon_type_name,
    register_function,
    wrong_type,
)
from mergetable.merge.arrays import (
    decimal_from_unscaled,
    decimal_unscaled,
    from_numpy,
    is_numeric_storage,
    raw_numpy,
)

_WORD = {8: "byte", 16: "short", 32: "int", 64: "long"}
_DECIMAL_CONTEXT = Context(prec=80)


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_signed_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal128(t)


def _add(a: Any, b: Any) -> Any:
    return _DECIMAL_CONTEXT.add(a, b) if isinstance(a, Decimal) else a + b


def _sub(a: Any, b: Any) -> Any:
    return _DECIMAL_CONTEXT.subtract(a, b) if isinstance(a, Decimal) else a - b


def _mul(a: Any, b: Any) -> Any:
    return _DECIMAL_CONTEXT.multiply(a, b) if isinstance(a, Decimal) else a * b


def _int_bounds(t: pa.DataType) -> tuple[int, int]:
    bits = t.bit_width
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


class _NumericBase(NullSkipping):
    #: The operator ``agg`` applies: ``+`` or ``*``.
    symbol: ClassVar[str] = "+"

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        return None if _is_numeric(t) else wrong_type(cls.name, "NumericType", t)

    # -- exact scalar arithmetic ------------------------------------------------------------------
    def _overflow(self, a: Any, op: str, b: Any, result: Any) -> MergeError:
        t = self.type
        expr = f"-{b}" if a is None else f"{a} {op} {b}"
        if pa.types.is_decimal128(t):
            text = f"DECIMAL({t.precision}, {t.scale}) overflow: {expr} = {result}"
        elif t.bit_width < 32:
            text = f"{_WORD[t.bit_width]} overflow: {expr} = {result}"
        else:
            text = f"{_WORD[t.bit_width]} overflow: {expr}"
        return MergeError(f"column '{self.column}': {self.name}: {text}")

    def _checked(self, a: Any, op: str, b: Any, result: Any) -> Any:
        t = self.type
        if pa.types.is_integer(t):
            lo, hi = _int_bounds(t)
            if not lo <= result <= hi:
                raise self._overflow(a, op, b, result)
        elif pa.types.is_decimal128(t):
            try:
                result = result.quantize(Decimal(1).scaleb(-t.scale), rounding=ROUND_HALF_UP, context=_DECIMAL_CONTEXT)
            except InvalidOperation:
                raise self._overflow(a, op, b, result) from None
            if abs(result) >= Decimal(10) ** (t.precision - t.scale):
                raise self._overflow(a, op, b, result)
        return result

    def combine(self, acc: Any, x: Any) -> Any:
        return self._checked(acc, self.symbol, x, _mul(acc, x) if self.symbol == "*" else _add(acc, x))

    def _refold_exact(self, fi: FoldInput, risky: np.ndarray) -> None:
        """Re-fold the ``risky`` groups record by record (raises at the first overflow)."""
        if fi.active is not None:
            risky = risky & fi.active
        if risky.any():
            sub = FoldInput(fi.column, fi.n_groups, fi.gid, fi.values, fi.events, risky, fi.contiguous)
            self.fold_scalar(sub)


@register_function
class Sum(_NumericBase):
    """``sum``: adds; retracts by subtracting (``retract(null, x) = -x``)."""

    name = "sum"
    symbol = "+"
    supports_retract = True

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        if x is None:
            return acc
        if acc is None:
            return self._checked(None, "-", x, _sub(0 * x, x))
        return self._checked(acc, "-", x, _sub(acc, x))

    def fold(self, fi: FoldInput) -> pa.Array:
        t = self.type
        if pa.types.is_decimal128(t) and t.precision > 18:
            return self.fold_scalar(fi)
        considered = considered_records(fi)
        has = groups_with(fi, considered)
        if pa.types.is_decimal128(t):
            vals = decimal_unscaled(fi.values)
        else:
            vals = raw_numpy(fi.values)
        if pa.types.is_floating(t):
            signed = vals.astype(np.float64)
            if fi.has(RETRACT):
                signed = np.where(fi.ev == RETRACT, -signed, signed)
            if considered is not None:
                signed = np.where(considered, signed, 0.0)
            sums = np.bincount(fi.gid, weights=signed, minlength=fi.n_groups)
            return from_numpy(sums.astype(vals.dtype), has, t)
        ints = vals.astype(np.int64, copy=False)
        isigned = np.where(fi.ev == RETRACT, -ints, ints) if fi.has(RETRACT) else ints
        if considered is not None:
            isigned = np.where(considered, isigned, 0)
        sums = np.zeros(fi.n_groups, dtype=np.int64)
        np.add.at(sums, fi.gid, isigned)
        if pa.types.is_decimal128(t):
            limit = float(10**t.precision - 1) * (1 - 1e-9)
        else:
            limit = float(_int_bounds(t)[1]) if t.bit_width < 64 else 2.0**62
        peak = max(abs(int(ints.min())), abs(int(ints.max()))) if len(ints) else 0
        if peak * int(np.bincount(fi.gid).max()) > limit:
            magnitude = np.abs(ints.astype(np.float64))
            if considered is not None:
                magnitude = np.where(considered, magnitude, 0.0)
            bound = np.bincount(fi.gid, weights=magnitude, minlength=fi.n_groups)
            self._refold_exact(fi, bound > limit)
        if pa.types.is_decimal128(t):
            return decimal_from_unscaled(sums, has, t)
        return from_numpy(sums, has, t)


@register_function
class Product(_NumericBase):
    """``product``: multiplies; retracts by dividing (integer division truncates, as in Java)."""

    name = "product"
    symbol = "*"
    supports_retract = True

    def retract(self, acc: Any, x: Any, state: Any) -> Any:
        if acc is None or x is None:
            return acc
        t = self.type
        if pa.types.is_floating(t):
            with np.errstate(all="ignore"):
                return float(np.float64(acc) / np.float64(x))
        if x == 0:
            raise MergeError(f"column '{self.column}': {self.name}: / by zero")
        if pa.types.is_integer(t):
            q = abs(acc) // abs(x)
            return self._checked(acc, "/", x, q if (acc >= 0) == (x > 0) else -q)
        return self._checked(acc, "/", x, _DECIMAL_CONTEXT.divide(acc, x))

    def fold(self, fi: FoldInput) -> pa.Array:
        t = self.type
        if pa.types.is_decimal128(t) or fi.any_active(fi.ev == RETRACT):
            return self.fold_scalar(fi)
        considered = considered_records(fi)
        has = groups_with(fi, considered)
        vals = raw_numpy(fi.values)
        if pa.types.is_floating(t):
            fvals = vals.astype(np.float64)
            if considered is not None:
                fvals = np.where(considered, fvals, 1.0)
            prods = np.ones(fi.n_groups, dtype=np.float64)
            np.multiply.at(prods, fi.gid, fvals)
            return from_numpy(prods.astype(vals.dtype), has, t)
        ints = vals.astype(np.int64, copy=False)
        if considered is not None:
            ints = np.where(considered, ints, 1)
        prods = np.ones(fi.n_groups, dtype=np.int64)
        np.multiply.at(prods, fi.gid, ints)
        logs = np.log2(np.maximum(np.abs(ints.astype(np.float64)), 1.0))
        bound = np.bincount(fi.gid, weights=logs, minlength=fi.n_groups)
        self._refold_exact(fi, bound >= t.bit_width - 1.01)
        return from_numpy(prods, has, t)


class _Extreme(NullSkipping):
    """``max``/``min`` over every comparable type."""

    pick_max: ClassVar[bool] = True

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        if pa.types.is_nested(t) or pa.types.is_null(t):
            return f"Data type for {cls.name} column '{column}' must be comparable but was '{paimon_type_name(t)}'."
        return None

    def combine(self, acc: Any, x: Any) -> Any:
        return max(acc, x) if self.pick_max else min(acc, x)

    def fold(self, fi: FoldInput) -> pa.Array:
        considered = considered_records(fi)
        has = groups_with(fi, considered)
        t = self.type
        if is_numeric_storage(t) or pa.types.is_boolean(t):
            vals = raw_numpy(fi.values)
            if pa.types.is_floating(t):
                work = vals.astype(np.float64)
                fill = -np.inf if self.pick_max else np.inf
                if considered is not None:
                    work = np.where(considered, work, fill)
                out = np.full(fi.n_groups, fill)
                if self.pick_max:
                    with np.errstate(invalid="ignore"):
                        np.maximum.at(out, fi.gid, work)  # NaN wins, as with Java's Double.compare
                else:
                    # Java orders NaN above everything: min skips NaN unless every value is NaN.
                    nan = np.isnan(work)
                    np.minimum.at(out, fi.gid, np.where(nan, np.inf, work))
                    non_nan = groups_with(fi, ~nan if considered is None else ~nan & considered)
                    out[has & ~non_nan] = np.nan
                return from_numpy(out.astype(vals.dtype), has, t)
            ints = vals.astype(np.int64, copy=False)
            info = np.iinfo(np.int64)
            fill_i = info.min if self.pick_max else info.max
            if considered is not None:
                ints = np.where(considered, ints, fill_i)
            out_i = np.full(fi.n_groups, fill_i, dtype=np.int64)
            (np.maximum if self.pick_max else np.minimum).at(out_i, fi.gid, ints)
            return from_numpy(out_i, has, t)
        gid = fi.gid if considered is None else fi.gid[considered]
        values = fi.values if considered is None else fi.values.filter(pa.array(considered))
        how = "max" if self.pick_max else "min"
        table = pa.table({"g": pa.array(gid, pa.int64()), "v": values})
        agg = table.group_by("g", use_threads=False).aggregate([("v", how)])
        order = np.full(fi.n_groups, -1, dtype=np.int64)
        groups = np.asarray(agg.column("g").to_numpy())
        order[groups] = np.arange(len(groups), dtype=np.int64)
        result = agg.column(f"v_{how}").combine_chunks()
        return result.take(pa.array(order, mask=order < 0))


@register_function
class Max(_Extreme):
    """``max``: keeps the larger value."""

    name = "max"
    pick_max = True


@register_function
class Min(_Extreme):
    """``min``: keeps the smaller value."""

    name = "min"
    pick_max = False


class _Bool(NullSkipping):
    all_true: ClassVar[bool] = True
    label: ClassVar[str] = "?"

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        return None if pa.types.is_boolean(t) else wrong_type(cls.label, "BooleanType", t)

    def combine(self, acc: Any, x: Any) -> Any:
        return (acc and x) if self.all_true else (acc or x)

    def fold(self, fi: FoldInput) -> pa.Array:
        considered = considered_records(fi)
        has = groups_with(fi, considered)
        vals = raw_numpy(fi.values)
        identity = 1 if self.all_true else 0
        if considered is not None:
            vals = np.where(considered, vals, identity).astype(np.int8)
        out = np.full(fi.n_groups, identity, dtype=np.int8)
        (np.minimum if self.all_true else np.maximum).at(out, fi.gid, vals)
        return from_numpy(out, has, pa.bool_())


@register_function
class BoolAnd(_Bool):
    """``bool_and``: true only if every value is true."""

    name = "bool_and"
    label = "bool and"
    all_true = True


@register_function
class BoolOr(_Bool):
    """``bool_or``: true if any value is true."""

    name = "bool_or"
    label = "bool or"
    all_true = False


__all__ = ["BoolAnd", "BoolOr", "Max", "Min", "Product", "Sum"]
