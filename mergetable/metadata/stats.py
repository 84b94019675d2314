"""Column statistics of Arrow data, in the JSON form stored in :class:`SimpleStats`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

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


def column_stats(
    table: pa.Table,
    columns: Sequence[str],
    modes: Sequence[StatsMode] | None = None,
    known: Mapping[str, tuple[Any, Any]] | None = None,
) -> SimpleStats:
    """min/max/null count of ``columns`` (min/max None for unordered types), as ``modes`` says (default full);
    ``known``: exact (min, max) of some columns, taken as they are (see :func:`parquet_bounds`)."""
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
        elif known is not None and c in known:
            lo, hi = known[c]
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


def parquet_bounds(metadata: pq.FileMetaData, schema: pa.Schema) -> dict[str, tuple[Any, Any]]:
    """Exact (min, max) of the signed-integer and string columns of ``schema``, from the statistics the Parquet
    writer recorded in ``metadata`` (the same values :func:`column_stats` computes: these types order alike in
    both). A column is left out when a row group with values has no min/max (strings over Parquet's size
    limit) or none of its rows has a value.

    >>> import pyarrow.parquet as pq
    >>> sink = pa.BufferOutputStream()
    >>> rows = pa.table({"k": [3, 1, 2], "s": ["b", None, "a"], "f": [1.0, 2.0, 0.5]})
    >>> with pq.ParquetWriter(sink, rows.schema) as w:
    ...     w.write_table(rows, row_group_size=2)
    >>> parquet_bounds(w.writer.metadata, rows.schema)
    {'k': (1, 3), 's': ('a', 'b')}
    """
    leaves = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    out: dict[str, tuple[Any, Any]] = {}
    for field in schema:
        t = field.type
        j = leaves.get(field.name)
        if j is None or not (pa.types.is_signed_integer(t) or pa.types.is_string(t) or pa.types.is_large_string(t)):
            continue
        bounds: list[tuple[Any, Any]] = []
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            stats = group.column(j).statistics
            if stats is not None and stats.has_min_max:
                bounds.append((stats.min, stats.max))
            elif stats is None or not stats.has_null_count or stats.null_count != group.num_rows:
                break  # values without a recorded min/max
        else:
            if bounds:
                out[field.name] = (min(b[0] for b in bounds), max(b[1] for b in bounds))
    return out


def parquet_file_stats(
    metadata: pq.FileMetaData,
    schema: pa.Schema,
    modes: Sequence[StatsMode],
    read: Callable[[list[str]], pa.Table],
) -> SimpleStats:
    """The :func:`column_stats` of a Parquet file's columns (``schema``, in order, as ``modes`` says) without
    decoding the columns whose footer statistics give them: null counts from the footer, min and max from it
    where :func:`parquet_bounds` takes them as exact (signed integers, strings). The other columns (floats, whose
    NaN the footer leaves out; dates, decimals, binaries ...) are decoded: ``read(names)`` returns them.

    >>> sink = pa.BufferOutputStream()
    >>> rows = pa.table({"k": [3, None, 2], "f": [1.0, float("nan"), 0.5]})
    >>> with pq.ParquetWriter(sink, rows.schema) as w:
    ...     w.write_table(rows)
    >>> stats = parquet_file_stats(w.writer.metadata, rows.schema, [FULL, FULL], lambda names: rows.select(names))
    >>> stats.min_values, stats.max_values, stats.null_counts
    ((2, 0.5), (3, 'NaN'), (1, 0))
    """
    rows = metadata.num_rows
    leaves = {metadata.schema.column(j).path: j for j in range(metadata.num_columns)}
    known = parquet_bounds(metadata, schema)

    def footer_nulls(name: str) -> int | None:
        j = leaves.get(name)
        if j is None or pa.types.is_nested(schema.field(name).type):
            return None
        total = 0
        for g in range(metadata.num_row_groups):
            stats = metadata.row_group(g).column(j).statistics
            if stats is None or not stats.has_null_count:
                return None
            total += stats.null_count
        return total

    nulls = {f.name: footer_nulls(f.name) for f in schema}
    decode = [
        f.name
        for f, mode in zip(schema, modes, strict=True)
        if (mode.counts and nulls[f.name] is None)
        or (mode.bounds and f.name not in known and _has_order(f.type) and nulls[f.name] != rows)
    ]
    decoded = read(decode) if decode else None
    mins: list[Any] = []
    maxs: list[Any] = []
    counts: list[int | None] = []
    for f, mode in zip(schema, modes, strict=True):
        if decoded is not None and f.name in decode:
            one = column_stats(decoded, [f.name], [mode])
        else:  # the footer's bounds (when any) stand for the column; its null count is the footer's
            bounds = known.get(f.name)
            values = pa.table({f.name: pa.array(list(bounds) if bounds else [], f.type)})
            one = column_stats(values, [f.name], [mode], known)
            one = one.model_copy(update={"null_counts": (nulls[f.name] if mode.counts else None,)})
        mins.append(one.min_values[0])
        maxs.append(one.max_values[0])
        counts.append(one.null_counts[0])
    return SimpleStats(min_values=tuple(mins), max_values=tuple(maxs), null_counts=tuple(counts))


def key_row(table: pa.Table, columns: Sequence[str], index: int) -> tuple[Any, ...]:
    """The key of row ``index`` in stats form."""
    return tuple(encode_stat(_storage(table.column(c)[index]).as_py(), table.schema.field(c).type) for c in columns)
