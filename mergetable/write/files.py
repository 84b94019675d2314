"""Writing key-value Parquet files (data and changelog) with their :class:`DataFileMeta`."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from mergetable.core.errors import storage_full
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from mergetable.metadata.models import DataFileMeta, FileSource
from mergetable.metadata.stats import column_stats, key_row, parquet_bounds
from mergetable.write.encoding import SAMPLE_ROWS, parquet_encodings

ROW_GROUP_ROWS = 256 * 1024
"""Rows per Parquet row group: large enough for one dictionary page of a string column to serve many rows
(64K-row groups made the strings of the benchmark table 40% larger), small enough for row-group statistics
to prune point lookups and for a merge window to stay small."""
PAGE_ROWS = 128 * 1024
"""Rows per data page at most (a page also ends at Arrow's 1 MiB data-page size, which an 8-byte column
reaches first). Arrow's default of 20,000 rows cut a column of random doubles into 160 KB pages, each
compressed on its own: with ``BYTE_STREAM_SPLIT``, zstd codes the few repetitive byte planes of a page with
tables fitted to too few bytes. On the benchmark table, pages of up to 128Ki rows made data files 3% smaller
(the doubles 2.4%, near-unique sorted strings 9%); the page index then bounds pages of 128Ki rows or 1 MiB."""
_PARQUET_COMPRESSION = {"none": "none", "uncompressed": "none"}


def write_kv_files(
    fileio: FileIO,
    schema: TableSchema,
    partition: tuple[str | None, ...],
    bucket: int,
    rows: pa.Table,
    level: int,
    file_source: FileSource = FileSource.APPEND,
    changelog: bool = False,
    write_cols: Sequence[str] | None = None,
    target_size: int | None = None,
    number: int | None = None,
) -> list[DataFileMeta]:
    """Write ``rows`` (file-schema columns; sorted by key unless ``changelog``) as rolling Parquet files.

    ``number`` set (a writer's pre-merged run, one record per key, its block of sequence numbers starting
    there): every record of a file is stored with one number, ``number`` plus the offset of the file's first
    row in ``rows`` (:func:`numbered`); otherwise the rows keep their ``_SEQUENCE_NUMBER``.
    """
    prefix = schema.table_options.changelog_file_prefix if changelog else schema.table_options.data_file_prefix

    def meta(part: pa.Table, start: int, name: str, size: int, known: dict[str, tuple[Any, Any]]) -> DataFileMeta:
        if number is not None:
            part = numbered(part, number + start)
        return _file_meta(schema, part, name, size, level, file_source, changelog, write_cols, known)

    return write_rolling_files(fileio, schema, partition, bucket, rows, prefix, meta, target_size, number)


def numbered(rows: pa.Table, number: int) -> pa.Table:
    """``rows`` with every ``_SEQUENCE_NUMBER`` set to ``number``.

    A writer's run holds one record per key and takes a block of numbers above every earlier run of its
    bucket (as many as the input rows it merged), so only the order of a key's records across runs matters:
    each file of the run stores one number of the block, the offset of its first row in the run, which
    keeps the run's files in ascending, disjoint ranges inside the block. One number per file costs nothing
    to store in the file, and a compaction's output, which keeps every record's number, holds one value per
    level-0 file it merged (a dictionary of a few entries) instead of an interleaving of the runs' numbers:
    on the benchmark table (a 4M-row load then five upserts of 4M rows, default options) its
    ``_SEQUENCE_NUMBER`` column took 2.5 MB instead of 23.7 MB. Only for records not yet committed: a
    committed record's number is part of its identity (a diff of two snapshots tells an unchanged record from a
    rewrite of the same values by it), which compaction keeps.

    >>> numbered(pa.table({"k": [1, 2], "_SEQUENCE_NUMBER": [8, 7]}), 7).column("_SEQUENCE_NUMBER").to_pylist()
    [7, 7]
    """
    i = rows.schema.get_field_index(SEQUENCE_NUMBER)
    return rows.set_column(i, rows.schema.field(i), pa.array(np.full(rows.num_rows, number, dtype=np.int64)))


FileMetaOf = Callable[[pa.Table, int, str, int, dict[str, tuple[Any, Any]]], DataFileMeta]
"""The metadata of a file just written: (its rows, the offset of its first row in the call's rows, its name, its
size in bytes, the exact column bounds the Parquet writer recorded)."""


def write_rolling_files(
    fileio: FileIO,
    schema: TableSchema,
    partition: tuple[str | None, ...],
    bucket: int,
    rows: pa.Table,
    prefix: str,
    meta: FileMetaOf,
    target_size: int | None = None,
    number: int | None = None,
) -> list[DataFileMeta]:
    """Write ``rows`` in order as Parquet files of the bucket's directory named ``<prefix><uuid>-<n>.parquet``,
    rolled at ``target_size`` (default ``target-file-size``), each described by ``meta``. A failure deletes
    every file the call wrote (a full storage is reported as :class:`~mergetable.core.errors.StorageFullError`).
    ``number`` set: each file's records are stored with the sequence number ``number`` + the offset of its
    first row (:func:`numbered`)."""
    if rows.num_rows == 0:
        return []
    opts = schema.table_options
    target = target_size or opts.target_file_size
    rows = rows.select(schema.file_schema.names).cast(schema.file_schema)
    directory = PathFactory.for_table(fileio.root, schema).bucket_dir(partition, bucket)
    fileio.makedirs(directory)
    compression = _PARQUET_COMPRESSION.get(opts.file_compression.lower(), opts.file_compression.lower())
    afs = fileio.arrow_fs()
    metas: list[DataFileMeta] = []
    start = 0
    n = rows.num_rows
    written: list[str] = []
    try:
        while start < n:
            name = PathFactory.new_data_file_name(prefix)
            path = f"{directory}/{name}"
            written.append(path)
            stamp = None if number is None else number + start
            end, size, parquet = write_rolling_file(
                afs, path, rows, start, target, compression, opts.file_compression_level, schema, stamp
            )
            part = rows.slice(start, end - start)
            metas.append(meta(part, start, name, size, parquet_bounds(parquet, schema.file_schema)))
            start = end
    except BaseException as exc:
        # Nothing of a failed call stays behind: not the partial file, not the files written before it.
        fileio.delete_quietly(written)
        full = storage_full(written[-1], exc) if written else None
        if full is not None and full is not exc:
            raise full from exc
        raise
    return metas


def write_rolling_file(
    afs: pafs.FileSystem,
    path: str,
    rows: pa.Table,
    start: int,
    target: int,
    compression: str,
    level: int | None,
    schema: TableSchema,
    number: int | None = None,
) -> tuple[int, int, pq.FileMetaData]:
    """Write rows from ``start`` into one Parquet file until it reaches ``target`` bytes: (end row, size, the
    file's Parquet metadata). ``number`` set: every record is stored with that sequence number.

    Pages carry CRC checksums, which readers verify; encodings follow :mod:`mergetable.write.encoding`.
    """
    with afs.open_output_stream(path) as sink:
        sample = rows.slice(start, SAMPLE_ROWS)
        if number is not None:
            sample = numbered(sample, number)
        writer = parquet_writer(sink, schema, sample, compression, level)
        end = start
        try:
            while end < rows.num_rows:
                chunk = rows.slice(end, ROW_GROUP_ROWS)
                if number is not None:
                    chunk = numbered(chunk, number)
                writer.write_table(chunk, row_group_size=ROW_GROUP_ROWS)
                end += chunk.num_rows
                if sink.tell() >= target:
                    break
        finally:
            writer.close()
        return end, sink.tell(), writer.writer.metadata


def statistics_columns(schema: pa.Schema) -> list[str]:
    """The columns whose Parquet statistics (row groups and page index) are written: all but floating-point ones.

    Arrow leaves NaN out of a float column's min and max, while Spark (and Paimon) order NaN above every
    number: a reader that trusts such a max skips the NaN rows of ``v > 10``. Without statistics, no reader can.

    >>> statistics_columns(pa.schema([("id", pa.int64()), ("v", pa.float64()), ("s", pa.string())]))
    ['id', 's']
    """
    return [f.name for f in schema if not pa.types.is_floating(f.type)]


def parquet_writer(
    sink: pa.NativeFile,
    schema: TableSchema,
    sample: pa.Table,
    compression: str | None = None,
    level: int | None = None,
) -> pq.ParquetWriter:
    """The Parquet writer of a data file of ``schema`` whose first rows are ``sample`` (page checksums on;
    encodings from :func:`parquet_encodings`; codec from the table's options unless given)."""
    opts = schema.table_options
    if compression is None:
        compression = _PARQUET_COMPRESSION.get(opts.file_compression.lower(), opts.file_compression.lower())
        level = opts.file_compression_level
    dictionary, encodings = parquet_encodings(schema, sample)
    return pq.ParquetWriter(
        sink,
        schema.file_schema,
        compression=compression,
        compression_level=level,
        write_statistics=statistics_columns(schema.file_schema),
        use_dictionary=dictionary,
        column_encoding=encodings,
        write_page_checksum=True,
        write_page_index=True,
        max_rows_per_page=PAGE_ROWS,
    )


def _file_meta(
    schema: TableSchema,
    part: pa.Table,
    name: str,
    size: int,
    level: int,
    source: FileSource,
    changelog: bool,
    write_cols: Sequence[str] | None,
    known: Mapping[str, tuple[Any, Any]] | None = None,
) -> DataFileMeta:
    """The metadata of a data file holding ``part`` (``known``: exact bounds of some columns, see
    :func:`parquet_bounds`)."""
    keys = schema.trimmed_primary_keys
    value_cols = [c for c in schema.column_names if c not in keys]
    opts = schema.table_options
    seq = part.column(SEQUENCE_NUMBER)
    kinds = np.asarray(part.column(VALUE_KIND).to_numpy())
    key_stats = column_stats(part, keys, known=known)
    if changelog:  # not key-ordered: the key range is per column
        min_key, max_key = tuple(key_stats.min_values), tuple(key_stats.max_values)
    else:
        min_key, max_key = key_row(part, keys, 0), key_row(part, keys, part.num_rows - 1)
    seq_mm = pc.min_max(seq)
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=part.num_rows,
        min_key=min_key,
        max_key=max_key,
        key_stats=key_stats,
        value_stats=column_stats(part, value_cols, [opts.field_stats_mode(c) for c in value_cols], known),
        value_stats_cols=tuple(value_cols),
        min_sequence_number=int(seq_mm["min"].as_py()),
        max_sequence_number=int(seq_mm["max"].as_py()),
        schema_id=schema.id,
        level=level,
        creation_time=int(time.time() * 1000),
        delete_row_count=int(is_retract(kinds).sum()),
        file_source=source,
        write_cols=tuple(write_cols) if write_cols is not None else None,
    )
