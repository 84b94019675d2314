"""The commands that make or change a table's rows: ``create``, ``write`` and ``delete``.

    mergetable create URI (--column 'NAME TYPE' ... | --like FILE) [--primary-key K[,K]] [--partition-by P[,P]]
                          [--option K=V ...] [--comment TEXT] [--if-not-exists]
    mergetable write URI FILE [FILE ...] [--format parquet|csv|json] [--mode append|overwrite|error|ignore]
                          [--partition K=V[,K=V]] [--cast] [--primary-key K[,K] [--partition-by P] [--option K=V]]
    mergetable delete URI (--filter EXPR ... | --all) [--dry-run]

``write`` reads Parquet, CSV or JSON Lines files (or directories of them) with pyarrow's dataset reader, a batch
at a time, and commits them as one snapshot through :func:`mergetable.from_data.write_source`, the steps of
``mt.write_table``: the same modes, checks and errors. When no table exists at ``URI``, it creates one from the
first file's schema (an append table without ``--primary-key``), as deltalake's ``write_deltalake`` does;
``--mode error`` refuses an existing table, ``--mode ignore`` leaves it untouched and ``--mode overwrite``
replaces all of its rows, or only those of the ``--partition K=V`` given. ``TYPE`` is a Paimon type string (``BIGINT``,
``DECIMAL(12, 2)``, ``STRING NOT NULL``); ``EXPR`` is the filter text of ``read --filter`` (``id>=5``).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.dataset as ds
import pyarrow.json as pajson

from mergetable.cli import alter
from mergetable.cli.errors import UsageError
from mergetable.cli.help import add_command
from mergetable.cli.output import Output
from mergetable.core.errors import SchemaError
from mergetable.core.read_options import parse_filter_text
from mergetable.core.schema import type_json_to_arrow
from mergetable.core.storage import key_values
from mergetable.from_data import write_source
from mergetable.table import Table, create_table

FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
"""Input formats by file extension (``--format`` names one for other names and for directories)."""
MODES = ("append", "overwrite", "error", "ignore")


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``create``, ``write`` and ``delete`` to the subcommands ``sub`` of the ``mergetable`` parser."""
    p = add_command(sub, "create", [common], "create an empty table (without --primary-key: an append table)")
    columns = p.add_mutually_exclusive_group(required=True)
    columns.add_argument(
        "--column", action="append", default=[], metavar="'NAME TYPE'", help="a column and its Paimon type"
    )
    columns.add_argument("--like", metavar="FILE", default=None, help="take the columns from a data file's schema")
    p.add_argument("--format", choices=sorted(set(FORMATS.values())), default=None, help="of --like (by extension)")
    _layout_options(p, required=False, creating=True)
    p.add_argument("--comment", default=None, help="free text stored with the schema")
    p.add_argument("--if-not-exists", action="store_true", help="succeed when a table with this key exists")
    p.set_defaults(run_at=_create)

    p = add_command(sub, "write", [common], "write rows from Parquet, CSV or JSON files as one snapshot")
    p.add_argument("files", nargs="+", metavar="FILE", help="local data files or directories of them")
    p.add_argument("--format", choices=sorted(set(FORMATS.values())), default=None, help="default: by extension")
    p.add_argument(
        "--mode",
        choices=MODES,
        default="append",
        help="append (default); overwrite (replace every row of the table, or only --partition's); "
        "error or ignore when the table exists: mt.write_table's modes",
    )
    p.add_argument("--partition", default=None, metavar="K=V[,K=V]", help="with --mode overwrite: only this one")
    p.add_argument("--cast", action="store_true", help="also casts that change values (text to numbers, rounding)")
    _layout_options(p, required=False)
    p.set_defaults(run_at=_write)

    p = add_command(sub, "delete", [common], "delete the rows matching a filter (one snapshot)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--filter", action="append", default=[], metavar="EXPR", help="e.g. 'id>=5' (repeatable, AND)")
    which.add_argument("--all", action="store_true", help="delete every row")
    p.add_argument("--dry-run", action="store_true", help="only count the rows that would be deleted")
    p.set_defaults(run=_delete)


def _layout_options(p: argparse.ArgumentParser, required: bool, creating: bool = False) -> None:
    when = "" if required or creating else " (when write creates the table)"
    keys = "key columns (none: an append table, rows kept as written)" if creating else "key columns" + when
    p.add_argument("--primary-key", required=required, default=None, metavar="K[,K]", help=keys)
    p.add_argument("--partition-by", default=None, metavar="P[,P]", help="partition columns" + when)
    p.add_argument("--option", action="append", default=[], metavar="K=V", help="table option" + when)


def _names(text: str | None) -> list[str]:
    return [c.strip() for c in text.split(",") if c.strip()] if text else []


# -- reading the input files ------------------------------------------------------------------------------
def input_format(path: str, given: str | None) -> str:
    """The format of the input ``path``: ``given``, else by its extension."""
    found = given or FORMATS.get(Path(path).suffix.lower())
    if found is None:
        raise UsageError(f"cannot tell the format of {path} from its extension: give --format")
    return found


