"""``mergetable alter URI …``: schema evolution and option changes from the command line.

    mergetable alter URI add-column NAME TYPE [--first | --after COL] [--comment TEXT]
    mergetable alter URI drop-column NAME [NAME ...]
    mergetable alter URI rename-column OLD NEW
    mergetable alter URI change-type NAME TYPE
    mergetable alter URI set-option K=V [K=V ...]
    mergetable alter URI unset-option K [K ...]

``TYPE`` is a Paimon type string (``BIGINT``, ``DECIMAL(12, 2)``, ``TIMESTAMP(6)``). Each command is one
schema commit (``Table.alter``); the result is the new schema (``--json``: machine-readable).
"""

from __future__ import annotations

import argparse
from typing import Any

from mergetable.cli.help import add_command
from mergetable.cli.output import Output
from mergetable.core.errors import OptionsError, SchemaError
from mergetable.core.evolution import (
    AddColumn,
    DropColumn,
    RemoveOption,
    RenameColumn,
    SchemaChange,
    SetOption,
    UpdateColumnType,
)
from mergetable.core.schema import TableSchema, type_json_to_arrow
from mergetable.table import Table


def register(sub: Any, common: argparse.ArgumentParser) -> None:
    """Add the ``alter`` command to the subcommands ``sub`` of the ``mergetable`` parser."""
    p = add_command(sub, "alter", [common], "change the schema or the options (one schema commit)")
    changes = p.add_subparsers(dest="change", required=True, metavar="CHANGE")
    flags = argparse.ArgumentParser(add_help=False)  # --json is also accepted after the change's arguments
    flags.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print results as JSON")
    c = changes.add_parser("add-column", parents=[flags], help="add a nullable column")
    c.add_argument("name")
    c.add_argument("type", help="Paimon type, e.g. BIGINT or 'DECIMAL(12, 2)'")
    place = c.add_mutually_exclusive_group()
    place.add_argument("--first", action="store_true", help="as the first column")
    place.add_argument("--after", default=None, metavar="COL", help="after this column")
    c.add_argument("--comment", default=None)
    c = changes.add_parser("drop-column", parents=[flags], help="drop columns (not key or partition columns)")
    c.add_argument("names", nargs="+")
    c = changes.add_parser("rename-column", parents=[flags], help="rename a column (not a partition column)")
    c.add_argument("name")
    c.add_argument("new_name")
    c = changes.add_parser("change-type", parents=[flags], help="widen a column's type")
    c.add_argument("name")
    c.add_argument("type", help="Paimon type, e.g. BIGINT")
    c = changes.add_parser("set-option", parents=[flags], help="set table options")
    c.add_argument("pairs", nargs="+", metavar="K=V")
    c = changes.add_parser("unset-option", parents=[flags], help="reset table options to their defaults")
    c.add_argument("keys", nargs="+", metavar="K")
    p.set_defaults(run=run)


def _type(text: str, column: str) -> Any:
    try:
        return type_json_to_arrow(text)[0]
    except SchemaError as exc:
        raise SchemaError(str(exc), column) from None


def changes_of(args: argparse.Namespace) -> list[SchemaChange]:
    """The schema changes an ``alter`` command line asks for."""
    kind = args.change
    if kind == "add-column":
        return [AddColumn(args.name, _type(args.type, args.name), args.comment, args.first, args.after)]
    if kind == "drop-column":
        return [DropColumn(n) for n in args.names]
    if kind == "rename-column":
        return [RenameColumn(args.name, args.new_name)]
    if kind == "change-type":
        return [UpdateColumnType(args.name, _type(args.type, args.name))]
    if kind == "set-option":
        return [_set(pair) for pair in args.pairs]
    return [RemoveOption(k) for k in args.keys]


def _set(pair: str) -> SetOption:
    """``K=V`` (the value may hold commas and '=': ``fields.g.sequence-group=a,b``)."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise OptionsError("set-option", f"'{pair}' is not of the form key=value")
    return SetOption(key.strip(), value.strip())


def run(table: Table, args: argparse.Namespace, out: Output) -> None:
    schema = table.alter.apply(changes_of(args))
    out.emit(describe(schema), f"schema {schema.id}: " + ", ".join(f"{f.name} {f.type}" for f in schema.fields))


def describe(schema: TableSchema) -> dict[str, Any]:
    return {
        "schema_id": schema.id,
        "fields": [{"id": f.id, "name": f.name, "type": f.type, "comment": f.description} for f in schema.fields],
        "primary_keys": list(schema.primary_keys),
        "partition_keys": list(schema.partition_keys),
        "options": schema.options,
    }
