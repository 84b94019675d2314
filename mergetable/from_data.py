"""``mt.write_table(uri, data, primary_key=...)``: create a table from data and write it, as deltalake's
``write_deltalake`` does.

The schema is taken from the data: a pyarrow Table, RecordBatch or RecordBatchReader, a pandas or polars
DataFrame (or polars LazyFrame), a duckdb relation, any Arrow C stream, a dict of columns or a list of row
dicts. A stream is read once: its schema comes from the stream itself, its rows are written as they come.
``mode`` says what happens when a table already exists at ``uri``:

* ``"error"`` (the default): :class:`~mergetable.core.errors.TableExistsError`;
* ``"append"``: the rows are written to it (upserted by key, as ``Table.write``);
* ``"overwrite"``: the rows replace all of its rows (every partition), in one commit; ``partition``
  narrows that to one partition;
* ``"ignore"``: nothing is written and the existing table is returned.

Writing to an existing table takes its schema: a column of the data that the table lacks, or one whose
type does not convert, is a :class:`~mergetable.core.errors.SchemaError` naming it (schema changes are
``Table.alter``'s). ``primary_key``, ``partition_by`` and ``options``, when given, must then match it.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import pyarrow as pa

from mergetable.commit.result import CommitResult
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
    partition: Mapping[str, Any] | None = None,
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
        primary_key: The key column or columns of a new table (they become NOT NULL); without it the new table is
            an append table (no key: rows are appended, never merged).
        partition_by: The partition column or columns (among the key); ``partition_keys`` of ``create_table``.
        mode: ``"error"``, ``"append"``, ``"overwrite"`` or ``"ignore"``: what to do when the table exists.
        partition: With ``mode="overwrite"``: replace only this partition (``{"dt": "2024-05-01"}``; the rows
            must belong to it), not the whole table.
        options: Table options by Paimon name (``{"bucket": "4"}``), used when the table is created.
        storage_options: Passed to fsspec (credentials, endpoint).
        comment: Stored with the schema of a new table.
        cast, progress: As in :meth:`mergetable.Table.write`.

    Returns:
        The table (its :meth:`~mergetable.Table.write` result is the latest snapshot).

    Raises:
        TableExistsError: ``mode="error"`` and a table exists; or the given key, partitioning or options
            differ from the existing table's.
        SchemaError: The data does not fit the existing table (the message names the column), or the key
            columns are not in the data.
        ArgumentError: An unknown ``mode``, a ``partition``
            without ``mode="overwrite"``.

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
    return write_source(
        uri,
        _Data(data),
        primary_key=primary_key,
        partition_by=partition_by,
        mode=mode,
        partition=partition,
        options=options,
        storage_options=storage_options,
        comment=comment,
        cast=cast,
        progress=progress,
    ).table


class RowSource(Protocol):
    """Rows to write whose reading may depend on the table's schema (the command line parses CSV as its types)."""

    def schema(self) -> pa.Schema:
        """The schema a new table is created with."""
        ...

    def rows(self, schema: pa.Schema) -> Any:
        """The rows (anything :meth:`mergetable.Table.write` takes), read for a table of ``schema``."""
        ...


@dataclass(frozen=True)
class WriteOutcome:
    """What :func:`write_source` did: the table, whether it created it, and the write (None: ``mode="ignore"``)."""

    table: Table
    created: bool
    result: CommitResult | None


