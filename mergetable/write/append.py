"""Writing an append table (no primary key): rows kept as given, in plain Parquet files of the table's columns.

No key, no sort, no merge, no system columns: a bucket's buffered rows are written in input order and rolled
at ``target-file-size``. Each file records the writer-local numbers of its rows (``minSequenceNumber`` …
``maxSequenceNumber``, consecutive across a bucket's files), which the commit shifts above every earlier
commit's (:mod:`mergetable.commit.sequence`): a table's files ordered by ``minSequenceNumber`` are its rows in
commit order, which reads, compaction and streams keep.

As the keyless changelog of the Table Store, an append table takes ``+I`` and ``-D`` rows (``-U``/``+U`` need a
key; ``ignore-delete`` drops ``-U``/``-D``). Within a write, a ``-D`` row applies after the ``+I`` rows given
with it: it first cancels one equal ``+I`` row the writer holds (of its bucket, :mod:`mergetable.core.records`:
buffered, or in a file it already wrote, which is then written again without it); the ones left
(:meth:`AppendWriter.take_retracts`) remove stored records when the write commits
(:func:`mergetable.dml.append.retract_records`, through :meth:`mergetable.Table.write` or ``writing``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from mergetable.core.buckets import BucketId
from mergetable.core.errors import UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.records import match_plan, remaining
from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitMessage, DataFileMeta, FileSource, SimpleStats
from mergetable.metadata.stats import column_stats
from mergetable.write.files import write_rolling_files
from mergetable.write.input import RowKindArg, conform, partitions_of, row_kinds, split_by_bucket
from mergetable.write.writer import TableWriter


class AppendWriter(TableWriter):
    """:class:`TableWriter` of an append table: buffers rows per (partition, bucket) and writes them as they came.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp(), pa.schema([("event", pa.string())]))
        >>> w = t.new_writer()
        >>> w.write(pa.table({"event": ["a", "b", "a"]}))
        >>> [(m.bucket, [f.row_count for f in m.new_files]) for m in w.prepare_commit()]
        [(0, [3])]
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._retracts: list[pa.Table] = []

    def _write_table(
        self,
        table: pa.Table,
        row_kind: RowKindArg,
        target_columns: Sequence[str] | None,
        cast: bool = False,
        buckets: np.ndarray | None = None,
    ) -> None:
        if target_columns is not None:
            raise UnsupportedError(
                "target_columns (a partial write) needs a primary key; an append table takes whole rows"
            )
        kinds = np.asarray(row_kinds(table.num_rows, row_kind).to_numpy(zero_copy_only=False))
        retracts = None
        if (kinds != RowKind.INSERT).any():
            if self.options.ignore_delete:
                keep = ~is_retract(kinds)
                table, kinds = table.filter(pa.array(keep)), kinds[keep]
            if ((kinds == RowKind.UPDATE_BEFORE) | (kinds == RowKind.UPDATE_AFTER)).any():
                raise UnsupportedError(
                    "an append table (no primary key) accepts +I and -D rows (a -D removes one equal record); "
                    "-U/+U rows need a primary key (set 'ignore-delete' to drop -U/-D rows)"
                )
            deleted = kinds == RowKind.DELETE
            if deleted.any():
                retracts = conform(table.filter(pa.array(deleted)), self.schema, cast=cast)
                table = table.filter(pa.array(~deleted))
        table = conform(table, self.schema, cast=cast)
        if table.num_rows:
            self._buffer_rows(table)
        if retracts is not None and retracts.num_rows:
            self._retract(retracts)

    def _buffer_rows(self, table: pa.Table) -> None:
        if self.partition_check is not None:
            self.partition_check(partitions_of(table, self.schema))
        for partition, bucket, rows in split_by_bucket(table, self.schema):
            self._buffer.setdefault((partition, bucket), []).append(rows)
            self._buffer_bytes += rows.nbytes
        if self._buffer_bytes >= self._run_budget():
            self.flush()

    def _retract(self, rows: pa.Table) -> None:
        """Cancel ``rows`` (``-D``) against the buffered rows of their buckets; keep the rest for the commit."""
        if self.partition_check is not None:
            self.partition_check(partitions_of(rows, self.schema))
        for partition, bucket, part in split_by_bucket(rows, self.schema):
            buffered = self._buffer.get((partition, bucket))
            if buffered:
                held = pa.concat_tables(buffered)
                hits, _ = match_plan(held, part)
                if len(hits):
                    part = remaining(held, part)
                    keep = np.ones(held.num_rows, dtype=bool)
                    keep[hits] = False
                    kept = held.filter(pa.array(keep))
                    self._buffer_bytes += kept.nbytes - held.nbytes
                    if kept.num_rows:
                        self._buffer[(partition, bucket)] = [kept]
                    else:
                        del self._buffer[(partition, bucket)]
            if part.num_rows:
                part = self._retract_written((partition, bucket), part)
            if part.num_rows:
                self._retracts.append(part)

    def _retract_written(self, bucket_id: BucketId, rows: pa.Table) -> pa.Table:
        """Cancel ``rows`` (``-D``) against the files this writer already wrote to ``bucket_id`` (rows spilled
        past ``write-buffer-size``): each file holding a match is written again without it. The rows left."""
        partition, bucket = bucket_id
        paths = PathFactory.for_table(self.fileio.root, self.schema)
        kept: list[DataFileMeta] = []
        for f in self._new_files.get(bucket_id, []):
            path = paths.data_file(partition, bucket, f.file_name)
            stored = None
            if rows.num_rows:
                stored = pq.read_table(path, filesystem=self.fileio.arrow_fs(), schema=self.schema.arrow_schema)
            hits = match_plan(stored, rows)[0] if stored is not None else ()
            if stored is None or not len(hits):
                kept.append(f)
                continue
            rows = remaining(stored, rows)
            left = np.ones(stored.num_rows, dtype=bool)
            left[hits] = False
            if left.any():
                first = f.min_sequence_number
                kept += write_append_files(
                    self.fileio, self.schema, partition, bucket, stored.filter(pa.array(left)), first
                )
            self.fileio.delete_quietly([path])
        if bucket_id in self._new_files:
            self._new_files[bucket_id] = kept
        return rows

    def take_retracts(self) -> pa.Table | None:
        """The ``-D`` rows left to apply to the stored records (None: none); the writer forgets them."""
        if not self._retracts:
            return None
        rows = pa.concat_tables(self._retracts)
        self._retracts = []
        return rows

    def prepare_commit(self) -> list[CommitMessage]:
        """See :meth:`TableWriter.prepare_commit`; refuses ``-D`` rows nobody took (:meth:`take_retracts`)."""
        if self._retracts:
            raise UnsupportedError(
                "-D rows of an append table remove stored records when they commit: write them with "
                "Table.write(..., row_kind=...) or Table.writing(), not a bare writer"
            )
        return super().prepare_commit()

    def abort(self) -> None:
        self._retracts = []
        super().abort()

    def _run_budget(self) -> int:
        return max(1, self.options.write_buffer_size)  # rows are written as they are: no sorted copy

    def _flush_bucket(
        self, job: tuple[BucketId, pa.Table, int]
    ) -> tuple[BucketId, list[DataFileMeta], list[DataFileMeta]]:
        (partition, bucket), rows, first = job
        return (partition, bucket), [], write_append_files(self.fileio, self.schema, partition, bucket, rows, first)

    def _flushed(self, bucket_id: BucketId, changelog: list[DataFileMeta], files: list[DataFileMeta]) -> None:
        self._new_files.setdefault(bucket_id, []).extend(files)  # rows as they came: no sorted run to merge


