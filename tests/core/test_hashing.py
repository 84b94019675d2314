from __future__ import annotations

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

from mergetable.core.errors import SchemaError
from mergetable.core.hashing import bucket_of, hash_column, hash_keys

# Pinned values: the bucket function is part of the on-disk format and must never change.
PINNED = {
    "int": (pa.array([1, 2, 3], pa.int64()), [2717770620714153248, 17939916851854735301, 16572613472718614229]),
    "str": (pa.array(["a", "bc", ""]), [4805756985493693188, 4648823408576320768, 11286133854226296554]),
}


def test_pinned_values_are_stable() -> None:
    for arr, expected in PINNED.values():
        assert hash_column(arr).tolist() == expected


def test_integer_widths_hash_alike() -> None:
    for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64()):
        assert hash_column(pa.array([1, 2, 3], t)).tolist() == PINNED["int"][1]


def test_slices_and_chunks_hash_like_fresh_arrays() -> None:
    values = [f"key-{i}" for i in range(1000)]
    arr = pa.array(values)
    assert (hash_column(arr.slice(100, 50)) == hash_column(pa.array(values[100:150]))).all()
    chunked = pa.chunked_array([values[:400], values[400:]])
    assert (hash_column(chunked) == hash_column(arr)).all()
    dec = pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25")], pa.decimal128(10, 2))
    assert hash_column(dec.slice(1)).tolist() == hash_column(dec)[1:].tolist()


def test_every_key_type_hashes() -> None:
    arrays = [
        pa.array([True, False]),
        pa.array([1.5, -0.0]),
        pa.array([b"x", b""]),
        pa.array([datetime.date(2024, 1, 1), datetime.date(1970, 1, 1)]),
        pa.array([datetime.datetime(2024, 1, 1, 12), datetime.datetime(1999, 1, 1)], pa.timestamp("us")),
        pa.array([decimal.Decimal("1.5"), decimal.Decimal("2")], pa.decimal128(5, 1)),
        pa.array([b"abcd", b"efgh"], pa.binary(4)),
    ]
    for arr in arrays:
        h = hash_column(arr)
        assert h.dtype == np.uint64 and len(h) == 2


def test_float_zero_and_nan_are_canonical() -> None:
    h = hash_column(pa.array([0.0, -0.0, float("nan"), float("nan")]))
    assert h[0] == h[1] and h[2] == h[3]


def test_null_key_rejected() -> None:
    with pytest.raises(SchemaError, match="k"):
        hash_column(pa.array([1, None]), "k")


def test_buckets_are_balanced_and_in_range() -> None:
    keys = pa.array(np.arange(100_000))
    b = bucket_of([keys], 8)
    counts = np.bincount(b, minlength=8)
    assert b.min() >= 0 and b.max() < 8
    assert counts.min() > 0.9 * 100_000 / 8


def test_multi_column_key_order_matters() -> None:
    a, b = pa.array([1, 2]), pa.array([2, 1])
    h1 = hash_keys([a, b])
    h2 = hash_keys([b, a])
    assert h1[0] == h2[1] and h1[0] != h1[1]
