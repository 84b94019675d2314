"""Zero-copy conversions between Arrow arrays and numpy used by the vectorized folds."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc


def is_numeric_storage(t: pa.DataType) -> bool:
    """Types whose values are fixed-width numbers in one data buffer (ints, floats, temporal)."""
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_temporal(t)


def storage_dtype(t: pa.DataType) -> np.dtype:
    """The numpy dtype of a fixed-width type's data buffer."""
    if pa.types.is_integer(t) or pa.types.is_floating(t):
        return np.dtype(t.to_pandas_dtype())
    if pa.types.is_temporal(t):
        return np.dtype(np.int32) if t.bit_width == 32 else np.dtype(np.int64)
    raise TypeError(f"{t} has no fixed-width numeric storage")


def raw_numpy(arr: pa.Array) -> np.ndarray:
    """The data buffer of a fixed-width array as numpy (values under nulls are arbitrary)."""
    t = arr.type
    if pa.types.is_boolean(t):
        return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=np.int8)
    dtype = storage_dtype(t)
    buf = arr.buffers()[1]
    if buf is None:
        return np.zeros(len(arr), dtype=dtype)
    return np.frombuffer(buf, dtype=dtype, count=len(arr) + arr.offset)[arr.offset :]


def validity_buffer(valid: np.ndarray | None) -> pa.Buffer | None:
    """An Arrow validity bitmap for a boolean mask (``None`` when everything is valid)."""
    if valid is None or bool(valid.all()):
        return None
    return pa.py_buffer(np.packbits(valid.astype(bool), bitorder="little"))


def pool_empty(n: int, dtype: npt.DTypeLike) -> np.ndarray:
    """An uninitialised, writable numpy array of ``n`` values whose memory comes from Arrow's default pool.

    A merge's large temporaries are taken from the pool Arrow decodes into: it keeps freed pages for the next
    window, where the C allocator returns a large block to the system on free and faults it in again, page by
    page, on the next window's allocation.

    Example:
        >>> a = pool_empty(3, np.int32)
        >>> a[:] = 7
        >>> a.tolist(), a.flags.writeable
        ([7, 7, 7], True)
    """
    dt = np.dtype(dtype)
    return np.frombuffer(pa.allocate_buffer(max(0, n) * dt.itemsize), dtype=dt, count=max(0, n))


_ROW_NUMBERS: dict[np.dtype, np.ndarray] = {}
_ROW_NUMBERS_CACHED = 1 << 20


def row_numbers(start: int, count: int, dtype: npt.DTypeLike) -> np.ndarray:
    """``arange(start, start + count)`` of ``dtype``, a read-only view of a shared array while it is short.

    >>> row_numbers(2, 3, np.int32).tolist()
    [2, 3, 4]
    """
    dt = np.dtype(dtype)
    stop = start + count
    if stop > _ROW_NUMBERS_CACHED:
        return np.arange(start, stop, dtype=dt)
    cached = _ROW_NUMBERS.get(dt)
    if cached is None or len(cached) < stop:
        cached = np.arange(min(_ROW_NUMBERS_CACHED, max(stop, 2 * (0 if cached is None else len(cached)))), dtype=dt)
        cached.flags.writeable = False
        _ROW_NUMBERS[dt] = cached
    return cached[start:stop]


def int_range(first: int, count: int, dtype: npt.DTypeLike) -> np.ndarray:
    """``arange(first, first + count)`` of ``dtype`` in memory from Arrow's pool (see :func:`pool_empty`): a
    read keeps many such columns, which the C allocator would fault in page by page every time.

    >>> int_range(-2, 4, np.int64).tolist()
    [-2, -1, 0, 1]
    >>> big = int_range(5, 3 << 20, np.int64)
    >>> bool((big == np.arange(5, 5 + (3 << 20))).all())
    True
    """
    dt = np.dtype(dtype)
    out = pool_empty(count, dt)
    for at in range(0, count, _ROW_NUMBERS_CACHED):  # the shared row numbers, block by block
        m = min(_ROW_NUMBERS_CACHED, count - at)
        np.add(row_numbers(0, m, dt), dt.type(first + at), out=out[at : at + m])
    return out


