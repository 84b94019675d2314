"""Spark SQL functions for bitmaps and sketches: vectorized (Arrow) UDFs over :mod:`mergetable.functions`.

One call registers them all::

    from mergetable.spark.functions import register_functions
    register_functions(spark)
    spark.sql("SELECT TO_BITMAP(100, 101, 102)")

=====================================  ==========================================================
Function                               Meaning
=====================================  ==========================================================
``TO_BITMAP(v, …)``                    serialized 32-bit RoaringBitmap (``rbm32``) of the arguments
``TO_BITMAP64(v, …)``                  serialized 64-bit RoaringBitmap (``rbm64``)
``FROM_BITMAP(b)``, ``BITMAP_COUNT(b)``  cardinality (0 for NULL)
``BITMAP_CONTAINS(b, v)``              membership (``false`` for NULL)
``BITMAP_VALUES(b)``                   the integers, ascending
``BITMAP_OR(b, …)``                    union
``BITMAP64_COUNT``, ``BITMAP64_CONTAINS``, ``BITMAP64_VALUES``, ``BITMAP64_OR``  the same for ``rbm64``
``HLL_SKETCH(v, …)``                   compact HLL_4 sketch (``hll_sketch``) of the arguments
``HLL_SKETCH_COUNT(s)``                distinct-count estimate (0 for NULL)
``HLL_SKETCH_UNION(s, …)``             union
``THETA_SKETCH(v, …)``                 compact Theta sketch (``theta_sketch``)
``THETA_SKETCH_COUNT(s)``              estimate
``THETA_SKETCH_UNION(s, …)``           union
=====================================  ==========================================================

Spark's own ``bitmap_count`` (popcount of its bitmap format) takes precedence over ``BITMAP_COUNT`` in
SQL: count mergetable bitmaps with ``FROM_BITMAP``. Arguments that are arrays are flattened, so
``TO_BITMAP(collect_list(page))`` also works. pyspark is imported only when :func:`register_functions`
runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from mergetable import functions as fn


def _rows(cols: tuple[pa.Array, ...]) -> list[tuple[Any, ...]]:
    """The UDF's argument columns as Python tuples, one per row."""
    if not cols:
        return []
    columns = [c.to_pylist() for c in cols]
    return list(zip(*columns, strict=True))


def _map(cols: tuple[pa.Array, ...], f: Callable[..., Any], out: pa.DataType) -> pa.Array:
    return pa.array([f(*row) for row in _rows(cols)], type=out)


def _builders() -> dict[str, tuple[str, Callable[..., pa.Array]]]:
    """SQL name → (Spark return type, Arrow implementation over the argument arrays)."""
    binary, long_, double, boolean = pa.binary(), pa.int64(), pa.float64(), pa.bool_()
    longs = pa.list_(pa.int64())
    return {
        "TO_BITMAP": ("binary", lambda *c: _map(c, fn.to_bitmap, binary)),
        "TO_BITMAP64": ("binary", lambda *c: _map(c, fn.to_bitmap64, binary)),
        "FROM_BITMAP": ("bigint", lambda b: _map((b,), fn.bitmap_cardinality, long_)),
        "BITMAP_COUNT": ("bigint", lambda b: _map((b,), fn.bitmap_cardinality, long_)),
        "BITMAP_CONTAINS": ("boolean", lambda b, v: _map((b, v), fn.bitmap_contains, boolean)),
        "BITMAP_VALUES": ("array<bigint>", lambda b: _map((b,), fn.bitmap_values, longs)),
        "BITMAP_OR": ("binary", lambda *c: _map(c, fn.bitmap_or, binary)),
        "BITMAP64_COUNT": ("bigint", lambda b: _map((b,), lambda x: fn.bitmap_cardinality(x, 64), long_)),
        "BITMAP64_CONTAINS": ("boolean", lambda b, v: _map((b, v), lambda x, y: fn.bitmap_contains(x, y, 64), boolean)),
        "BITMAP64_VALUES": ("array<bigint>", lambda b: _map((b,), lambda x: _signed(fn.bitmap_values(x, 64)), longs)),
        "BITMAP64_OR": ("binary", lambda *c: _map(c, lambda *x: fn.bitmap_or(*x, bits=64), binary)),
        "HLL_SKETCH": ("binary", lambda *c: _map(c, fn.hll_sketch, binary)),
        "HLL_SKETCH_COUNT": ("double", lambda s: _map((s,), fn.hll_estimate, double)),
        "HLL_SKETCH_UNION": ("binary", lambda *c: _map(c, fn.hll_union, binary)),
        "THETA_SKETCH": ("binary", lambda *c: _map(c, fn.theta_sketch, binary)),
        "THETA_SKETCH_COUNT": ("double", lambda s: _map((s,), fn.theta_estimate, double)),
        "THETA_SKETCH_UNION": ("binary", lambda *c: _map(c, fn.theta_union, binary)),
    }


def _signed(values: list[int]) -> list[int]:
    return [v - (1 << 64) if v >= (1 << 63) else v for v in values]


def function_names() -> list[str]:
    """The SQL names :func:`register_functions` registers, in registration order.

    Returns:
        The upper-case function names.

    Example:
        >>> names = function_names()
        >>> names[:3], "HLL_SKETCH_COUNT" in names, len(names)
        (['TO_BITMAP', 'TO_BITMAP64', 'FROM_BITMAP'], True, 17)
    """
    return list(_builders())


def register_functions(spark: Any) -> list[str]:
    """Register every bitmap and sketch function as an Arrow UDF of the session ``spark``.

    Each is a vectorized UDF over the functions of :mod:`mergetable.functions`, so values built in
    Spark SQL and in Python are the same bytes.

    Args:
        spark: a ``SparkSession`` (pyspark 4.1 or newer, for ``arrow_udf``).

    Returns:
        The registered names (:func:`function_names`).

    Example:
        >>> from mergetable.functions import to_bitmap
        >>> register_functions(spark)  # doctest: +SKIP
        ['TO_BITMAP', 'TO_BITMAP64', ...]
        >>> spark.sql("SELECT TO_BITMAP(1, 2, 3) AS b").first().b == to_bitmap(1, 2, 3)  # doctest: +SKIP
        True
        >>> spark.sql("SELECT FROM_BITMAP(BITMAP_OR(TO_BITMAP(1, 2), TO_BITMAP(2, 5)))").first()[0]  # doctest: +SKIP
        3
    """
    from pyspark.sql.functions import arrow_udf  # type: ignore[attr-defined]  # pyspark >= 4.1, not in its stubs

    names = []
    for name, (return_type, impl) in _builders().items():
        spark.udf.register(name, arrow_udf(impl, returnType=return_type))
        names.append(name)
    return names


__all__ = ["function_names", "register_functions"]
