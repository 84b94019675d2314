"""Writing an append table with Spark's own Parquet writer, then committing its files as one snapshot.

An append table's data files are plain Parquet files of the table's columns, so :func:`native_append` lets
``df.write.parquet`` write them (no Python worker, no row-to-Arrow conversion) into the job's staging directory
``_spark_staging/<job id>/parquet`` under the table, then:

1. reads each file's footer (no data decoded but the columns whose statistics the footer does not give exactly:
   floats, whose NaN the footer leaves out, dates, decimals, binaries, booleans; see
   :func:`mergetable.metadata.stats.parquet_file_stats`) into the :class:`DataFileMeta` the Python writer
   records (:func:`mergetable.write.append.append_meta`), its partition from the values of its partition columns;
2. moves (renames) each file to its partition's ``bucket-0/`` with a data file name tagged with the job, as the
   data source's tasks name theirs;
3. commits them through the data source's own driver-side commit (:meth:`MergeTableWriter.commit`), with the
   same overwrite, dynamic partition overwrite and ``txnAppId``/``txnVersion`` semantics. If anything fails
   after the Spark job, :meth:`MergeTableWriter.abort` deletes the moved files that no snapshot references, and
   the staging directory is always removed: a failed write leaves the table as it was.

Spark's ``partitionBy`` would drop the partition columns from the files, while a data file holds every column: a
partitioned table's rows are written partitioned by copies of its partition columns (unused names), which only
name the staging directories. Exactly-once on task retry and speculation is Spark's output committer's: only the
committed task outputs are in the staging directory when the job ends.

The path is taken only where its files are exactly the data source's; otherwise :func:`native_append` returns
False before writing anything and the caller writes through the data source. It needs: a local table (Spark's
Hadoop file systems are configured apart from the table's fsspec storage options) whose path Hadoop takes as it
is (no glob or scheme characters) with no primary key and no
fixed buckets (``bucket`` -1); no row-kind column, partial write, case renaming or ``mergeSchema``; DataFrame
columns of exactly the table's types (no cast), nullable where the table's are; types Spark's Parquet writer
stores as mergetable reads them back (:func:`mergetable.spark.native.native_type`: booleans, integers, floats,
strings, binaries, dates, decimals, and timestamps with a time zone, written as ``TIMESTAMP_MICROS`` or
``TIMESTAMP_MILLIS`` for the write); a ``file.compression`` Spark's writer has. Floating-point columns are
written without Parquet statistics, as the Python writer writes them (:mod:`mergetable.spark.native` reads such
files with Spark's reader). Spark decides the file sizes (one file per task and partition; ``target-file-size``
is not applied) and the row-group size.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mergetable.core import paths
from mergetable.core.option_map import OptionMap
from mergetable.core.schema import TableSchema, normalize_arrow_type
from mergetable.metadata.models import CommitMessage, DataFileMeta, SimpleStats
from mergetable.metadata.stats import parquet_file_stats
from mergetable.spark.bucketing import unused_name
from mergetable.spark.native import _UNSAFE_PATH, _clashing, _quoted, native_type
from mergetable.spark.staging import leave_marker, tagged_prefixes
from mergetable.spark.types import spark_arrow_schema
from mergetable.spark.write_modes import MERGE_SCHEMA, PAIMON_MERGE_SCHEMA
from mergetable.spark.writer import MergeTableWriter, TaskCommit, WriteJob, plan_write
from mergetable.write.append import append_meta
from mergetable.write.input import partitions_of

PARTITION_COPY = "_mergetable_partition"
"""The name of the copies of the partition columns the staged files are partitioned by (a suffix when taken)."""
_SPARK_CODECS = {"zstd": "zstd", "snappy": "snappy", "gzip": "gzip", "brotli": "brotli", "lz4": "lz4_raw"}
_SPARK_CODECS |= {"none": "none", "uncompressed": "none"}
_ARROW_ZSTD_LEVEL = 1
"""The level of the Python writer's zstd files when ``file.compression.zstd-level`` is unset (Arrow's default)."""
_TIMESTAMP_TYPE = "spark.sql.parquet.outputTimestampType"
_TIMESTAMP_TYPES = {"us": "TIMESTAMP_MICROS", "ms": "TIMESTAMP_MILLIS"}
_READERS = 4


def native_append(df: DataFrame, uri: str, mode: str, options: dict[str, str]) -> bool:
    """Write ``df`` to the append table at ``uri`` with Spark's Parquet writer and commit the files as one
    snapshot (see the module docstring); False, with nothing written, where that path does not apply.

    ``options`` are the data source's write options (``path`` apart), as :func:`mergetable.spark.api.write` hands
    them over; the table is created on the first write, as by the data source.
    """
    given = OptionMap.of(options)
    if given.flag(MERGE_SCHEMA, False, "mergeSchema") or given.flag(PAIMON_MERGE_SCHEMA):
        return False
    job = plan_write({**options, "path": uri}, df.schema, overwrite=mode == "overwrite")
    plan = _plan(df, job)
    if plan is None:
        return False
    spark = df.sparkSession
    fileio = job.fileio()
    task = TaskCommit(0, 0, 0, [])
    if job.session_overwrite_mode:
        task.partition_overwrite_mode = str(spark.conf.get("spark.sql.sources.partitionOverwriteMode", "static"))
    staging = paths.PathFactory(fileio.root).staged_parquet_dir(job.job_id)
    writer = MergeTableWriter(job)
    moved: list[str] = []
    try:
        leave_marker(fileio, job.job_id, task.marker)
        with _timestamp_type(spark, plan.timestamp_type):
            plan.frame.write.mode("overwrite").options(**plan.options).partitionBy(*plan.copies).parquet(staging)
        task.messages = _place(job, staging, moved)
        task.rows = sum(f.row_count for m in task.messages for f in m.new_files)
        # gone before the commit, which takes any other name in the job's directory for an unknown attempt's marker
        shutil.rmtree(staging, ignore_errors=True)
        writer.commit([task])
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        placed = {f.file_name for m in task.messages for f in m.new_files}
        fileio.delete_quietly([p for p in moved if p.rsplit("/", 1)[-1] not in placed])
        writer.abort([task])
        if isinstance(exc, _SharedFile):  # nothing was committed: the data source writes the rows instead
            return False
        raise
    return True


@dataclass(frozen=True)
class _NativePlan:
    frame: DataFrame
    """The rows to write: the table's columns, then the copies of the partition columns."""
    copies: list[str]
    options: dict[str, str]
    timestamp_type: str | None


