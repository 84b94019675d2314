"""Reading raw-convertible sections with Spark's own Parquet reader.

A section of one sorted run whose files hold no retract and the current columns (a compacted bucket, or a
bucket written once) needs no merge: its rows are its files' rows as stored (Paimon's raw-convertible
splits, see :meth:`mergetable.table.Table.plan`). :func:`native_read` reads those files with
``spark.read.parquet`` and only the other sections through the Python data source
(``sections=merged``), both pinned to the same snapshot, and unions the two. On a deletion-vector table the
files read on their own (``sections="vectored"``) are Parquet scans too, minus their marked rows
(:mod:`mergetable.spark.vectors`), and only the sections that need a merge go to the data source
(``sections=merging``); a read without a filter that is all Parquet scans knows its ``count()``
(:mod:`mergetable.spark.counted`). The Parquet side gets
everything Spark's file sources have and PySpark's Python data source lacks: column pruning (a ``count()``
decodes no value column), filter pushdown scoped to each scan, and no Arrow-to-row conversion.

The DataFrame is pinned to the snapshot it was planned on, like the data source's own. It is used where it
returns exactly the data source's rows, and :func:`native_read` returns None otherwise (the caller then reads
through the data source): local tables only (Spark's Hadoop file systems are configured apart from a table's
fsspec storage options), plain reads (no change rows, incremental range, system table or per-query view),
and columns of the types Spark's Parquet reader reads as the data source does (booleans, integers, floats,
strings, binaries, dates, decimals, and timestamps with a time zone in micro- or milliseconds), and files
whose floating-point columns carry no Parquet min/max (those of earlier writers do, and Spark would trust them:
they leave NaN out).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from functools import reduce
from typing import Any

import pyarrow as pa
from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mergetable.core.filters import bind_filters
from mergetable.core.option_map import OptionMap
from mergetable.core.predicates import Conjunct, columns_of
from mergetable.core.read_options import TIME_TRAVEL_KEYS, TimeTravel
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, normalize_arrow_type
from mergetable.read.datafile import records_bounds
from mergetable.read.scan import Sections, Split
from mergetable.spark.changes import split_audit_log, wants_changes
from mergetable.spark.counted import with_count
from mergetable.spark.options import ReadOptions
from mergetable.spark.source import resolve_snapshot_id
from mergetable.spark.system import RESOLVE_SNAPSHOT, SystemRead
from mergetable.spark.types import spark_schema
from mergetable.spark.vectors import VectorFile, vector_files, without_marked
from mergetable.table import Table, open_table

_WHOLE = 1 << 62
_UNSAFE_PATH = re.compile(r"[*?\[\]{}\\:\n]")
"""Characters a Hadoop path reads as a glob or a scheme: files whose path holds one go through the data source."""


def native_type(t: pa.DataType) -> bool:
    """Whether Spark's Parquet reader reads a column of Arrow type ``t`` as the data source does.

    >>> native_type(pa.int64()), native_type(pa.timestamp("us", tz="UTC")), native_type(pa.timestamp("us"))
    (True, True, False)
    """
    t = normalize_arrow_type(t)
    if pa.types.is_timestamp(t):
        return t.tz is not None and t.unit in ("ms", "us")
    if pa.types.is_decimal(t):
        return pa.types.is_decimal128(t) and t.precision <= 38
    return any(
        check(t)
        for check in (
            pa.types.is_boolean,
            pa.types.is_signed_integer,
            pa.types.is_float32,
            pa.types.is_float64,
            pa.types.is_string,
            pa.types.is_binary,
            pa.types.is_date32,
        )
    )


def native_read(spark: SparkSession, uri: str, options: Mapping[str, str]) -> DataFrame | None:
    """The read of ``options`` (data source options, ``path`` apart) with its raw-convertible sections read by
    Spark's Parquet reader; None when that does not apply (see the module docstring)."""
    lowered = OptionMap.of(options)
    if RESOLVE_SNAPSHOT in lowered or wants_changes(lowered) or SystemRead.of({**lowered, "path": uri}) is not None:
        return None
    opts = ReadOptions.parse({**lowered, "path": uri})
    if opts.request.incremental_between is not None or opts.sections != "all" or split_audit_log(uri)[1]:
        return None
    table = open_table(opts.uri, opts.storage)
    snapshot_id = resolve_snapshot_id(table, opts.request)
    if snapshot_id is None or not table.fileio.is_local:
        return None
    if opts.request.travel.given:  # a time-travel read sees the schema its snapshot was committed with
        table = table.as_of_schema(table.snapshot(snapshot_id).schema_id)
    columns = list(opts.columns or table.schema.names)
    dnf = bind_filters(opts.request.filter, table.schema)
    needed = {*columns, *columns_of(dnf)}
    names = [*table.schema.names, SEQUENCE_NUMBER, VALUE_KIND]  # the columns a data file holds
    if not all(native_type(table.schema.field(c).type) for c in needed) or _clashing(spark, names):
        return None
    raw_splits = _plan(table, opts, dnf, snapshot_id, "raw")
    raw = _raw_paths(table, raw_splits)
    vectored: list[VectorFile] = []
    rest: Sections = "merged"
    if table.table_options.deletion_vectors_enabled:  # files with vectors, read natively and applied in Spark
        vectored, rest = vector_files(table, _plan(table, opts, dnf, snapshot_id, "vectored")), "merging"
    paths = [*raw, *(f.path for f in vectored)]
    if not paths or any(_UNSAFE_PATH.search(p) for p in paths):
        return None
    floats = [c for c in needed if pa.types.is_floating(table.schema.field(c).type)]
    if floats and not all(_no_float_bounds(table, p, floats) for p in paths):
        return None
    stored = spark_schema(table.schema, [c for c in table.schema.names if c in needed])
    schema = T.StructType([T.StructField(f.name, f.dataType, True) for f in stored])

    def scan(files: list[str]) -> DataFrame:
        return _parquet(spark, schema, files)

    parts = ([scan(raw)] if raw else []) + without_marked(spark, scan, vectored)
    rows = reduce(lambda a, b: a.union(b), parts)
    if dnf:
        rows = rows.where(spark_filter(dnf, stored))
    if columns != stored.fieldNames():
        rows = rows.select(*[F.col(_quoted(c)) for c in columns])
    if _plan(table, opts, dnf, snapshot_id, rest):
        merged = {k: v for k, v in lowered.items() if k not in TIME_TRAVEL_KEYS}
        merged.update({"snapshot-id": str(snapshot_id), "sections": rest})
        return rows.unionByName(spark.read.format("mergetable").options(**merged).load(uri))
    if dnf:
        return rows
    stored_rows = {f.file_name: f.row_count for s in raw_splits for f in s.files}
    return with_count(rows, sum(stored_rows.values()) + sum(f.rows - len(f.marked) for f in vectored))


