"""Column statistics of Arrow data, in the JSON form stored in :class:`SimpleStats`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.floats import order_keys
from mergetable.core.predicates import encode_stat
from mergetable.core.stats_mode import StatsMode, truncate_max, truncate_min
from mergetable.metadata.models import SimpleStats


def _storage(col: pa.ChunkedArray | pa.Array | pa.Scalar) -> pa.ChunkedArray | pa.Array | pa.Scalar:
    """Temporal values as their integer storage (days or units), which orders the same way."""
    t = col.type
    if pa.types.is_temporal(t):
        return col.cast(pa.int32() if t.bit_width == 32 else pa.int64())
    return col


FULL = StatsMode("full")


def _has_order(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_null(t))


def _float_min_max(col: pa.ChunkedArray) -> tuple[float, float]:
    """min and max in the total order of float keys (NaN greatest, -0.0 below 0.0)."""
    values = np.asarray(col.drop_null().to_numpy(), dtype=np.float64)
    keys = order_keys(values)
    return float(values[int(np.argmin(keys))]), float(values[int(np.argmax(keys))])


def column_stats(table: pa.Table, columns: Sequence[str], modes: Sequence[StatsMode] | None = None) -> SimpleStats:
    """min/max/null count of ``columns`` (min/max None for unordered types), as ``modes`` says (default full)."""
    mins: list[Any] = []
    maxs: list[Any] = []
    nulls: list[int | None] = []
    for i, c in enumerate(columns):
        mode = modes[i] if modes is not None else FULL
        col = table.column(c)
        t = col.type
        nulls.append(col.null_count if mode.counts else None)
        lo: Any = None
        hi: Any = None
        if not mode.bounds or len(col) == col.null_count:
            pass
        elif pa.types.is_floating(t):
            lo, hi = _float_min_max(col)
        elif _has_order(t):
            mm = pc.min_max(_storage(col))
            lo, hi = mm["min"].as_py(), mm["max"].as_py()
            if mode.kind == "truncate" and isinstance(lo, str | bytes):
                lo, hi = truncate_min(lo, mode.length), truncate_max(hi, mode.length)
        mins.append(encode_stat(lo, t))
        maxs.append(encode_stat(hi, t))
    return SimpleStats(min_values=tuple(mins), max_values=tuple(maxs), null_counts=tuple(nulls))


def key_row(table: pa.Table, columns: Sequence[str], index: int) -> tuple[Any, ...]:
    """The key of row ``index`` in stats form."""
    return tuple(encode_stat(_storage(table.column(c)[index]).as_py(), table.schema.field(c).type) for c in columns)
