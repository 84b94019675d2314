"""Stable, vectorized hashing of key columns, used to assign buckets.

The hash is defined on a column's canonical bytes and is the same on every machine and process
(it never uses Python's ``hash()``). For one column value:

* integers, dates, times, timestamps, booleans: the value as a signed 64-bit integer ``v`` →
  ``fmix64(v XOR SEED)``;
* floats: the IEEE-754 bits of the value as float64 (``-0.0`` → ``0.0``, every NaN → the canonical
  quiet NaN) → as above;
* decimals: the 128-bit unscaled value as two 64-bit halves ``lo, hi`` → ``fmix64(lo XOR fmix64(hi XOR SEED))``;
* strings (UTF-8) and binary: ``fmix64(len XOR SEED XOR Σ byte_i · K_i)`` where
  ``K_i = fmix64(i + 1) | 1`` and the sum wraps modulo 2^64.

A key of several columns combines the column hashes left to right: ``h = fmix64(h · 31 + h_col)``
starting from ``h = SEED``. The bucket is ``h mod bucket_count`` (``h`` read as unsigned).
``fmix64`` is MurmurHash3's 64-bit finalizer. Everything is computed with numpy over whole arrays.

Example:
    >>> import pyarrow as pa
    >>> bucket_of([pa.array([1, 2, 3, 4]), pa.array(["a", "b", "c", "d"])], 4).tolist()
    [2, 1, 1, 1]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import SchemaError

SEED = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xFF51AFD7ED558CCD)
_C2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)
_MUL = np.uint64(31)


def fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's fmix64 finalizer over a uint64 array (wrapping arithmetic).

    Args:
        h: a uint64 array.

    Returns:
        The mixed values, a new uint64 array.

    Example:
        >>> fmix64(np.array([0, 1], dtype=np.uint64)).tolist()
        [0, 12994781566227106604]
    """
    h = h ^ (h >> _S33)  # a new array; the rest works in place on it (a third fewer temporaries)
    h *= _C1
    shifted = h >> _S33
    h ^= shifted
    h *= _C2
    np.right_shift(h, _S33, out=shifted)
    h ^= shifted
    return h


def _as_chunk(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
    return values


def hash_column(values: pa.Array | pa.ChunkedArray, column: str = "?") -> np.ndarray:
    """The uint64 hash of every value of one key column (see the module docstring for the definition).

    Args:
        values: the column; integers of every width, dates, times and timestamps hash alike for equal
            integer values, and ``string``/``large_string`` alike for equal text.
        column: the column's name, for errors.

    Returns:
        A uint64 array, one hash per value.

    Raises:
        SchemaError: the column holds a NULL or has a type that cannot be a key (names ``column``).

    Example:
        >>> a = hash_column(pa.array([1, 2], pa.int32()))
        >>> bool((a == hash_column(pa.array([1, 2], pa.int64()))).all())
        True
        >>> h = hash_column(pa.array([0.0, -0.0]))
        >>> bool(h[0] == h[1])
        True
        >>> hash_column(pa.array([1, None]), "id")
        Traceback (most recent call last):
        ...
        mergetable.core.errors.SchemaError: column 'id': key columns must not contain nulls
    """
    arr = _as_chunk(values)
    if arr.null_count:
        raise SchemaError("key columns must not contain nulls", column)
    t = arr.type
    with np.errstate(over="ignore"):
        if pa.types.is_dictionary(t):
            return hash_column(arr.dictionary_decode(), column)
        if pa.types.is_boolean(t):
            ints = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)
            return fmix64(ints.view(np.uint64) ^ SEED)
        if pa.types.is_integer(t) or pa.types.is_temporal(t):
            storage = pc.cast(arr, pa.int64()) if pa.types.is_integer(t) else arr.view(_int_storage(t))
            ints = np.asarray(storage.to_numpy(zero_copy_only=False), dtype=np.int64)
            return fmix64(ints.view(np.uint64) ^ SEED)
        if pa.types.is_floating(t):
            f = np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.float64) + 0.0  # -0.0 -> 0.0
            f = np.where(np.isnan(f), np.float64("nan"), f)
            return fmix64(f.view(np.uint64) ^ SEED)
        if pa.types.is_decimal(t):
            if not pa.types.is_decimal128(t):
                arr = pc.cast(arr, pa.decimal128(min(t.precision, 38), t.scale))
            buf = np.frombuffer(arr.buffers()[1], dtype=np.uint64)
            pairs = buf[2 * arr.offset : 2 * (arr.offset + len(arr))].reshape(-1, 2)
            return fmix64(pairs[:, 0] ^ fmix64(pairs[:, 1] ^ SEED))
        if pa.types.is_string(t) or pa.types.is_binary(t) or pa.types.is_large_string(t) or pa.types.is_large_binary(t):
            return _hash_varlen(arr)
        if pa.types.is_fixed_size_binary(t):
            return _hash_varlen(pc.cast(arr, pa.binary()))
    raise SchemaError(f"type {t} cannot be hashed as a key", column)