def _plan(df: DataFrame, job: WriteJob) -> _NativePlan | None:
    """How Spark's Parquet writer writes ``job``'s files, or None where its files would not be the data source's."""
    schema = job.schema
    opts = schema.table_options
    codec = _SPARK_CODECS.get(opts.file_compression.lower())
    fileio = job.fileio()
    eligible = (
        fileio.is_local
        and not _UNSAFE_PATH.search(fileio.root)
        and schema.is_append_table
        and opts.bucket == -1
        and job.row_kind_column is None
        and job.target_columns is None
        and not job.renames
        and not _clashing(df.sparkSession, schema.column_names)
    )
    if codec is None or not eligible or sorted(df.columns) != sorted(schema.column_names):
        return None
    table = schema.arrow_schema
    given = spark_arrow_schema(df.schema)
    for f in table:
        g = given.field(f.name)
        if not native_type(f.type) or normalize_arrow_type(g.type) != normalize_arrow_type(f.type):
            return None
        if g.nullable and not f.nullable:
            return None
    units = {f.type.unit for f in table if pa.types.is_timestamp(f.type)}
    if len(units) > 1:
        return None
    options = {"compression": codec, "parquet.page.write-checksum.enabled": "true"}
    if codec == "zstd":
        options["parquet.compression.codec.zstd.level"] = str(opts.file_compression_level or _ARROW_ZSTD_LEVEL)
    for f in table:  # as the Python writer: no float statistics (Arrow's and Spark's leave NaN out)
        if pa.types.is_floating(f.type):
            options[f"parquet.column.statistics.enabled#{f.name}"] = "false"
    copies: list[str] = []
    columns = [F.col(_quoted(c)) for c in schema.column_names]
    for i, key in enumerate(schema.partition_keys):  # "" and null would share Spark's default directory
        copies.append(unused_name(f"{PARTITION_COPY}_{i}", [*schema.column_names, *copies]))
        columns.append(_partition_copy(F.col(_quoted(key)), table.field(key).type).alias(copies[-1]))
    unit = next(iter(units), None)
    return _NativePlan(df.select(*columns), copies, options, None if unit is None else _TIMESTAMP_TYPES[unit])


