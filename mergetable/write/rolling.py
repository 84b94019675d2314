"""Writing a stream of key-ordered rows as rolling data files, holding only the rows of one write.

:class:`RollingKvWriter` keeps one Parquet file open, appends the rows it is given in row groups, and rolls
to a new file at ``target-file-size``, as :func:`mergetable.write.files.write_kv_files` does for a table
held whole. A file's :class:`DataFileMeta` is built from a small summary of each write instead of the
file's rows: its first and last row and, for every column, the rows holding its minimum and maximum, so
the statistics (min/max per column, first/last key, sequence range) are those of the whole file; row,
null and retract counts are summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from mergetable.core.errors import storage_full
from mergetable.core.fileio import FileIO
from mergetable.core.floats import order_keys
from mergetable.core.paths import PathFactory
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.metadata.models import DataFileMeta, FileSource, SimpleStats
from mergetable.write import files
from mergetable.write.files import _file_meta, parquet_writer


def extreme_rows(table: pa.Table) -> np.ndarray:
    """Ascending indices of the first and last row and of every column's minimum and maximum."""
    n = table.num_rows
    rows = {0, n - 1}
    for col in table.columns:
        t = col.type
        if pa.types.is_nested(t) or pa.types.is_null(t) or col.null_count == n:
            continue
        if pa.types.is_floating(t):
            values = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
            keys = order_keys(values)
            valid = np.flatnonzero(~np.asarray(col.is_null().to_numpy(zero_copy_only=False)))
            rows.update((int(valid[np.argmin(keys[valid])]), int(valid[np.argmax(keys[valid])])))
            continue
        if pa.types.is_temporal(t):
            col = col.cast(pa.int32() if t.bit_width == 32 else pa.int64())
        mm = pc.min_max(col)
        rows.update((int(pc.index(col, mm["min"]).as_py()), int(pc.index(col, mm["max"]).as_py())))
    return np.array(sorted(rows), dtype=np.int64)


def _with_nulls(stats: SimpleStats, nulls: Sequence[int]) -> SimpleStats:
    counts = tuple(None if old is None else int(n) for old, n in zip(stats.null_counts, nulls, strict=True))
    return stats.model_copy(update={"null_counts": counts})