def from_numpy(values: np.ndarray, valid: np.ndarray | None, t: pa.DataType) -> pa.Array:
    """An Arrow array of type ``t`` from numbers in its storage representation and a validity mask."""
    n = len(values)
    if pa.types.is_boolean(t):
        arr = pa.array(values.astype(bool), type=pa.bool_())
        return arr if valid is None or valid.all() else pc.if_else(pa.array(valid), arr, pa.nulls(n, t))
    data = np.ascontiguousarray(values.astype(storage_dtype(t), copy=False))
    return pa.Array.from_buffers(t, n, [validity_buffer(valid), pa.py_buffer(data)])


def decimal_unscaled(arr: pa.Array) -> np.ndarray:
    """Unscaled int64 values of a decimal128 array whose precision is at most 18."""
    buf = arr.buffers()[1]
    words = np.frombuffer(buf, dtype=np.int64, count=2 * (len(arr) + arr.offset))
    return words[2 * arr.offset :: 2]


def decimal_from_unscaled(values: np.ndarray, valid: np.ndarray | None, t: pa.DataType) -> pa.Array:
    """A decimal128 array from unscaled int64 values."""
    n = len(values)
    words = np.empty(2 * n, dtype=np.int64)
    words[0::2] = values
    words[1::2] = values >> 63
    return pa.Array.from_buffers(t, n, [validity_buffer(valid), pa.py_buffer(words)])


def scatter(base: pa.Array, positions: np.ndarray, values: pa.Array) -> pa.Array:
    """``base`` with ``base[positions[i]] = values[i]`` (works for every type, nested included)."""
    if len(positions) == 0:
        return base
    if len(positions) == len(base):
        order = np.empty(len(base), dtype=np.int64)
        order[positions] = np.arange(len(positions), dtype=np.int64)
        return values.take(pa.array(order))
    idx = np.arange(len(base), dtype=np.int64)
    idx[positions] = len(base) + np.arange(len(positions), dtype=np.int64)
    combined = pa.concat_arrays([base, values.cast(base.type)])
    return combined.take(pa.array(idx))


def take_rows(rows: pa.Table, idx: np.ndarray) -> pa.Table:
    """``rows.take(idx)``, or ``rows`` itself, uncopied, when ``idx`` is every row in order."""
    n = rows.num_rows
    if len(idx) == n and n and idx[0] == 0 and idx[-1] == n - 1 and bool(np.all(idx[1:] > idx[:-1])):
        return rows
    if len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= n):
        raise IndexError(f"row index out of bounds for {n} rows")
    # bounds checked once here, not again by Arrow for every column
    return pc.take(rows, pa.array(idx), boundscheck=False)


def take_keyed(rows: pa.Table, idx: np.ndarray, key: str | None) -> pa.Table:
    """:func:`take_rows` of a merge's survivors, one row per value of the single key column ``key`` (None: no such
    column), taken in ascending key order. When integer keys fill the range between the first and the last taken,
    the key column is that range, made rather than gathered.

    Example:
        >>> rows = pa.table({"k": [1, 2, 2, 3], "v": ["a", "b", "B", "c"]})
        >>> take_keyed(rows, np.array([0, 2, 3]), "k").to_pydict()
        {'k': [1, 2, 3], 'v': ['a', 'B', 'c']}
    """
    n = len(idx)
    if key is None or n < 2 or key not in rows.column_names or n == rows.num_rows:
        return take_rows(rows, idx)
    i = rows.schema.get_field_index(key)
    field = rows.schema.field(i)
    column = rows.column(i)
    if not pa.types.is_integer(field.type) or column.null_count:
        return take_rows(rows, idx)
    first, last = column[int(idx[0])].as_py(), column[int(idx[-1])].as_py()
    if last - first + 1 != n:
        return take_rows(rows, idx)
    # n distinct ascending integers from first to last are exactly that range
    keys = pa.array(int_range(first, n, field.type.to_pandas_dtype()), field.type)
    rest = rows.remove_column(i)
    if not rest.num_columns:  # the key alone
        return pa.Table.from_arrays([keys], schema=rows.schema)
    return take_rows(rest, idx).add_column(i, field, keys)


__all__ = [
    "decimal_from_unscaled",
    "decimal_unscaled",
    "from_numpy",
    "int_range",
    "is_numeric_storage",
    "pool_empty",
    "raw_numpy",
    "row_numbers",
    "scatter",
    "storage_dtype",
    "take_keyed",
    "take_rows",
]
