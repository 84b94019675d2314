"""The commands that answer a question about a table: ``count``, ``history`` and ``schema``.

    mergetable count URI [--filter EXPR ...] [--snapshot N | --tag T | --timestamp T | --version V]
    mergetable history URI [--limit N] [--no-compaction]
    mergetable schema URI [--snapshot N | --tag T]

``count`` counts merged rows (from file metadata where it can, as ``Table.count``); ``history`` is
``Table.history()`` (newest first); ``schema`` lists the columns with their Paimon types and roles.
"""

from __future__ import annotations

import argparse
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.cli import alter
from mergetable.cli.help import add_command
from mergetable.cli.output import Output
from mergetable.cli.rows import non_negative_int
from mergetable.core.read_options import parse_filter_text
from mergetable.table import Table

HISTORY_COLUMNS = ("version", "timestamp", "operation", "total_record_count", "delta_record_count", "added_files")
"""The columns of ``history`` as text (``--json`` prints every column of ``Table.history()``)."""


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add ``count``, ``history`` and ``schema`` to the subcommands ``sub`` of the ``mergetable`` parser."""
    p = add_command(sub, "count", [common], "count the rows (matching filters) of a snapshot")
    p.add_argument("--filter", action="append", default=[], metavar="EXPR", help="e.g. 'id>=5' (repeatable, AND)")
    p.add_argument("--snapshot", type=int, default=None, help="time travel to a snapshot id")
    p.add_argument("--tag", default=None, help="time travel to a tag")
    p.add_argument("--timestamp", default=None, help="time travel to epoch millis or an ISO-8601 time")
    p.add_argument("--version", default=None, help="time travel to a tag name, else a snapshot id")
    p.set_defaults(run=_count)

    p = add_command(sub, "history", [common], "the table's commits, newest first")
    p.add_argument("--limit", type=non_negative_int, default=None, help="only the newest N")
    p.add_argument("--no-compaction", dest="compaction", action="store_false", help="leave out the COMPACT snapshots")
    p.set_defaults(run=_history)

    p = add_command(sub, "schema", [common], "the columns, their types, the key and the partitioning")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--snapshot", type=int, default=None, help="the schema a snapshot was written with")
    when.add_argument("--tag", default=None, help="the schema a tag's snapshot was written with")
    p.set_defaults(run=_schema)


def _count(table: Table, args: argparse.Namespace, out: Output) -> None:
    filters = [parse_filter_text(e) for e in args.filter] or None
    n = table.count(filters, snapshot_id=args.snapshot, tag=args.tag, timestamp_ms=args.timestamp, version=args.version)
    out.emit({"count": n}, str(n))


def history_rows(table: Table, limit: int | None, compaction: bool) -> pa.Table:
    """``Table.history()``, without the COMPACT snapshots unless ``compaction``, cut to the newest ``limit``."""
    rows = table.history(limit if compaction else None)
    if not compaction:
        rows = rows.filter(pc.not_equal(rows["commit_kind"], "COMPACT"))
        rows = rows if limit is None else rows.slice(0, limit)
    return rows


def _history(table: Table, args: argparse.Namespace, out: Output) -> None:
    rows = history_rows(table, args.limit, args.compaction).to_pylist()
    for row in rows:
        row["properties"] = dict(row["properties"] or [])
    headers = list(HISTORY_COLUMNS)
    out.table(headers, [[r[h] for h in headers] for r in rows], rows)


def _schema(table: Table, args: argparse.Namespace, out: Output) -> None:
    schema = table.table_schema
    if args.snapshot is not None or args.tag is not None:
        snap = table.resolve_snapshot(snapshot_id=args.snapshot, tag=args.tag)
        schema = schema if snap is None else table.as_of_schema(snap.schema_id).table_schema
    rows = [
        [
            f.name,
            f.type if isinstance(f.type, str) else str(f.type.get("type")),
            "key" if f.name in schema.primary_keys else "",
            "partition" if f.name in schema.partition_keys else "",
            f.description or "",
        ]
        for f in schema.fields
    ]
    if out.as_json:
        out.emit(alter.describe(schema))
        return
    out.table(["column", "type", "key", "partition", "comment"], rows)
