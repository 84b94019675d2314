"""``mt.write_table(uri, data, primary_key=...)``: create a table from data and write it, as deltalake's
``write_deltalake`` does.

The schema is taken from the data: a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars
DataFrame (or polars LazyFrame), a duckdb relation, any Arrow C stream, a dict of columns or a list of row
dicts. A stream is read once: its schema comes from the stream itself, its rows are written as they come.
``mode`` says what happens when a table already exists at ``uri``:

* ``"error"`` (the default): :class:`~mergetable.core.errors.TableExistsError`;
* ``"append"``: the rows are written to it (upserted by key, as ``Table.write``);
* ``"overwrite"``: the rows replace all of its rows (every partition), in one commit;
* ``"ignore"``: nothing is written and the existing table is returned.

Writing to an existing table takes its schema: a column of the data that the table lacks, or one whose
type does not convert, is a :class:`~mergetable.core.errors.SchemaError` naming it (schema changes are
``Table.alter``'s). ``primary_key``, ``partition_by`` and ``options``, when given, must then match it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any, Literal

import pyarrow as pa

from mergetable.core.arguments import name_list
from mergetable.core.errors import ArgumentError, SchemaError, TableExistsError
from mergetable.core.options import TableOptions
from mergetable.table import Table, create_table, open_table, table_exists
from mergetable.write.input import input_tables

WriteMode = Literal["error", "append", "overwrite", "ignore"]
MODES = ("error", "append", "overwrite", "ignore")


def write_table(
    uri: str,
    data: Any,
    *,
    primary_key: str | Sequence[str] | None = None,
    partition_by: str | Sequence[str] | None = None,
    mode: WriteMode = "error",
    options: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    comment: str | None = None,
    cast: bool = False,
    progress: bool | None = None,
) -> Table:
    """Write ``data`` to the table at ``uri``, creating it with the data's schema if there is none.

    Args:
        uri: A local path or any fsspec URL.
        data: The rows (see the module docstring for what is accepted).
        primary_key: The key column or columns; required to create the table (they become NOT NULL).
        partition_by: The partition column or columns (among the key); ``partition_keys`` of ``create_table``.
        mode: ``"error"``, ``"append"``, ``"overwrite"`` or ``"ignore"``: what to do when the table exists.
        options: Table options by Paimon name (``{"bucket": "4"}``), used when the table is created.
        storage_options: Passed to fsspec (credentials, endpoint).
        comment: Stored with the schema of a new table.
        cast, progress: As in :meth:`mergetable.Table.write`.

    Returns:
        The table (its :meth:`~mergetable.Table.write` result is the latest snapshot).

    Raises:
        TableExistsError: ``mode="error"`` and a table exists; or the given key or partitioning differ from
            the existing table's.
        SchemaError: The data does not fit the existing table (the message names the column), or the key
            columns are not in the data.
        ArgumentError: A missing ``primary_key`` for a new table, an unknown ``mode``.

    Example:
        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> uri = tempfile.mkdtemp()
        >>> t = mt.write_table(uri, pa.table({"id": [1, 2], "v": ["a", "b"]}), primary_key="id")
        >>> t.primary_key, t.read().to_pydict()
        (('id',), {'id': [1, 2], 'v': ['a', 'b']})
        >>> _ = mt.write_table(uri, {"id": [2, 3], "v": ["B", "c"]}, mode="append")
        >>> mt.open_table(uri).read().to_pydict()
        {'id': [1, 2, 3], 'v': ['a', 'B', 'c']}
        >>> mt.write_table(uri, {"id": [9], "v": ["z"]}, mode="overwrite").read().to_pydict()
        {'id': [9], 'v': ['z']}
    """
    if mode not in MODES:
        raise ArgumentError("mode", f"must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    keys = None if primary_key is None else _names(primary_key, "primary_key")
    parts = () if partition_by is None else _names(partition_by, "partition_by")
    if table_exists(uri, storage_options):
        if mode == "error":
            raise TableExistsError(
                f"a table already exists at {uri}; mode='append' writes to it, 'overwrite' replaces its rows, "
                "'ignore' leaves it"
            )
        table = open_table(uri, storage_options)
        _check_same(table, keys, parts, options)
        if mode == "ignore":
            return table
        table.write(data, overwrite={} if mode == "overwrite" else False, cast=cast, progress=progress)
        return table
    if keys is None:
        raise ArgumentError("primary_key", f"is required to create a table at {uri} (the columns that identify a row)")
    schema, rows = _schema_and_rows(data)
    for k in (*keys, *parts):
        if k not in schema.names:
            raise SchemaError(f"is not a column of the data ({schema.names})", k)
    table = create_table(uri, schema, keys, parts, options, storage_options, comment)
    table.write(rows, cast=cast, progress=progress)
    return table


def _names(value: str | Sequence[str], argument: str) -> tuple[str, ...]:
    """A column name or a list of them (a single name is allowed here, as deltalake's ``partition_by``)."""
    return (value,) if isinstance(value, str) else name_list(value, argument)


def _check_same(
    table: Table, keys: tuple[str, ...] | None, parts: tuple[str, ...], options: dict[str, str] | None
) -> None:
    if keys is not None and tuple(keys) != table.primary_key:
        raise TableExistsError(f"the table at {table.uri} has primary key {list(table.primary_key)}, not {list(keys)}")
    if parts and tuple(parts) != table.partition_keys:
        raise TableExistsError(
            f"the table at {table.uri} is partitioned by {list(table.partition_keys)}, not {list(parts)}"
        )
    if not options:
        return
    layered = TableOptions.from_map({**table.options, **options}).to_map()
    differ = [k for k, v in layered.items() if table.options.get(k) != v]
    if differ:
        k = differ[0]
        raise TableExistsError(
            f"the table at {table.uri} has option {k}={table.options.get(k)!r}, not {layered[k]!r}; options "
            "apply when a table is created (change them with t.alter)"
        )


def _schema_and_rows(data: Any) -> tuple[pa.Schema, Any]:
    """The Arrow schema of ``data`` and its rows, a stream read only once."""
    if isinstance(data, pa.Table | pa.RecordBatch | pa.RecordBatchReader):
        return data.schema, data
    if hasattr(data, "__arrow_c_stream__"):  # polars DataFrame, duckdb relation, …: the stream knows its schema
        reader = pa.RecordBatchReader.from_stream(data)
        return reader.schema, reader
    tables = input_tables(data)
    first = next(tables, None)
    if first is None:
        raise SchemaError("argument 'data' has no rows and no schema to create a table from; use mt.create_table")
    return first.schema, itertools.chain([first], tables)


__all__ = ["MODES", "WriteMode", "write_table"]
