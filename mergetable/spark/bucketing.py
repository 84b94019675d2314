"""The bucket of every row of a DataFrame, for the shuffle of :func:`mergetable.spark.write`.

A row's bucket is defined by :func:`mergetable.core.hashing.bucket_of`. :func:`with_bucket` adds it as a column,
computed by Spark itself where the key columns allow: for integer, boolean, date and microsecond timestamp keys
the hash is a chain of Spark expressions equal to ``bucket_of`` bit for bit, so no Python worker runs before the
shuffle and Spark fuses the hash into the stage that reads the input. Other key types (strings, floats,
decimals, …) get one vectorised Arrow UDF that calls ``bucket_of``.

The Spark form carries each unsigned 64-bit word as two ``BIGINT`` halves of 32 bits and multiplies them by the
constants' halves read as signed 32-bit numbers, so no intermediate value reaches 2^63: exact under ANSI mode,
which forbids the wrapping ``BIGINT`` products the hash is made of. Each step is a projection of its own (the
halves are used several times per step, and one expression tree would repeat them exponentially); Spark's code
generation runs the chain as one loop, about 0.06 s of CPU per million rows for a ``BIGINT`` key (the Arrow UDF
took 0.2-0.3 s and a Python worker). Key columns are read as non-null (0 for null: the writing task refuses the
row), which keeps the generated code small enough for the JVM to compile.

:func:`with_bucket` is the one place that assigns buckets to Spark rows, :func:`with_channel` the one that assigns
a dynamic-bucket table's assigner channels (the same hash, its low 32 bits); :func:`bucket_task_key` maps bucket
and channel numbers to shuffle keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import arrow_udf

from mergetable.core.dynamic_buckets import key_hashes
from mergetable.core.hashing import SEED, bucket_of
from mergetable.core.schema import TableSchema

_C1 = 0xFF51AFD7ED558CCD
_C2 = 0xC4CEB9FE1A85EC53
_MUL = 31
_M16 = 0xFFFF
_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_HI, _LO, _ACC_HI, _ACC_LO = "__mt_hash_hi", "__mt_hash_lo", "__mt_hash_acc_hi", "__mt_hash_acc_lo"

Word = tuple[Column, Column]
"""An unsigned 64-bit value as its (high, low) 32-bit halves, each a non-negative ``BIGINT``."""


def with_bucket(df: DataFrame, schema: TableSchema, name: str) -> DataFrame:
    """``df`` with an ``INT`` column ``name`` holding each row's bucket in the table of ``schema``.

    Equal to ``bucket_of`` over the table's bucket-key columns (cast to the table's types); computed by Spark's own
    expressions when :func:`spark_hashable` holds for every key column, else by one Arrow UDF.

    Example:
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64())]), ["id"], options={"bucket": "4"})
        >>> with_bucket(spark.range(3), schema, "b").collect()  # doctest: +SKIP
        [Row(id=0, b=...), Row(id=1, b=...), Row(id=2, b=...)]
    """
    keys = list(schema.bucket_keys)
    buckets = max(1, schema.table_options.bucket)
    types = [schema.arrow_type(k) for k in keys]
    spark_types = {f.name.lower(): f.dataType for f in df.schema.fields}
    if all(spark_hashable(spark_types.get(k.lower()), t) for k, t in zip(keys, types, strict=True)):
        return _with_spark_bucket(df, [_as_long(F.col(k), spark_types[k.lower()]) for k in keys], buckets, name)
    return df.withColumn(name, _bucket_udf(keys, types, buckets)(*[F.col(k) for k in keys]))


def spark_hashable(spark_type: T.DataType | None, arrow_type: pa.DataType) -> bool:
    """Whether a key column of ``spark_type`` written to a table column of ``arrow_type`` hashes in Spark.

    The hash of these is the hash of one 64-bit integer that Spark can read from the column exactly: integers
    (any width: they hash alike), booleans, dates (days) and timestamps with a time zone (microseconds, for a
    table column in microseconds).

    Example:
        >>> spark_hashable(T.IntegerType(), pa.int64()), spark_hashable(T.StringType(), pa.string())
        (True, False)
    """
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if isinstance(spark_type, integral):
        return pa.types.is_integer(arrow_type)
    if isinstance(spark_type, T.BooleanType):
        return pa.types.is_boolean(arrow_type)
    if isinstance(spark_type, T.DateType):
        return pa.types.is_date32(arrow_type)
    if isinstance(spark_type, T.TimestampType):
        return pa.types.is_timestamp(arrow_type) and arrow_type.unit == "us" and arrow_type.tz is not None
    return False


def _as_long(col: Column, spark_type: T.DataType) -> Column:
    """The 64-bit integer ``hash_column`` hashes for a value of ``col``; a null key reads as 0.

    Null keys are refused by the task that writes them (a primary-key column, or a bucket key that
    ``bucket_of`` rejects), so their bucket does not matter; a non-nullable input keeps the generated code
    free of null checks, small enough for the JVM to compile.
    """
    if isinstance(spark_type, T.DateType):
        value = F.unix_date(col).cast("bigint")
    elif isinstance(spark_type, T.TimestampType):
        value = F.unix_micros(col)
    else:
        value = col.cast("bigint")
    return F.coalesce(value, F.lit(0).cast("bigint"))


def _with_spark_hash(df: DataFrame, keys: list[Column]) -> DataFrame:
    """``df`` with ``hash_keys`` of ``keys`` as the working word's two halves (see the module docstring)."""
    acc_const: int | None = int(SEED)  # the key hash so far, while it is still a constant
    out = df
    for i, key in enumerate(keys):
        out = out.withColumns({_HI: F.shiftrightunsigned(key, 32), _LO: key.bitwiseAND(F.lit(_M32))})
        out = _fmix64(_step(out, _xor(_word(), int(SEED))))
        if acc_const is not None:  # h = fmix64(SEED * 31 + h_col)
            out = _step(out, _add(_word(), _const((acc_const * _MUL) & _M64)))
        else:  # h = fmix64(h * 31 + h_col)
            out = _step(out, _add(_mul(_word(_ACC_HI, _ACC_LO), _MUL), _word()))
        out = _fmix64(out)
        acc_const = None
        if i + 1 < len(keys):
            out = out.withColumns({_ACC_HI: F.col(_HI), _ACC_LO: F.col(_LO)})
    return out