def spark_filter(dnf: list[Conjunct], schema: T.StructType) -> Column:
    """A bound DNF filter (:func:`mergetable.core.filters.bind_filters`) as a Spark column, with the same
    semantics: a null never satisfies a predicate, and literals are already of their column's type."""
    types = {f.name: f.dataType for f in schema.fields}

    def predicate(column: str, op: str, value: Any) -> Column:
        col, t = F.col(_quoted(column)), types[column]
        if op in ("in", "not in"):
            found = col.isin(*[F.lit(v).cast(t) for v in value]) if value else F.lit(False)
            return col.isNotNull() & (~found if op == "not in" else found)
        lit = F.lit(value).cast(t)
        compared = {
            "=": col == lit,
            "==": col == lit,
            "!=": col != lit,
            "<": col < lit,
            "<=": col <= lit,
            ">": col > lit,
            ">=": col >= lit,
        }[op]
        return col.isNotNull() & F.lit(value).isNotNull() & compared

    conjuncts = [reduce(lambda a, b: a & b, [predicate(*p) for p in conj]) for conj in dnf]
    return F.coalesce(reduce(lambda a, b: a | b, conjuncts), F.lit(False))


def _plan(
    table: Table, opts: ReadOptions, dnf: list[Conjunct] | None, snapshot_id: int, sections: Sections
) -> list[Split]:
    """The sections' splits, whole: their files are all that is wanted, not key ranges cut by statistics."""
    pinned = dataclasses.replace(opts.request, travel=TimeTravel(snapshot_id=snapshot_id), split_size=_WHOLE)
    return table.plan_bound(pinned, dnf, sections)


def _parquet(spark: SparkSession, schema: T.StructType, paths: Sequence[str]) -> DataFrame:
    """``spark.read.schema(schema).parquet(*paths)`` of local files. PySpark hands a classic session's JVM a list
    one element per call; the paths go over as one string instead (a table can have thousands of files)."""
    reader = spark.read.schema(schema)
    uris = [f"file://{p}" for p in paths]
    jvm, jreader = getattr(spark, "_jvm", None), getattr(reader, "_jreader", None)
    if jvm is None or jreader is None:  # Spark Connect sends the list in one message
        return reader.parquet(*uris)
    try:
        split = jvm.java.util.regex.Pattern.compile("\n").split("\n".join(uris))  # a JVM array, in one call
        seq = jvm.scala.collection.immutable.ArraySeq.unsafeWrapArray(split)
    except Py4JError:  # another Scala library: the list, an element a call
        return reader.parquet(*uris)
    out: DataFrame = reader._df(jreader.parquet(seq))
    return out


_FLOAT_BOUNDS_CHECKED: dict[str, bool] = {}


def _no_float_bounds(table: Table, path: str, columns: Sequence[str]) -> bool:
    """Whether the file at ``path`` records no min/max for ``columns``. Files of earlier writers may: Arrow leaves
    NaN out of them, and Spark's Parquet reader would then skip the NaN rows of ``v > 10`` (see
    :func:`mergetable.write.files.statistics_columns`). A file never changes, so the answer is kept."""
    key = path + "\0" + ",".join(sorted(columns))
    if key not in _FLOAT_BOUNDS_CHECKED:
        if len(_FLOAT_BOUNDS_CHECKED) > 100_000:
            _FLOAT_BOUNDS_CHECKED.clear()
        _FLOAT_BOUNDS_CHECKED[key] = not records_bounds(table.fileio, table.fileio.arrow_fs(), path, columns)
    return _FLOAT_BOUNDS_CHECKED[key]


def _raw_paths(table: Table, splits: Sequence[Split]) -> list[str]:
    paths = table.path_factory
    return sorted({paths.data_file(s.partition, s.bucket, f.file_name) for s in splits for f in s.files})


def _clashing(spark: SparkSession, names: Sequence[str]) -> bool:
    """Whether Spark, matching Parquet columns case-insensitively, could confuse two of a file's ``names``."""
    if str(spark.conf.get("spark.sql.caseSensitive", "false")).lower() == "true":
        return False
    return len({n.lower() for n in names}) < len(names)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


__all__ = ["native_read", "native_type", "spark_filter"]
