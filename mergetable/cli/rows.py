"""Streaming rows out of the command line: ``read`` and ``changelog`` write batch by batch, never the whole table.

Formats: ``table`` (aligned text, the default on a terminal), ``json`` (a JSON array, one row per line; the
default under ``--json``), ``csv`` and ``parquet`` (pyarrow's streaming writers; parquet needs ``--output``).
``--output FILE`` writes the rows to FILE (through a temporary file renamed at the end, so a failed read
leaves no partial file) and prints a one-line summary instead. ``--limit N`` stops reading after N rows
(default: 20 on stdout, every row with ``--output``; 0 means every row).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from mergetable.cli.errors import UsageError
from mergetable.cli.output import Output, cell_lines, cells_of, column_widths, header_lines, plain
from mergetable.read.parallel import Prefetched
from mergetable.write.files import ROW_GROUP_ROWS

FORMATS = ("table", "json", "csv", "parquet")
DEFAULT_LIMIT = 20
TEXT_CHUNK = 1024  # rows rendered at once by the text formats
EXPORT_ROW_GROUP_ROWS = ROW_GROUP_ROWS
"""Rows per row group of a ``--format parquet`` file: as many as in a data file."""


def non_negative_int(text: str) -> int:
    """argparse type of ``--limit``: a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_row_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--limit",
        type=non_negative_int,
        default=None,
        help=f"at most N rows (default {DEFAULT_LIMIT}, or all with --output; 0 for all)",
    )
    p.add_argument("--format", choices=FORMATS, default=None, help="table, json, csv or parquet (default: table)")
    p.add_argument("--output", metavar="FILE", default=None, help="write the rows to FILE (needed for parquet)")


def limited(reader: pa.RecordBatchReader, limit: int) -> Iterator[pa.RecordBatch]:
    """The reader's batches, cut after ``limit`` rows (0: all); reading stops there."""
    left = limit
    for batch in reader:
        if limit and batch.num_rows >= left:
            yield batch.slice(0, left)
            return
        if batch.num_rows:
            yield batch
        left -= batch.num_rows


def write_rows(reader: pa.RecordBatchReader, args: argparse.Namespace, out: Output) -> None:
    """Write the reader's rows as ``args`` asks (format, output file, limit); see the module docs."""
    fmt = args.format or ("json" if out.as_json else "table")
    limit = args.limit if args.limit is not None else (0 if args.output else DEFAULT_LIMIT)
    if fmt == "parquet" and not args.output:
        raise UsageError("--format parquet writes a file: give --output FILE")
    if args.output is None:
        _write(reader, fmt, limit, out.stream)
        return
    target = Path(args.output)
    if not target.parent.is_dir():
        raise UsageError(f"--output {args.output}: the directory {target.parent} does not exist")
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb" if fmt == "parquet" else "w", encoding=None if fmt == "parquet" else "utf-8") as fh:
            rows = _write(reader, fmt, limit, fh)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    out.emit({"rows": rows, "output": str(target), "format": fmt}, f"wrote {rows} row(s) to {target}")


def _write(reader: pa.RecordBatchReader, fmt: str, limit: int, sink: IO[Any]) -> int:
    """Write the rows, then close the reader however the writing ended (all rows, the limit, an error): its
    threads stop and are waited for, so none is left inside Arrow when the process exits."""
    with reader:
        if fmt not in ("parquet", "csv"):
            batches = limited(reader, limit)
            return _json(batches, sink) if fmt == "json" else _table(reader.schema, batches, sink)
        # Arrow encodes Parquet and CSV without the GIL: the next batches are read meanwhile, by a thread of their
        # own (a few batches ahead: a Parquet row group is encoded at once), which closes the reader as it stops.
        ahead = Prefetched(reader, 8, "mergetable-cli-read")
        try:
            batches = limited(ahead, limit)
            return _parquet(reader.schema, batches, sink) if fmt == "parquet" else _csv(reader.schema, batches, sink)
        finally:
            ahead.close()


def _parquet(schema: pa.Schema, batches: Iterator[pa.RecordBatch], sink: IO[bytes]) -> int:
    """Write ``batches`` as row groups of :data:`EXPORT_ROW_GROUP_ROWS` rows (the last one shorter), holding at most
    one row group's batches: a merged read yields a batch per merge window, far fewer rows than a row group."""
    rows = held_rows = 0
    held: list[pa.RecordBatch] = []
    size = EXPORT_ROW_GROUP_ROWS
    # Dictionary encoding of high-cardinality columns costs more than the merged read itself: off for exports.
    with pq.ParquetWriter(sink, schema, use_dictionary=False) as writer:
        for batch in batches:
            held.append(batch)
            held_rows += batch.num_rows
            rows += batch.num_rows
            if held_rows >= size:
                whole = held_rows - held_rows % size
                table = pa.Table.from_batches(held, schema)
                writer.write_table(table.slice(0, whole), row_group_size=size)
                held, held_rows = table.slice(whole).to_batches(), held_rows - whole
        if held:
            writer.write_table(pa.Table.from_batches(held, schema), row_group_size=size)
    return rows


def _csv(schema: pa.Schema, batches: Iterator[pa.RecordBatch], sink: IO[str]) -> int:
    rows = 0
    buffer = io.BytesIO()
    with pacsv.CSVWriter(buffer, schema) as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
            sink.write(buffer.getvalue().decode("utf-8"))
            buffer.seek(0)
            buffer.truncate()
    sink.write(buffer.getvalue().decode("utf-8"))  # the header when there were no rows
    return rows


def _json(batches: Iterator[pa.RecordBatch], sink: IO[str]) -> int:
    rows = 0
    sink.write("[")
    for batch in batches:
        for row in batch.to_pylist():
            sink.write(("\n" if rows == 0 else ",\n") + json.dumps(plain(row)))
            rows += 1
    sink.write("\n]\n" if rows else "]\n")
    return rows


def _table(schema: pa.Schema, batches: Iterator[pa.RecordBatch], sink: IO[str]) -> int:
    """Aligned text, a chunk at a time: widths come from the first chunk and only grow after it."""
    headers = schema.names
    widths: list[int] = []
    rows = 0
    for chunk in _chunks(batches):
        cells = cells_of([[r[c] for c in headers] for r in chunk.to_pylist()])
        if not widths:
            widths = column_widths(headers, cells)
            sink.write("\n".join(header_lines(headers, widths)) + "\n")
        widths = column_widths(headers, cells, widths)
        sink.write("\n".join(cell_lines(cells, widths)) + "\n")
        rows += chunk.num_rows
    if not rows:
        widths = column_widths(headers, [])
        sink.write("\n".join([*header_lines(headers, widths), "(no rows)"]) + "\n")
    return rows


def _chunks(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.Table]:
    """The batches regrouped into tables of about :data:`TEXT_CHUNK` rows (the first chunk sets the widths)."""
    pending: list[pa.RecordBatch] = []
    size = 0
    for batch in batches:
        for start in range(0, batch.num_rows, TEXT_CHUNK):
            piece = batch.slice(start, TEXT_CHUNK)
            pending.append(piece)
            size += piece.num_rows
            if size >= TEXT_CHUNK:
                yield pa.Table.from_batches(pending)
                pending, size = [], 0
    if pending:
        yield pa.Table.from_batches(pending)