def _with_spark_bucket(df: DataFrame, keys: list[Column], buckets: int, name: str) -> DataFrame:
    """``hash_keys`` of ``keys`` modulo ``buckets`` as projections over ``df``."""
    out = _with_spark_hash(df, keys)
    hi, lo = _word()
    # (hi * 2^32 + lo) mod n = ((hi mod n) * (2^32 mod n) + lo) mod n, every term below 2^63 for n < 2^31
    bucket = ((hi % F.lit(buckets)) * F.lit((1 << 32) % buckets) + lo) % F.lit(buckets)
    return out.withColumn(name, bucket.cast("int")).drop(_HI, _LO, _ACC_HI, _ACC_LO)


def with_channel(df: DataFrame, schema: TableSchema, name: str, channels: int) -> DataFrame:
    """``df`` with an ``INT`` column ``name`` holding each row's assigner channel in the dynamic-bucket table of
    ``schema``: its :func:`~mergetable.core.dynamic_buckets.key_hashes` (the low 32 bits of ``hash_keys`` over
    the trimmed primary key) read as unsigned, modulo ``channels`` (:mod:`mergetable.spark.dynamic`).

    Computed by Spark's own expressions when :func:`spark_hashable` holds for every key column (the low half
    of the working word is those 32 bits), else by one Arrow UDF.

    Example:
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64())]), ["id"])
        >>> with_channel(spark.range(3), schema, "c", 2).collect()  # doctest: +SKIP
        [Row(id=0, c=...), Row(id=1, c=...), Row(id=2, c=...)]
    """
    keys = list(schema.trimmed_primary_keys)
    types = [schema.arrow_type(k) for k in keys]
    spark_types = {f.name.lower(): f.dataType for f in df.schema.fields}
    if all(spark_hashable(spark_types.get(k.lower()), t) for k, t in zip(keys, types, strict=True)):
        out = _with_spark_hash(df, [_as_long(F.col(k), spark_types[k.lower()]) for k in keys])
        channel = (F.col(_LO) % F.lit(channels)).cast("int")
        return out.withColumn(name, channel).drop(_HI, _LO, _ACC_HI, _ACC_LO)
    return df.withColumn(name, _channel_udf(keys, types, channels)(*[F.col(k) for k in keys]))


def _channel_udf(keys: list[str], types: list[pa.DataType], channels: int) -> Any:
    """A pyarrow-only Arrow UDF computing the assigner channel of the key columns."""

    def channel(*cols: pa.Array) -> pa.Array:
        arrays = [c.cast(t) for c, t in zip(cols, types, strict=True)]
        hashes = key_hashes(arrays, keys).view(np.uint32)
        return pa.array((hashes % np.uint32(channels)).astype(np.int32), pa.int32())

    return arrow_udf(channel, "int")  # type: ignore[call-overload]  # the stubs omit type-hint inference


def _word(hi: str = _HI, lo: str = _LO) -> Word:
    return F.col(hi), F.col(lo)


def _const(value: int) -> Word:
    return F.lit((value >> 32) & _M32), F.lit(value & _M32)


def _step(df: DataFrame, word: Word) -> DataFrame:
    """``df`` with the working word replaced by ``word`` (one projection)."""
    return df.withColumns({_HI: word[0], _LO: word[1]})


def _fmix64(df: DataFrame) -> DataFrame:
    """MurmurHash3's finalizer of the working word: ``h ^= h >> 33; h *= C1; h ^= h >> 33; h *= C2; h ^= h >> 33``."""
    for constant in (_C1, _C2):
        df = _step(df, _xorshift33(_word()))
        df = _step(df, _mul(_word(), constant))
    return _step(df, _xorshift33(_word()))