def _partition_copy(value: Any, t: pa.DataType) -> Any:
    """The string a staged file's directory is named by: one per partition value, whatever the session's time zone
    (timestamps as their microseconds); null and "" apart (Spark names both with its default directory)."""
    text = F.unix_micros(value) if pa.types.is_timestamp(t) else value
    text = text.cast("string")
    return F.when(value.isNull(), F.lit("n")).otherwise(F.concat(F.lit("v"), text))


class _SharedFile(Exception):
    """A staged file holds the rows of more than one partition."""


@contextlib.contextmanager
def _timestamp_type(spark: Any, value: str | None) -> Iterator[None]:
    """The session's Parquet timestamp type set to ``value`` for the write (Spark reads it from the session, not
    from the write's options), then restored."""
    if value is None:
        yield
        return
    before = spark.conf.get(_TIMESTAMP_TYPE, None)
    spark.conf.set(_TIMESTAMP_TYPE, value)
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(_TIMESTAMP_TYPE)
        else:
            spark.conf.set(_TIMESTAMP_TYPE, before)


@dataclass(frozen=True)
class _Staged:
    path: str
    partition: tuple[str | None, ...]
    rows: int
    size: int
    stats: SimpleStats | None
    """None for a file without rows."""


def _place(job: WriteJob, staging: str, moved: list[str]) -> list[CommitMessage]:
    """Describe the staged files and move them to their buckets (their new paths appended to ``moved``): one
    message per partition, its files numbered in the order of the Spark tasks that wrote them."""
    schema = job.schema
    files = sorted(_staged_files(staging), key=lambda p: (os.path.basename(p), p))
    with ThreadPoolExecutor(_READERS) as pool:
        staged = list(pool.map(lambda p: _describe(schema, p), files))
    layout = paths.PathFactory.for_table(job.fileio().root, schema)
    prefix = tagged_prefixes(schema, job.job_id)[0]
    by_partition: dict[tuple[str | None, ...], list[DataFileMeta]] = {}
    for s in staged:
        if s.stats is None:  # no rows
            continue
        metas = by_partition.setdefault(s.partition, [])
        name = paths.PathFactory.new_data_file_name(prefix)
        first = sum(m.row_count for m in metas)
        directory = layout.bucket_dir(s.partition, 0)
        os.makedirs(directory, exist_ok=True)
        target = f"{directory}/{name}"
        os.rename(s.path, target)
        moved.append(target)
        metas.append(append_meta(schema, name, s.size, s.rows, s.stats, first))
    return [
        CommitMessage(partition=p, bucket=0, total_buckets=schema.table_options.bucket, new_files=tuple(metas))
        for p, metas in by_partition.items()
    ]


def _staged_files(staging: str) -> list[str]:
    """The Parquet files Spark committed under ``staging`` (not its checksums or markers)."""
    out = []
    for directory, _, names in os.walk(staging):
        out += [f"{directory}/{n}" for n in names if n.endswith(".parquet") and not n.startswith(("_", "."))]
    return out


def _describe(schema: TableSchema, path: str) -> _Staged:
    """A staged file's partition, row count, size and statistics, from its footer (and the columns it lacks)."""
    parquet = pq.ParquetFile(path)
    metadata = parquet.metadata
    table = schema.arrow_schema
    partition: tuple[str | None, ...] = ()
    if schema.partition_keys and metadata.num_rows:
        keys = pa.schema([table.field(k) for k in schema.partition_keys])
        found = partitions_of(parquet.read(columns=keys.names).cast(keys), schema)
        if len(found) != 1:  # two values whose copies Spark named alike (not expected: see _partition_copy)
            raise _SharedFile(path)
        partition = found[0]
    modes = [schema.table_options.field_stats_mode(c) for c in schema.column_names]

    def read(names: list[str]) -> pa.Table:
        return parquet.read(columns=names).cast(pa.schema([table.field(n) for n in names]))

    stats = parquet_file_stats(metadata, table, modes, read) if metadata.num_rows else None
    return _Staged(path, partition, metadata.num_rows, os.path.getsize(path), stats)


__all__ = ["PARTITION_COPY", "native_append"]
