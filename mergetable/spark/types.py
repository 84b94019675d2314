"""Spark ↔ Arrow schemas for the data source.

Reading: a table's Arrow schema becomes a Spark ``StructType`` (primary-key columns are ``NOT NULL``), and
every batch handed to Spark is cast to *exactly* the Arrow schema Spark derives from that struct
(``to_arrow_schema(schema, timezone="UTC")``), nullability and nested field names included; Spark rejects
anything else with ``DATA_SOURCE_RETURN_SCHEMA_MISMATCH``.

Writing: a DataFrame's Spark schema becomes the Arrow schema of a new table, and is checked against an
existing table's schema column by column before any task runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from mergetable.core.errors import SchemaError, UnsupportedError
from mergetable.core.schema import check_column, normalize_arrow_type

# -- Arrow (table) → Spark -------------------------------------------------------------------------------
_SIMPLE_TO_SPARK: dict[pa.DataType, T.DataType] = {
    pa.bool_(): T.BooleanType(),
    pa.int8(): T.ByteType(),
    pa.int16(): T.ShortType(),
    pa.int32(): T.IntegerType(),
    pa.int64(): T.LongType(),
    pa.float32(): T.FloatType(),
    pa.float64(): T.DoubleType(),
    pa.string(): T.StringType(),
    pa.binary(): T.BinaryType(),
    pa.date32(): T.DateType(),
}


def arrow_type_to_spark(t: pa.DataType, column: str = "?") -> T.DataType:
    """The Spark type a table column of Arrow type ``t`` is read as."""
    t = normalize_arrow_type(t)
    if t in _SIMPLE_TO_SPARK:
        return _SIMPLE_TO_SPARK[t]
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise UnsupportedError(f"column '{column}': {t} exceeds Spark's maximum decimal precision 38")
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_fixed_size_binary(t):
        return T.BinaryType()
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_time(t):
        return T.TimeType(6)
    if pa.types.is_list(t):
        return T.ArrayType(arrow_type_to_spark(t.value_type, column), t.value_field.nullable)
    if pa.types.is_map(t):
        return T.MapType(
            arrow_type_to_spark(t.key_type, column), arrow_type_to_spark(t.item_type, column), t.item_field.nullable
        )
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, arrow_type_to_spark(f.type, column), f.nullable) for f in t])
    raise UnsupportedError(f"column '{column}': Arrow type {t} cannot be read by Spark")


def spark_schema(schema: pa.Schema, columns: Sequence[str] | None = None) -> T.StructType:
    """The Spark schema of a table (or of some of its ``columns``), nullability kept."""
    names = list(columns) if columns is not None else schema.names
    fields = []
    for name in names:
        f = schema.field(check_column(name, schema.names))
        fields.append(T.StructField(f.name, arrow_type_to_spark(f.type, f.name), f.nullable))
    return T.StructType(fields)


def spark_arrow_schema(schema: T.StructType) -> pa.Schema:
    """The exact Arrow schema Spark expects from a Python data source reading ``schema``."""
    out: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return out


def conform_for_spark(table: pa.Table, target: pa.Schema) -> pa.Table:
    """Cast ``table`` (same column names, in order) to Spark's expected Arrow schema, nullability included."""
    if table.schema.equals(target):
        return table
    try:
        return table.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        for have, want in zip(table.schema, target, strict=True):
            if not have.type.equals(want.type):
                raise SchemaError(f"cannot read {have.type} as {want.type}: {exc}", have.name) from None
        raise


def spark_batches(table: pa.Table, target: pa.Schema, batch_size: int) -> Iterator[pa.RecordBatch]:
    """``table`` as Arrow batches for Spark: ``target``'s exact schema, at most ``batch_size`` rows each.

    Chunks of a reasonable size (Parquet row groups, merge windows) are handed over as they are, without a
    copy; only a table of many small chunks is combined first, so Spark is not sent a stream of tiny batches.
    """
    out = conform_for_spark(table, target)
    if out.num_columns and out.column(0).num_chunks > 1 and out.num_rows < out.column(0).num_chunks * batch_size // 8:
        out = out.combine_chunks()
    for batch in out.to_batches(max_chunksize=batch_size):
        if batch.num_rows:
            yield batch


# -- Spark (DataFrame) → Arrow ----------------------------------------------------------------------------
_UNSUPPORTED_SPARK = (
    T.NullType,
    T.CalendarIntervalType,
    T.DayTimeIntervalType,
    T.YearMonthIntervalType,
    T.VariantType,
    T.GeometryType,
    T.GeographyType,
)


