"""Helper functions for the bitmap and sketch aggregate functions (``rbm32``, ``rbm64``, ``hll_sketch``,
``theta_sketch``).

They build the serialized values those functions merge, and read them back. The same functions are
available to Spark SQL as vectorized UDFs through :func:`mergetable.spark.functions.register_functions`.

Example:
    >>> from mergetable.functions import to_bitmap, bitmap_cardinality, bitmap_contains, bitmap_or
    >>> visits = bitmap_or(to_bitmap(100, 101, 102), to_bitmap(103, 105))
    >>> bitmap_cardinality(visits), bitmap_contains(visits, 103), bitmap_contains(visits, 104)
    (5, True, False)
    >>> from mergetable.functions import hll_sketch, hll_estimate, hll_union
    >>> round(hll_estimate(hll_union(hll_sketch("a", "b"), hll_sketch("b", "c"))))
    3

NULL inputs are skipped when building (BYTES values are hashed as their UTF-8 text, or as hex when they
are not valid UTF-8); reading a NULL bitmap or sketch gives 0 (cardinality, estimate)
or ``False`` (contains), as in Paimon's documented UDFs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import datasketches
from pyroaring import BitMap, BitMap64

DEFAULT_HLL_LG_K = 12
"""``lgConfigK`` of sketches built by :func:`hll_sketch` (Java ``new HllSketch()``)."""


def _flatten(values: Iterable[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if v is None:
            continue
        if isinstance(v, list | tuple | set | frozenset):
            out.extend(x for x in v if x is not None)
        else:
            out.append(v)
    return out


def _uint32(value: int) -> int:
    if not -(1 << 31) <= value < (1 << 32):
        raise ValueError(f"{value} does not fit a 32-bit bitmap (use to_bitmap64)")
    return value & 0xFFFFFFFF


def _uint64(value: int) -> int:
    if not -(1 << 63) <= value < (1 << 64):
        raise ValueError(f"{value} does not fit a 64-bit bitmap")
    return value & 0xFFFFFFFFFFFFFFFF


# -- roaring bitmaps --------------------------------------------------------------------------------
def to_bitmap(*values: int | Iterable[int] | None) -> bytes:
    """A serialized 32-bit RoaringBitmap (``rbm32``) of the given integers.

    Negative 32-bit integers are stored as their unsigned value, like Java's ``RoaringBitmap``.

    Args:
        *values: integers, lists (or tuples, sets) of integers, which are flattened, and NULLs, which are
            skipped.

    Returns:
        The portable serialization, the value an ``rbm32`` column holds.

    Raises:
        ValueError: a value does not fit 32 bits.

    Example:
        >>> bitmap_values(to_bitmap(3, [1, None, 2], None, 3))
        [1, 2, 3]
        >>> bitmap_values(to_bitmap(-1))
        [4294967295]
        >>> to_bitmap(1 << 32)
        Traceback (most recent call last):
        ...
        ValueError: 4294967296 does not fit a 32-bit bitmap (use to_bitmap64)
    """
    return bytes(BitMap(_uint32(int(v)) for v in _flatten(values)).serialize())


def to_bitmap64(*values: int | Iterable[int] | None) -> bytes:
    """A serialized 64-bit RoaringBitmap (``rbm64``) of the given integers.

    Args:
        *values: integers, lists of integers (flattened) and NULLs (skipped).

    Returns:
        The portable serialization, the value an ``rbm64`` column holds.

    Raises:
        ValueError: a value does not fit 64 bits.

    Example:
        >>> bitmap_values(to_bitmap64(1, [1 << 40]), bits=64)
        [1, 1099511627776]
    """
    return bytes(BitMap64(_uint64(int(v)) for v in _flatten(values)).serialize())


def _bitmap(data: bytes, bits: int) -> Any:
    kind = BitMap64 if bits == 64 else BitMap
    try:
        return kind.deserialize(bytes(data))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a serialized {bits}-bit RoaringBitmap: {exc}") from None


def bitmap_cardinality(data: bytes | None, bits: int = 32) -> int:
    """Number of integers in a serialized bitmap.

    Args:
        data: a serialized bitmap, or ``None``.
        bits: 32 for ``rbm32`` values, 64 for ``rbm64`` ones.

    Returns:
        The number of integers; 0 for ``None``.

    Raises:
        ValueError: ``data`` is not a serialized bitmap of that width.

    Example:
        >>> bitmap_cardinality(to_bitmap(7, 8, 8)), bitmap_cardinality(None)
        (2, 0)
        >>> bitmap_cardinality(to_bitmap64(1 << 40), bits=64)
        1
    """
    return 0 if data is None else len(_bitmap(data, bits))


def bitmap_contains(data: bytes | None, value: int | None, bits: int = 32) -> bool:
    """Whether a serialized bitmap contains ``value``.

    Args:
        data: a serialized bitmap, or ``None``.
        value: the integer to look for (a negative one as its unsigned value), or ``None``.
        bits: 32 for ``rbm32`` values, 64 for ``rbm64`` ones.

    Returns:
        ``True`` when it does; ``False`` when either input is ``None``.

    Example:
        >>> bitmap = to_bitmap(1, 5, -1)
        >>> bitmap_contains(bitmap, 5), bitmap_contains(bitmap, 2), bitmap_contains(bitmap, -1)
        (True, False, True)
        >>> bitmap_contains(None, 5)
        False
    """
    if data is None or value is None:
        return False
    value = _uint64(value) if bits == 64 else _uint32(value)
    return value in _bitmap(data, bits)


def bitmap_values(data: bytes | None, bits: int = 32) -> list[int]:
    """The integers of a serialized bitmap.

    Args:
        data: a serialized bitmap, or ``None``.
        bits: 32 for ``rbm32`` values, 64 for ``rbm64`` ones.

    Returns:
        The integers in ascending (unsigned) order; empty for ``None``.

    Example:
        >>> bitmap_values(to_bitmap(9, 2, 4))
        [2, 4, 9]
        >>> bitmap_values(None)
        []
    """
    return [] if data is None else list(_bitmap(data, bits))


def bitmap_or(*bitmaps: bytes | None, bits: int = 32) -> bytes:
    """Union of serialized bitmaps: what the ``rbm32``/``rbm64`` aggregate functions compute.

    Args:
        *bitmaps: serialized bitmaps; ``None`` values are skipped.
        bits: 32 for ``rbm32`` values, 64 for ``rbm64`` ones.

    Returns:
        The serialized union (an empty bitmap when there is nothing to unite).

    Example:
        >>> bitmap_values(bitmap_or(to_bitmap(1, 2), None, to_bitmap(2, 5)))
        [1, 2, 5]
        >>> bitmap_values(bitmap_or())
        []
    """
    maps = [_bitmap(b, bits) for b in bitmaps if b is not None]
    kind = BitMap64 if bits == 64 else BitMap
    result = kind() if not maps else maps[0].union(*maps[1:])
    return bytes(result.serialize())


# -- HLL sketches -------------------------------------------------------------------------------------
def _update(sketch: Any, value: Any) -> None:
    if isinstance(value, bool):
        value = int(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            value = raw.decode("utf-8")  # hashes the same bytes as Java's update(byte[])
        except UnicodeDecodeError:
            value = raw.hex()
    elif not isinstance(value, int | float | str):
        value = str(value)
    sketch.update(value)


def _estimate(data: bytes | None, deserialize: Any, kind: str) -> float:
    if data is None:
        return 0.0
    try:
        return float(deserialize(bytes(data)).get_estimate())
    except (ValueError, RuntimeError, IndexError) as exc:  # a truncated value raises IndexError
        raise ValueError(f"not a serialized {kind}: {exc}") from None


def hll_sketch(*values: Any, lg_k: int = DEFAULT_HLL_LG_K) -> bytes:
    """A compact HLL_4 sketch of the given values: the value an ``hll_sketch`` column holds.

    Args:
        *values: integers, floats, strings, BYTES (hashed as their UTF-8 text), lists of those
            (flattened) and NULLs (skipped); anything else is hashed as its ``str``.
        lg_k: log2 of the sketch's bucket count (``lgConfigK``).

    Returns:
        The compact serialization of the sketch.

    Example:
        >>> round(hll_estimate(hll_sketch("a", "b", ["a", None], b"b")))
        2
    """
    sketch = datasketches.hll_sketch(lg_k, datasketches.tgt_hll_type.HLL_4)
    for v in _flatten(values):
        _update(sketch, v)
    return bytes(sketch.serialize_compact())


def hll_estimate(data: bytes | None) -> float:
    """Distinct-count estimate of a serialized HLL sketch.

    Args:
        data: a serialized HLL sketch, or ``None``.

    Returns:
        The estimate; 0.0 for ``None``.

    Raises:
        ValueError: ``data`` is not a serialized HLL sketch.

    Example:
        >>> round(hll_estimate(hll_sketch([1, 2, 3, 3]))), hll_estimate(None)
        (3, 0.0)
    """
    return _estimate(data, datasketches.hll_sketch.deserialize, "HLL sketch")


def hll_union(*sketches: bytes | None) -> bytes:
    """Union of serialized HLL sketches: what the ``hll_sketch`` aggregate function computes.

    Args:
        *sketches: serialized HLL sketches; ``None`` values are skipped.

    Returns:
        A compact HLL_4 sketch with the smallest ``lgConfigK`` of the inputs.

    Example:
        >>> round(hll_estimate(hll_union(hll_sketch("a", "b"), None, hll_sketch("b", "c"))))
        3
    """
    parts = [datasketches.hll_sketch.deserialize(bytes(s)) for s in sketches if s is not None]
    union = datasketches.hll_union(min((p.lg_config_k for p in parts), default=DEFAULT_HLL_LG_K))
    for part in parts:
        union.update(part)
    return bytes(union.get_result(datasketches.tgt_hll_type.HLL_4).serialize_compact())


# -- Theta sketches -----------------------------------------------------------------------------------
def theta_sketch(*values: Any) -> bytes:
    """A compact Theta sketch of the given values: the value a ``theta_sketch`` column holds.

    Args:
        *values: as for :func:`hll_sketch`; lists are flattened and NULLs skipped.

    Returns:
        The compact serialization of the sketch.

    Example:
        >>> round(theta_estimate(theta_sketch(["x", "y"], "z", None, "x")))
        3
    """
    sketch = datasketches.update_theta_sketch()
    for v in _flatten(values):
        _update(sketch, v)
    return bytes(sketch.compact().serialize())


def theta_estimate(data: bytes | None) -> float:
    """Distinct-count estimate of a serialized Theta sketch (0.0 for ``None``), as :func:`hll_estimate`.

    Raises:
        ValueError: ``data`` is not a serialized Theta sketch.

    Example:
        >>> round(theta_estimate(theta_sketch(1, 2))), theta_estimate(None)
        (2, 0.0)
    """
    return _estimate(data, datasketches.compact_theta_sketch.deserialize, "Theta sketch")


def theta_union(*sketches: bytes | None) -> bytes:
    """Union of serialized Theta sketches: what the ``theta_sketch`` aggregate function computes.

    Args:
        *sketches: serialized Theta sketches; ``None`` values are skipped.

    Returns:
        The compact serialization of the union.

    Example:
        >>> round(theta_estimate(theta_union(theta_sketch("a", "b"), None, theta_sketch("b", "c"))))
        3
    """
    union = datasketches.theta_union()
    for s in sketches:
        if s is not None:
            union.update(datasketches.compact_theta_sketch.deserialize(bytes(s)))
    return bytes(union.get_result().serialize())


__all__ = [
    "DEFAULT_HLL_LG_K",
    "bitmap_cardinality",
    "bitmap_contains",
    "bitmap_or",
    "bitmap_values",
    "hll_estimate",
    "hll_sketch",
    "hll_union",
    "theta_estimate",
    "theta_sketch",
    "theta_union",
    "to_bitmap",
    "to_bitmap64",
]