def _int_storage(t: pa.DataType) -> pa.DataType:
    return pa.int32() if t.bit_width == 32 else pa.int64()


def _hash_varlen(arr: pa.Array) -> np.ndarray:
    if pa.types.is_string(arr.type):
        arr = arr.view(pa.binary())
    elif pa.types.is_large_string(arr.type):
        arr = arr.view(pa.large_binary())
    offset_dtype = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    n = len(arr)
    offsets = np.frombuffer(arr.buffers()[1], dtype=offset_dtype)[arr.offset : arr.offset + n + 1].astype(np.int64)
    data_buf = arr.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    start, end = offsets[0], offsets[-1]
    data = data[start:end].astype(np.uint64)
    rel = offsets - start
    lengths = np.diff(rel)
    sums = np.zeros(n, dtype=np.uint64)
    if data.size:
        nonempty = lengths > 0
        ne_starts, ne_lengths = rel[:-1][nonempty], lengths[nonempty]
        step = np.ones(data.size, dtype=np.int64)
        step[ne_starts[1:]] = 1 - ne_lengths[:-1]
        step[0] = 1
        pos = np.cumsum(step) - 1  # position of each byte inside its value
        table = fmix64(np.arange(1, int(lengths.max()) + 1, dtype=np.uint64)) | np.uint64(1)
        weighted = data * table[pos]
        sums[nonempty] = np.add.reduceat(weighted, ne_starts)
    return fmix64(lengths.astype(np.uint64) ^ SEED ^ sums)


def hash_keys(columns: Sequence[pa.Array | pa.ChunkedArray], names: Sequence[str] = ()) -> np.ndarray:
    """The combined uint64 hash of every row of several key columns: ``h = fmix64(h · 31 + h_col)``.

    Args:
        columns: the key columns, in key order, all of one length.
        names: their names, for errors.

    Returns:
        A uint64 array, one hash per row.

    Raises:
        SchemaError: no column, or a column :func:`hash_column` rejects.

    Example:
        >>> keys = [pa.array([1, 1]), pa.array(["x", "y"])]
        >>> h = hash_keys(keys, ["id", "name"])
        >>> h.dtype.name, bool(h[0] != h[1])
        ('uint64', True)
    """
    if not columns:
        raise SchemaError("cannot hash an empty key")
    h = np.full(len(columns[0]), SEED, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for i, col in enumerate(columns):
            h = fmix64(h * _MUL + hash_column(col, names[i] if i < len(names) else "?"))
    return h


def bucket_of(columns: Sequence[pa.Array | pa.ChunkedArray], num_buckets: int, names: Sequence[str] = ()) -> np.ndarray:
    """The bucket of every row: its key hash modulo ``num_buckets``.

    Args:
        columns: the bucket-key columns, in key order.
        num_buckets: the table's bucket count (``bucket``); with 1, every row is in bucket 0.
        names: the columns' names, for errors.

    Returns:
        An int32 array, one bucket number per row.

    Example:
        >>> bucket_of([pa.array([1, 2, 3, 4, 5, 6, 7, 8])], 3).tolist()
        [0, 1, 1, 2, 2, 1, 1, 0]
        >>> bucket_of([pa.array([10, 11])], 1).tolist()
        [0, 0]
    """
    if num_buckets == 1:
        return np.zeros(len(columns[0]) if columns else 0, dtype=np.int32)
    return (hash_keys(columns, names) % np.uint64(num_buckets)).astype(np.int32)