def input_dataset(path: str, fmt: str, schema: pa.Schema | None = None) -> ds.Dataset:
    """The file (or directory) as a dataset; CSV and JSON columns the table has are parsed as its ``schema`` types."""
    file_format: ds.FileFormat | str = fmt
    if fmt == "csv" and schema is not None:
        file_format = ds.CsvFileFormat(convert_options=pacsv.ConvertOptions(column_types=_types(schema)))
    elif fmt == "json":
        explicit = None if schema is None else pa.schema([pa.field(f.name, f.type) for f in schema])
        parse = pajson.ParseOptions(explicit_schema=explicit, unexpected_field_behavior="infer")
        file_format = ds.JsonFileFormat(parse_options=parse)
    return ds.dataset(path, format=file_format)


def _types(schema: pa.Schema) -> dict[str, pa.DataType]:
    return {f.name: f.type for f in schema}


class InputFiles:
    """The rows of the input files, a batch at a time, file after file; counts the rows that went by (``count``).

    A :class:`~mergetable.from_data.RowSource`: ``write`` hands it to :func:`~mergetable.from_data.write_source`,
    the steps of ``mt.write_table``.
    """

    def __init__(self, paths: Sequence[str], fmt: str | None) -> None:
        self.paths = list(paths)
        self.formats = [input_format(p, fmt) for p in self.paths]
        for path in self.paths:
            if not Path(path).exists():
                raise UsageError(f"{path}: no such file or directory")
        self.count = 0

    def schema(self) -> pa.Schema:
        """The schema of the first file (what a table created from the files gets)."""
        return input_dataset(self.paths[0], self.formats[0]).schema

    def rows(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """Every file's batches, one at a time, text formats parsed with the table's ``schema`` types."""
        for path, fmt in zip(self.paths, self.formats, strict=True):
            for batch in input_dataset(path, fmt, schema).to_batches():
                self.count += batch.num_rows
                yield batch


# -- commands -------------------------------------------------------------------------------------------
def _columns(specs: Sequence[str]) -> pa.Schema:
    fields = []
    for spec in specs:
        name, _, type_text = spec.strip().partition(" ")
        if not name or not type_text.strip():
            raise UsageError(f"--column '{spec}': give a name and a Paimon type, e.g. --column 'id BIGINT'")
        try:
            arrow_type, nullable = type_json_to_arrow(type_text.strip())
        except SchemaError as exc:
            raise SchemaError(str(exc), name) from None
        fields.append(pa.field(name, arrow_type, nullable))
    return pa.schema(fields)


def _create_table(uri: str, storage: dict[str, Any] | None, schema: pa.Schema, args: argparse.Namespace) -> Table:
    return create_table(
        uri,
        schema,
        _names(args.primary_key),
        _names(args.partition_by),
        key_values(args.option, "option") or None,
        storage,
        getattr(args, "comment", None),
        exist_ok=getattr(args, "if_not_exists", False),
    )


def _create(uri: str, storage: dict[str, Any] | None, args: argparse.Namespace, out: Output) -> None:
    if args.like:
        schema = InputFiles([args.like], args.format).schema()
    else:
        schema = _columns(args.column)
    schema = _create_table(uri, storage, schema, args).table_schema
    text = f"table {uri}, schema {schema.id}: " + ", ".join(f"{f.name} {f.type}" for f in schema.fields)
    out.emit({"uri": uri, **alter.describe(schema)}, text)


def _write(uri: str, storage: dict[str, Any] | None, args: argparse.Namespace, out: Output) -> None:
    if args.partition and args.mode != "overwrite":
        raise UsageError("--partition only goes with --mode overwrite")
    data = InputFiles(args.files, args.format)
    done = write_source(
        uri,
        data,
        primary_key=_names(args.primary_key) or None,
        partition_by=_names(args.partition_by) or None,
        mode=args.mode,
        partition=key_values([args.partition], "partition") if args.partition else None,
        options=key_values(args.option, "option") or None,
        storage_options=storage,
        cast=args.cast,
        flags=True,
    )
    if done.result is None:
        out.emit({"snapshot": None, "rows": 0, "created": False, "skipped": True}, f"{uri} exists: nothing written")
        return
    snapshot = done.result.snapshot_id
    result = {
        "snapshot": snapshot,
        "rows": data.count,
        "files_added": done.result.num_added_files,
        "created": done.created,
        "mode": args.mode,
    }
    made = "created the table and " if done.created else ""
    where = f"snapshot {snapshot}" if snapshot is not None else "no snapshot (no rows)"
    out.emit(result, f"{made}wrote {data.count} row(s) from {len(args.files)} file(s) into {where}")


def _delete(table: Table, args: argparse.Namespace, out: Output) -> None:
    filters = [parse_filter_text(e) for e in args.filter] or None
    if args.dry_run:
        n = table.count(filters)
        out.emit({"dry_run": True, "rows": n}, f"would delete {n} row(s)")
        return
    done = table.delete(filters)
    rows = done.num_deleted_rows if done else 0
    data = {"dry_run": False, "snapshot": done.snapshot_id, "rows": rows}
    out.emit(data, f"deleted {rows} row(s) in snapshot {done.snapshot_id}" if done else "no row matched")