class RollingKvWriter:
    """Data files of one bucket written from key-ordered tables given one after another (see the module)."""

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        partition: tuple[str | None, ...],
        bucket: int,
        level: int,
        file_source: FileSource = FileSource.APPEND,
        target_size: int | None = None,
        number: int | None = None,
    ) -> None:
        self.fileio = fileio
        self.schema = schema
        self.partition = partition
        self.level = level
        self.file_source = file_source
        opts = schema.table_options
        self.target = target_size or opts.target_file_size
        self.directory = PathFactory.for_table(fileio.root, schema).bucket_dir(partition, bucket)
        self.afs = fileio.arrow_fs()
        self.keys = list(schema.trimmed_primary_keys)
        self.values = [c for c in schema.column_names if c not in self.keys]
        self.metas: list[DataFileMeta] = []
        self.written: list[str] = []
        self._open: tuple[str, pa.NativeFile, pq.ParquetWriter] | None = None
        self._summaries: list[pa.Table] = []
        self._rows = self._deletes = 0
        self._nulls = np.zeros(len(schema.file_schema), dtype=np.int64)
        self._pending: list[pa.Table] = []
        self._pending_rows = 0
        self.number = number
        """Set for a writer's run (one record per key): each file's records are stored with one sequence number,
        this plus the rows written before the file (:func:`~mergetable.write.files.numbered`)."""
        self._written_rows = 0

    def write(self, rows: pa.Table) -> None:
        """Append ``rows`` (file-schema columns, ordered by key after every row written before).

        Rows are written in row groups of ``ROW_GROUP_ROWS`` (the rest waits for the next call), so files
        roll where :func:`~mergetable.write.files.write_kv_files` would roll the same rows held whole.
        """
        self._pending.append(rows.select(self.schema.file_schema.names).cast(self.schema.file_schema))
        self._pending_rows += rows.num_rows
        if self._pending_rows >= files.ROW_GROUP_ROWS:
            self._flush(final=False)

    @property
    def pending_bytes(self) -> int:
        """Bytes of rows given to :meth:`write` that wait for a full row group."""
        return sum(t.nbytes for t in self._pending)

    def flush(self) -> None:
        """Write the waiting rows now, as a smaller row group (bounds the memory of many writers open at once)."""
        if self._pending_rows:
            self._flush(final=True)

    def _flush(self, final: bool) -> None:
        rows = pa.concat_tables(self._pending) if len(self._pending) > 1 else self._pending[0]
        step = files.ROW_GROUP_ROWS
        whole = rows.num_rows if final else rows.num_rows - rows.num_rows % step
        for start in range(0, whole, step):
            self._write_group(rows.slice(start, min(step, whole - start)))
        self._pending = [rows.slice(whole)] if whole < rows.num_rows else []
        self._pending_rows = rows.num_rows - whole

    def _write_group(self, chunk: pa.Table) -> None:
        if self.number is not None:
            chunk = files.numbered(chunk, self.number + self._written_rows - self._rows)
        if self._open is None:
            self.fileio.makedirs(self.directory)
            name = PathFactory.new_data_file_name(self.schema.table_options.data_file_prefix)
            path = f"{self.directory}/{name}"
            self.written.append(path)
            sink = self.afs.open_output_stream(path)
            self._open = (name, sink, parquet_writer(sink, self.schema, chunk))
        _, sink, writer = self._open
        writer.write_table(chunk, row_group_size=files.ROW_GROUP_ROWS)
        self._summarize(chunk)
        if sink.tell() >= self.target:
            self._roll()

    def _summarize(self, chunk: pa.Table) -> None:
        self._summaries.append(chunk.take(pa.array(extreme_rows(chunk))))
        self._rows += chunk.num_rows
        self._written_rows += chunk.num_rows
        self._deletes += int(is_retract(np.asarray(chunk.column(VALUE_KIND).to_numpy())).sum())
        self._nulls += np.array([c.null_count for c in chunk.columns], dtype=np.int64)

    def _roll(self) -> None:
        assert self._open is not None
        name, sink, writer = self._open
        self._open = None
        writer.close()
        size = sink.tell()
        sink.close()
        summary = pa.concat_tables(self._summaries)
        meta = _file_meta(self.schema, summary, name, size, self.level, self.file_source, False, None)
        nulls = dict(zip(self.schema.file_schema.names, self._nulls.tolist(), strict=True))
        self.metas.append(
            meta.model_copy(
                update={
                    "row_count": self._rows,
                    "delete_row_count": self._deletes,
                    "key_stats": _with_nulls(meta.key_stats, [nulls[c] for c in self.keys]),
                    "value_stats": _with_nulls(meta.value_stats, [nulls[c] for c in self.values]),
                }
            )
        )
        self._summaries, self._rows, self._deletes = [], 0, 0
        self._nulls[:] = 0

    def close(self) -> list[DataFileMeta]:
        """Finish the open file; the metadata of every file written."""
        if self._pending_rows:
            self._flush(final=True)
        if self._open is not None:
            self._roll()
        return self.metas

    def abort(self) -> None:
        """Close and delete every file written (nothing of a failed write stays behind)."""
        if self._open is not None:
            _, sink, writer = self._open
            self._open = None
            try:
                writer.close()
                sink.close()
            except (OSError, pa.ArrowException):
                pass
        self.fileio.delete_quietly(self.written)

    def __enter__(self) -> RollingKvWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None:
            self.abort()
            full = storage_full(self.written[-1], exc) if self.written and exc is not None else None
            if full is not None and full is not exc:
                raise full from exc