def write_source(
    uri: str,
    source: RowSource,
    *,
    primary_key: str | Sequence[str] | None = None,
    partition_by: str | Sequence[str] | None = None,
    mode: WriteMode = "error",
    partition: Mapping[str, Any] | None = None,
    options: dict[str, str] | None = None,
    storage_options: dict[str, Any] | None = None,
    comment: str | None = None,
    cast: bool = False,
    progress: bool | None = None,
    flags: bool = False,
) -> WriteOutcome:
    """:func:`write_table` for rows read once the table's schema is known, telling what it did.

    ``mergetable write`` runs it (``flags``: messages name its options, ``--mode append``, not the keywords);
    the arguments and errors are :func:`write_table`'s.

    Example:
        >>> import tempfile, pyarrow as pa
        >>> class Rows:
        ...     def schema(self): return pa.schema([("id", pa.int64())])
        ...     def rows(self, schema): return pa.table({"id": [1, 2]}, schema=schema)
        >>> done = write_source(tempfile.mkdtemp(), Rows(), primary_key="id", mode="append")
        >>> done.created, done.result.num_added_rows, done.table.count()
        (True, 2, 2)
    """
    if mode not in MODES:
        raise ArgumentError("mode", f"must be one of {', '.join(repr(m) for m in MODES)}, got {mode!r}")
    if partition is not None and mode != "overwrite":
        raise ArgumentError(_arg("partition", flags), f"only goes with {_arg('mode', flags, 'overwrite')}")
    keys = None if primary_key is None else _names(primary_key, "primary_key")
    parts = () if partition_by is None else _names(partition_by, "partition_by")
    overwrite: bool | dict[str, Any] = False if partition is None else dict(partition)
    if table_exists(uri, storage_options):
        if mode == "error":
            modes = ", ".join(f"{_arg('mode', flags, m)} {what}" for m, what in _OTHER_MODES)
            raise TableExistsError(f"a table already exists at {uri}; {modes}")
        table = open_table(uri, storage_options)
        _check_same(table, keys, parts, options, flags)
        if mode == "ignore":
            return WriteOutcome(table, False, None)
        if mode == "overwrite" and partition is None:
            overwrite = {}  # every partition: the whole table, as write_deltalake's overwrite
        rows = source.rows(table.schema)
        return WriteOutcome(table, False, table.write(rows, overwrite=overwrite, cast=cast, progress=progress))
    schema = source.schema()
    keys = keys or ()  # no key: an append table
    for k in (*keys, *parts):
        if k not in schema.names:
            raise SchemaError(f"is not a column of the data ({schema.names})", k)
    table = create_table(uri, schema, keys, parts, options, storage_options, comment)
    result = table.write(source.rows(table.schema), overwrite=overwrite, cast=cast, progress=progress)
    return WriteOutcome(table, True, result)


_OTHER_MODES = (("append", "writes to it"), ("overwrite", "replaces its rows"), ("ignore", "leaves it"))


def _arg(name: str, flags: bool, value: str | None = None) -> str:
    """An argument (with a value) as a keyword, ``mode='append'``, or as an option, ``--mode append``."""
    if flags:
        flag = "--" + name.replace("_", "-")
        return flag if value is None else f"{flag} {value}"
    return name if value is None else f"{name}={value!r}"


class _Data:
    """:func:`write_table`'s ``data`` as a :class:`RowSource`: a stream is read once, its schema from itself."""

    def __init__(self, data: Any) -> None:
        self.data = data

    def schema(self) -> pa.Schema:
        schema, self.data = _schema_and_rows(self.data)
        return schema

    def rows(self, schema: pa.Schema) -> Any:
        return self.data


def _names(value: str | Sequence[str], argument: str) -> tuple[str, ...]:
    """A column name or a list of them (a single name is allowed here, as deltalake's ``partition_by``)."""
    return (value,) if isinstance(value, str) else name_list(value, argument)


def _check_same(
    table: Table, keys: tuple[str, ...] | None, parts: tuple[str, ...], options: dict[str, str] | None, flags: bool
) -> None:
    if keys is not None and tuple(keys) != table.primary_key:
        raise TableExistsError(
            f"the table at {table.uri} has primary key {list(table.primary_key)}, "
            f"not {_list('primary_key', keys, flags)}"
        )
    if parts and tuple(parts) != table.partition_keys:
        raise TableExistsError(
            f"the table at {table.uri} is partitioned by {list(table.partition_keys)}, "
            f"not {_list('partition_by', parts, flags)}"
        )
    if not options:
        return
    layered = TableOptions.from_map({**table.options, **options}).to_map()
    differ = [k for k, v in layered.items() if table.options.get(k) != v]
    if differ:
        k = differ[0]
        change = "mergetable alter URI set-option" if flags else "t.alter"
        raise TableExistsError(
            f"the table at {table.uri} has option {k}={table.options.get(k)!r}, not {layered[k]!r}; options "
            f"apply when a table is created (change them with {change})"
        )


def _list(name: str, values: tuple[str, ...], flags: bool) -> str:
    return f"--{name.replace('_', '-')} {','.join(values)}" if flags else f"{name}={list(values)}"


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


__all__ = ["MODES", "RowSource", "WriteMode", "WriteOutcome", "write_source", "write_table"]