def _check_spark_type(dt: T.DataType, column: str) -> None:
    if isinstance(dt, _UNSUPPORTED_SPARK):
        raise UnsupportedError(f"column '{column}': Spark type {dt.simpleString()} cannot be stored in a mergetable")
    if isinstance(dt, T.ArrayType):
        _check_spark_type(dt.elementType, column)
    elif isinstance(dt, T.MapType):
        _check_spark_type(dt.keyType, column)
        _check_spark_type(dt.valueType, column)
    elif isinstance(dt, T.StructType):
        for f in dt.fields:
            _check_spark_type(f.dataType, column)


def as_nullable(dt: T.DataType) -> T.DataType:
    """``dt`` with every field, element and map value nullable (Spark's ``asNullable``)."""
    if isinstance(dt, T.StructType):
        return T.StructType([T.StructField(f.name, as_nullable(f.dataType), True, f.metadata) for f in dt.fields])
    if isinstance(dt, T.ArrayType):
        return T.ArrayType(as_nullable(dt.elementType), True)
    if isinstance(dt, T.MapType):
        return T.MapType(as_nullable(dt.keyType), as_nullable(dt.valueType), True)
    return dt


def arrow_schema_of(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a new table created from a DataFrame with Spark schema ``schema``.

    Every column is nullable (the primary key becomes NOT NULL when the table is created): a DataFrame's
    nullability is incidental (a literal is NOT NULL), as Spark's file sources treat it. TIMESTAMP becomes
    ``TIMESTAMP(6) WITH LOCAL TIME ZONE`` and TIMESTAMP_NTZ becomes ``TIMESTAMP(6)``.
    """
    for f in schema.fields:
        _check_spark_type(f.dataType, f.name)
    nullable = as_nullable(schema)
    assert isinstance(nullable, T.StructType)
    return spark_arrow_schema(nullable)


def _compatible(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether Spark data of Arrow type ``have`` can be written losslessly into a column of type ``want``."""
    have, want = normalize_arrow_type(have), normalize_arrow_type(want)
    if have.equals(want):
        return True
    if pa.types.is_integer(have) and pa.types.is_integer(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return bool(have.bit_width <= want.bit_width)
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return (have.tz is None) == (want.tz is None)
    if pa.types.is_time(have) and pa.types.is_time(want):
        return True
    if pa.types.is_decimal(have) and pa.types.is_decimal(want):
        return bool(have.scale == want.scale and have.precision <= want.precision)
    if pa.types.is_binary(have) and pa.types.is_fixed_size_binary(want):
        return True
    if pa.types.is_list(have) and pa.types.is_list(want):
        return _compatible(have.value_type, want.value_type)
    if pa.types.is_map(have) and pa.types.is_map(want):
        return _compatible(have.key_type, want.key_type) and _compatible(have.item_type, want.item_type)
    if pa.types.is_struct(have) and pa.types.is_struct(want):
        if [f.name for f in have] != [f.name for f in want]:
            return False
        return all(_compatible(a.type, b.type) for a, b in zip(have, want, strict=True))
    return False


def check_write_schema(
    data: T.StructType, table: pa.Schema, primary_key: Sequence[str], allow_missing: bool, ignore: Sequence[str] = ()
) -> list[str]:
    """Check a DataFrame's schema against a table's, naming the first offending column.

    Returns the table columns the data carries (in table order). Missing columns are an error unless
    ``allow_missing`` (a partial-update write), and the primary key must always be present. Columns in
    ``ignore`` (a consumed row-kind column) are skipped.
    """
    for f in data.fields:
        _check_spark_type(f.dataType, f.name)
    incoming = spark_arrow_schema(T.StructType([f for f in data.fields if f.name not in ignore]))
    names = incoming.names
    for f in incoming:
        check_column(f.name, table.names)
        want = table.field(f.name).type
        if not _compatible(f.type, want):
            raise SchemaError(
                f"the data has type {T.StructType([data[f.name]]).fields[0].dataType.simpleString()} "
                f"but the table column is {want}",
                f.name,
            )
    for f in table:
        if f.name not in names and (not allow_missing or f.name in primary_key):
            raise SchemaError("column is missing from the data (the table has it)", f.name)
    return [f.name for f in table if f.name in names]


__all__ = [
    "arrow_schema_of",
    "arrow_type_to_spark",
    "as_nullable",
    "check_write_schema",
    "conform_for_spark",
    "spark_arrow_schema",
    "spark_batches",
    "spark_schema",
]
