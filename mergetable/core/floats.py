"""A total order on FLOAT and DOUBLE keys, as Java's ``Double.compare``: ``-0.0 < 0.0``, NaN greatest,
NaN equal to NaN (every NaN bit pattern is the same key).

Keys are compared through :func:`order_keys`, an int64 per value whose integer order is that total order,
so sorting, grouping, key ranges and statistics of float keys are integer operations. Statistics store
the non-finite values as the JSON strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_CANONICAL_NAN = np.array([np.nan], dtype=np.float64).view(np.int64)[0]
_LOW_BITS = np.int64(0x7FFF_FFFF_FFFF_FFFF)
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def order_keys(values: np.ndarray) -> np.ndarray:
    """int64 keys ordering ``values`` (any float array) as ``Double.compare`` does."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64).copy()
    bits[np.isnan(values)] = _CANONICAL_NAN
    negative = bits < 0
    bits[negative] ^= _LOW_BITS
    return bits


def order_key(value: float) -> int:
    """The :func:`order_keys` key of one value."""
    return int(order_keys(np.array([value], dtype=np.float64))[0])


def from_order_key(key: int) -> float:
    """The float whose :func:`order_key` is ``key`` (NaN for the NaN key)."""
    bits = np.array([key], dtype=np.int64)
    if bits[0] < 0:
        bits ^= _LOW_BITS
    return float(bits.view(np.float64)[0])


def collapse_zero(key: int) -> int:
    """``-0.0``'s key as ``0.0``'s: for filters, where ``-0.0 = 0.0`` (IEEE and Spark SQL alike)."""
    return 0 if key == -1 else key


def encode_float(value: float) -> float | str:
    """JSON form of a float statistic: NaN and infinities as strings, everything else as is."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def decode_float(value: Any) -> float:
    """The float of a JSON statistic written by :func:`encode_float` (or a plain number)."""
    if isinstance(value, str):
        if value in _NON_FINITE:
            return _NON_FINITE[value]
        return float(value)
    return float(value)