def write_append_files(
    fileio: FileIO,
    schema: TableSchema,
    partition: tuple[str | None, ...],
    bucket: int,
    rows: pa.Table,
    first_sequence: int,
    source: FileSource = FileSource.APPEND,
    target_size: int | None = None,
) -> list[DataFileMeta]:
    """Write ``rows`` (the table's columns, in order) as Parquet files rolled at ``target-file-size``; the rows
    take the sequence numbers ``first_sequence, first_sequence + 1, …`` in order (recorded per file, not stored).
    A failure deletes every file the call wrote."""

    def meta(part: pa.Table, start: int, name: str, size: int, known: dict[str, tuple[Any, Any]]) -> DataFileMeta:
        return append_file_meta(schema, part, name, size, first_sequence + start, source, known)

    prefix = schema.table_options.data_file_prefix
    return write_rolling_files(fileio, schema, partition, bucket, rows, prefix, meta, target_size)


def append_file_meta(
    schema: TableSchema,
    part: pa.Table,
    name: str,
    size: int,
    first_sequence: int,
    source: FileSource = FileSource.APPEND,
    known: dict[str, tuple[object, object]] | None = None,
) -> DataFileMeta:
    """The metadata of an append-table file holding ``part``: no key, statistics of every column (by
    ``metadata.stats-mode``), sequence numbers ``first_sequence …`` one per row."""
    cols = list(schema.column_names)
    stats = column_stats(part, cols, [schema.table_options.field_stats_mode(c) for c in cols], known)
    return append_meta(schema, name, size, part.num_rows, stats, first_sequence, source)


def append_meta(
    schema: TableSchema,
    name: str,
    size: int,
    row_count: int,
    value_stats: SimpleStats,
    first_sequence: int,
    source: FileSource = FileSource.APPEND,
) -> DataFileMeta:
    """The metadata of an append-table file of ``row_count`` rows whose columns' statistics are ``value_stats``
    (every column of ``schema``, in order): no key, sequence numbers ``first_sequence …`` one per row."""
    return DataFileMeta(
        file_name=name,
        file_size=size,
        row_count=row_count,
        min_key=(),
        max_key=(),
        key_stats=SimpleStats(),
        value_stats=value_stats,
        value_stats_cols=tuple(schema.column_names),
        min_sequence_number=first_sequence,
        max_sequence_number=first_sequence + row_count - 1,
        schema_id=schema.id,
        level=0,
        creation_time=int(time.time() * 1000),
        delete_row_count=0,
        file_source=source,
    )


__all__ = ["AppendWriter", "append_file_meta", "append_meta", "write_append_files"]
