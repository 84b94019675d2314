"""Bitmap and sketch aggregate functions over serialized BYTES: ``rbm32``, ``rbm64``, ``hll_sketch``,
``theta_sketch``.

* ``rbm32`` / ``rbm64``: union of RoaringBitmap portable serializations (pyroaring ``BitMap`` /
  ``BitMap64``).
* ``hll_sketch``: DataSketches HLL union; the result is an HLL_4 compact sketch.
* ``theta_sketch``: DataSketches Theta union (default nominal entries, 4096); compact result.

Null rule as usual (``agg(null, x) = x`` — a lone value is kept byte for byte). A value that cannot be
deserialized raises :class:`~mergetable.core.errors.MergeError` naming the column. None can retract.
Each key is folded in Python, but with one union per key rather than one per record.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import datasketches
import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

from mergetable.core.errors import MergeError
from mergetable.merge.aggregates.base import (
    FoldInput,
    NullSkipping,
    considered_records,
    register_function,
    wrong_type,
)


class _BytesUnion(NullSkipping):
    label: ClassVar[str] = "?"

    @classmethod
    def check_type(cls, column: str, t: pa.DataType) -> str | None:
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            return None
        return wrong_type(cls.label, "VarBinaryType", t)

    def union(self, values: list[bytes]) -> bytes:
        raise NotImplementedError

    def _malformed(self, exc: Exception) -> MergeError:
        return MergeError(f"column '{self.column}': {self.name}: malformed serialized value ({exc})")

    def combine(self, acc: Any, x: Any) -> Any:
        return self.union([acc, x])

    def fold(self, fi: FoldInput) -> pa.Array:
        considered = considered_records(fi)
        order = fi.segments()[0]
        idx = np.arange(fi.size, dtype=np.int64) if order is None else order
        if considered is not None:
            idx = idx[considered[idx]]
        values = fi.values.take(pa.array(idx)).to_pylist()
        gids = fi.gid[idx]
        bounds = np.searchsorted(gids, np.arange(fi.n_groups + 1))
        active = None if fi.active is None else fi.active.tolist()
        out: list[bytes | None] = [None] * fi.n_groups
        for g in range(fi.n_groups):
            lo, hi = int(bounds[g]), int(bounds[g + 1])
            if lo == hi or (active is not None and not active[g]):
                continue
            out[g] = values[lo] if hi - lo == 1 else self.union(values[lo:hi])
        return pa.array(out, type=self.type)


def _bitmap_union(kind: Any) -> Callable[[Any, list[bytes]], bytes]:
    def union(self: _BytesUnion, values: list[bytes]) -> bytes:
        try:
            maps = [kind.deserialize(v) for v in values]
        except (ValueError, TypeError, OverflowError) as exc:
            raise self._malformed(exc) from None
        result = maps[0].union(*maps[1:])
        data: bytes = result.serialize()
        return data

    return union


@register_function
class RoaringBitmap32(_BytesUnion):
    """``rbm32``: OR of 32-bit RoaringBitmaps."""

    name = "rbm32"
    label = "roaring bitmap"
    union = _bitmap_union(BitMap)  # type: ignore[assignment]


@register_function
class RoaringBitmap64(_BytesUnion):
    """``rbm64``: OR of 64-bit RoaringBitmaps."""

    name = "rbm64"
    label = "roaring bitmap"
    union = _bitmap_union(BitMap64)  # type: ignore[assignment]


@register_function
class HllSketch(_BytesUnion):
    """``hll_sketch``: union of HLL sketches, returned as a compact HLL_4 sketch."""

    name = "hll_sketch"
    label = "hll sketch"

    def union(self, values: list[bytes]) -> bytes:
        try:
            sketches = [datasketches.hll_sketch.deserialize(v) for v in values]
        except (ValueError, RuntimeError, TypeError) as exc:
            raise self._malformed(exc) from None
        union = datasketches.hll_union(min(s.lg_config_k for s in sketches))
        for sketch in sketches:
            union.update(sketch)
        data: bytes = union.get_result(datasketches.tgt_hll_type.HLL_4).serialize_compact()
        return data


@register_function
class ThetaSketch(_BytesUnion):
    """``theta_sketch``: union of Theta sketches (compact result)."""

    name = "theta_sketch"
    label = "theta sketch"

    def union(self, values: list[bytes]) -> bytes:
        union = datasketches.theta_union()
        try:
            for v in values:
                union.update(datasketches.compact_theta_sketch.deserialize(v))
        except (ValueError, RuntimeError, TypeError) as exc:
            raise self._malformed(exc) from None
        data: bytes = union.get_result().serialize()
        return data


__all__ = ["HllSketch", "RoaringBitmap32", "RoaringBitmap64", "ThetaSketch"]