def _xor(w: Word, value: int) -> Word:
    return w[0].bitwiseXOR(F.lit((value >> 32) & _M32)), w[1].bitwiseXOR(F.lit(value & _M32))


def _xorshift33(w: Word) -> Word:
    hi, lo = w
    return hi, lo.bitwiseXOR(F.shiftrightunsigned(hi, 1))


def _add(a: Word, b: Word) -> Word:
    """``a + b`` modulo 2^64."""
    low = a[1] + b[1]
    return (a[0] + b[0] + F.shiftrightunsigned(low, 32)).bitwiseAND(F.lit(_M32)), low.bitwiseAND(F.lit(_M32))


def _mul(w: Word, constant: int) -> Word:
    """``w * constant`` modulo 2^64 in three products, each below 2^63 in magnitude.

    With the constant's halves read as signed 32-bit numbers (``c = c' + 2^32`` when ``c >= 2^31``),
    ``lo * c_lo'`` is exact in a ``BIGINT``: its low 32 bits are the result's low half, and its arithmetic
    shift by 32 carries into the high half together with ``lo`` (when ``c_lo`` was shifted) and the low 32 bits
    of ``hi * c_lo'`` and ``lo * c_hi'`` (congruent to ``hi * c_lo`` and ``lo * c_hi`` modulo 2^32).
    """
    hi, lo = w
    c_hi, c_lo = _signed32((constant >> 32) & _M32), _signed32(constant & _M32)
    product = lo * F.lit(c_lo)
    high = F.shiftright(product, 32) + _low32(hi, c_lo) + _low32(lo, c_hi)
    if c_lo < 0:
        high = high + lo
    return high.bitwiseAND(F.lit(_M32)), product.bitwiseAND(F.lit(_M32))


def _signed32(half: int) -> int:
    return half - (1 << 32) if half >= 1 << 31 else half


def _low32(x: Column, c: int) -> Column:
    """``x * c`` modulo 2^32 (``x`` below 2^32, ``c`` a signed 32-bit number)."""
    return (x * F.lit(c)).bitwiseAND(F.lit(_M32)) if c else F.lit(0)


def _bucket_udf(keys: list[str], types: list[pa.DataType], buckets: int) -> Any:
    """A pyarrow-only Arrow UDF computing mergetable's bucket of the key columns (no pandas needed)."""

    def bucket(*cols: pa.Array) -> pa.Array:
        arrays = [c.cast(t) for c, t in zip(cols, types, strict=True)]
        return pa.array(bucket_of(arrays, buckets, keys), pa.int32())

    return arrow_udf(bucket, "int")  # type: ignore[call-overload]  # the stubs omit type-hint inference


def unused_name(name: str, columns: Sequence[str]) -> str:
    """``name``, or ``name_1``, ``name_2`` … when ``columns`` already hold it (in any case): the name of a column
    added for a shuffle and dropped before the write.

    >>> unused_name("_b", ["id", "_B"])
    '_b_1'
    """
    taken = {c.lower() for c in columns}
    i = 0
    while (candidate := name if i == 0 else f"{name}_{i}").lower() in taken:
        i += 1
    return candidate


_TASK_KEYS: dict[tuple[int, int], list[int]] = {}


def bucket_task_key(spark: SparkSession, bucket: Column, buckets: int, tasks: int) -> Column:
    """A column that Spark's ``repartition(tasks, ...)`` sends to task ``bucket % tasks``.

    Hash partitioning takes Murmur3 of its columns modulo the task count, so bucket numbers themselves collide:
    with 2 tasks, buckets 0 and 1 both land in task 1, and one task writes the whole table. Instead each bucket
    is mapped to an int that Spark hashes into the wanted task, found with Spark's own ``hash`` (one small query
    per bucket and task count in a process, so it holds for the running Spark version).

    Example:
        >>> key = bucket_task_key(spark, F.col("bucket"), 4, 2)  # doctest: +SKIP
        >>> df.repartition(2, key)  # doctest: +SKIP
    """
    if (buckets, tasks) not in _TASK_KEYS:
        wanted = min(buckets, tasks)
        found: dict[int, int] = {}
        candidates = 16 * wanted + 64
        while len(found) < wanted:
            probe = spark.range(candidates).selectExpr(
                "CAST(id AS INT) AS v", f"pmod(hash(CAST(id AS INT)), {tasks}) AS t"
            )
            for row in probe.where(f"t < {wanted}").collect():
                found.setdefault(row.t, row.v)
            candidates *= 4
        _TASK_KEYS[(buckets, tasks)] = [found[b % tasks] for b in range(buckets)]
    values = F.array(*[F.lit(v) for v in _TASK_KEYS[(buckets, tasks)]])
    return F.element_at(values, bucket + 1)


__all__ = ["bucket_task_key", "spark_hashable", "unused_name", "with_bucket", "with_channel"]
