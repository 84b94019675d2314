"""Schema evolution: the changes a table's schema accepts and the schema they produce (Paimon's rules).

A change list is applied to the latest :class:`TableSchema` by :func:`apply_changes`, which returns the
next schema (id + 1) or raises naming the culprit. Field ids are stable: an added column takes
``highestFieldId + 1``, a renamed column keeps its id, a dropped id is never reused. Data files keep the
schema id they were written with and are read into a later schema by field id
(:mod:`mergetable.read.projection`).

Rules (Paimon's ``SchemaManager``; see ``docs/evolution.md``):

* add: nullable only; the name must be new; at the end, first, or after a column;
* drop: never a primary-key or partition column, never the last column; the column's own
  ``fields.<col>.*`` options go with it;
* rename: never a partition column (its name is in every directory), never onto an existing name; the
  options naming the column follow it (``bucket-key``, ``sequence.field``, ``fields.<col>.*``,
  ``fields.<a,b>.sequence-group`` keys and values, ...);
* type: never a primary-key or partition column; only Paimon's implicit casts (:func:`is_widening`);
* nullability: a column can become nullable (not a primary-key column), never NOT NULL;
* options: unknown keys are refused as at create; once the table has a snapshot, the options that fix
  how stored data is laid out or merged cannot change (:data:`IMMUTABLE_OPTIONS`).
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

import pyarrow as pa

from mergetable.core.errors import SchemaChangeError
from mergetable.core.option_changes import IMMUTABLE_OPTIONS, check_option_change, own_field_key, rename_options
from mergetable.core.options import TableOptions
from mergetable.core.schema import (
    RESERVED_PREFIXES,
    DataField,
    TableSchema,
    arrow_to_type_json,
    check_column,
    normalize_arrow_type,
    type_json_to_arrow,
)


@dataclass(frozen=True)
class AddColumn:
    """A new nullable column, at the end unless ``first`` or ``after`` places it."""

    name: str
    type: pa.DataType
    comment: str | None = None
    first: bool = False
    after: str | None = None


@dataclass(frozen=True)
class DropColumn:
    name: str


@dataclass(frozen=True)
class RenameColumn:
    name: str
    new_name: str


@dataclass(frozen=True)
class UpdateColumnType:
    """Widen a column's type (its nullability is kept)."""

    name: str
    type: pa.DataType


@dataclass(frozen=True)
class UpdateColumnNullability:
    name: str
    nullable: bool


@dataclass(frozen=True)
class UpdateColumnComment:
    name: str
    comment: str | None


@dataclass(frozen=True)
class SetOption:
    key: str
    value: str


@dataclass(frozen=True)
class RemoveOption:
    key: str


@dataclass(frozen=True)
class UpdateComment:
    comment: str | None


SchemaChange = (
    AddColumn
    | DropColumn
    | RenameColumn
    | UpdateColumnType
    | UpdateColumnNullability
    | UpdateColumnComment
    | SetOption
    | RemoveOption
    | UpdateComment
)

_WIDER_INTS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}
_INT_DIGITS = {pa.int8(): 3, pa.int16(): 5, pa.int32(): 10, pa.int64(): 19}
"""Decimal digits of the largest value of each integer type."""
_TIME_UNITS = ["s", "ms", "us", "ns"]


def is_widening(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether a column of type ``old`` may become ``new``: Paimon's implicit casts (``DataTypeCasts``).

    tinyint → smallint → int → bigint; any integer, float or decimal → float or double (float → double
    only); any integer → a decimal that holds all its values; a decimal → a decimal with as many integer
    and fraction digits; a timestamp to a finer unit with the same zone; and any type to itself. Paimon
    also lets a decimal take a float or narrower decimal and a date take a timestamp: those can fail or
    truncate when old files are read, so they are refused here.

    Example:
        >>> is_widening(pa.int32(), pa.int64()), is_widening(pa.int64(), pa.int32())
        (True, False)
        >>> is_widening(pa.decimal128(10, 2), pa.decimal128(12, 2)), is_widening(pa.float32(), pa.float64())
        (True, True)
        >>> is_widening(pa.int32(), pa.float64()), is_widening(pa.int32(), pa.decimal128(12, 2))
        (True, True)
        >>> is_widening(pa.int64(), pa.decimal128(12, 2)), is_widening(pa.float64(), pa.float32())
        (False, False)
    """
    if old == new:
        return True
    if old in _WIDER_INTS and new in _WIDER_INTS:
        return _WIDER_INTS[old] < _WIDER_INTS[new]
    if new in (pa.float32(), pa.float64()):
        numeric = old in _WIDER_INTS or pa.types.is_decimal(old)
        return numeric or (old == pa.float32() and new == pa.float64())
    if pa.types.is_decimal(new):
        if old in _WIDER_INTS:
            return bool(new.precision - new.scale >= _INT_DIGITS[old])
        if pa.types.is_decimal(old):
            return bool(new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale)
        return False
    if pa.types.is_timestamp(old) and pa.types.is_timestamp(new):
        return bool(old.tz == new.tz and _TIME_UNITS.index(old.unit) < _TIME_UNITS.index(new.unit))
    return False


def read_cast(column: pa.ChunkedArray | pa.Array, to: pa.DataType) -> pa.ChunkedArray | pa.Array:
    """A column of an older file as the type :func:`is_widening` let it become.

    An integer or decimal becoming a float rounds to the nearest float, as Paimon's cast does (a checked cast
    would refuse integers beyond 2**53); every other widening is exact and checked.

    Example:
        >>> read_cast(pa.array([2**53 + 1], pa.int64()), pa.float64()).to_pylist()
        [9007199254740992.0]
    """
    return column.cast(to, safe=not pa.types.is_floating(to))


def apply_changes(
    schema: TableSchema, changes: list[SchemaChange], has_snapshots: bool, allow: Collection[str] = ()
) -> TableSchema:
    """The schema after ``changes`` (id + 1), or an error naming the culprit; ``schema`` is not modified.

    ``has_snapshots``: whether the table holds data (immutable options may change only before it does);
    ``allow``: immutable options that may change anyway (a rescale rewrites the data for its ``bucket``).

    Raises:
        SchemaChangeError: A column change breaks a rule (names the column).
        ImmutableOptionError: An option that cannot change after the table has data.
        OptionsError, SchemaError: The resulting options are invalid (unknown key, dangling column).

    Example:
        >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("v", pa.int32())]), ["id"])
        >>> n = apply_changes(s, [RenameColumn("v", "w"), UpdateColumnType("w", pa.int64())], has_snapshots=True)
        >>> n.id, [(f.id, f.name, f.type) for f in n.fields]
        (1, [(0, 'id', 'BIGINT NOT NULL'), (1, 'w', 'BIGINT')])
    """
    fields = list(schema.fields)
    highest = schema.highest_field_id
    options = dict(schema.options)
    comment = schema.comment
    renames: dict[str, str] = {}
    for change in changes:
        if isinstance(change, SetOption):
            held = has_snapshots and change.key not in allow
            check_option_change(options, change.key, change.value, held, schema.is_append_table)
            options[change.key] = change.value
        elif isinstance(change, RemoveOption):
            check_option_change(options, change.key, None, has_snapshots, schema.is_append_table)
            options.pop(change.key, None)
        elif isinstance(change, UpdateComment):
            comment = change.comment
        elif isinstance(change, AddColumn):
            highest += 1
            fields = _add(fields, change, highest)
        elif isinstance(change, DropColumn):
            _index(fields, change.name)
            if change.name in schema.primary_keys or change.name in schema.partition_keys:
                raise SchemaChangeError("a partition key or primary key column cannot be dropped", change.name)
            fields = [f for f in fields if f.name != change.name]
            if not fields:
                raise SchemaChangeError("the last column of a table cannot be dropped", change.name)
            options = {k: v for k, v in options.items() if not own_field_key(k, change.name)}
        elif isinstance(change, RenameColumn):
            fields = _rename(fields, schema, change)
            renames = {old: (change.new_name if new == change.name else new) for old, new in renames.items()}
            renames.setdefault(change.name, change.new_name)
            options = rename_options(options, change.name, change.new_name)
        elif isinstance(change, UpdateColumnType):
            fields = _update_type(fields, schema, change)
        elif isinstance(change, UpdateColumnNullability):
            fields = _update_nullability(fields, schema, change)
        else:
            i = _index(fields, change.name)
            fields[i] = fields[i].model_copy(update={"description": change.comment})
    out = TableSchema(
        id=schema.id + 1,
        fields=tuple(fields),
        highest_field_id=highest,
        partition_keys=schema.partition_keys,
        primary_keys=tuple(_renamed(k, renames) for k in schema.primary_keys),
        options=TableOptions.from_map(options).to_map(),
        comment=comment,
        time_millis=int(time.time() * 1000),
        table_uuid=schema.table_uuid,
    )
    out.validate_options()
    return out


def merge_changes(schema: TableSchema, incoming: pa.Schema, widen: bool) -> list[SchemaChange]:
    """The changes that let data of schema ``incoming`` be written (Paimon's ``SchemaMergingUtils``).

    Columns the table lacks are added (nullable, at the end, in the data's order). With ``widen``, a column
    whose incoming type is wider (:func:`is_widening`) takes that type; otherwise types are left for the
    write to check. Names are compared exactly (callers map case first).

    Example:
        >>> s = TableSchema.create(pa.schema([("id", pa.int64()), ("v", pa.int32())]), ["id"])
        >>> changes = merge_changes(s, pa.schema([("id", pa.int64()), ("v", pa.int64()), ("w", pa.string())]), True)
        >>> [(type(c).__name__, c.name, str(c.type)) for c in changes]
        [('UpdateColumnType', 'v', 'int64'), ('AddColumn', 'w', 'string')]
    """
    current = schema.arrow_schema
    out: list[SchemaChange] = []
    for f in incoming:
        t = normalize_arrow_type(f.type)
        if f.name not in current.names:
            out.append(AddColumn(f.name, t))
        elif widen and f.name not in schema.primary_keys:
            have = current.field(f.name).type
            if have != t and is_widening(have, t):
                out.append(UpdateColumnType(f.name, t))
    return out


def _renamed(name: str, renames: dict[str, str]) -> str:
    return renames.get(name, name)


def _index(fields: list[DataField], name: str) -> int:
    names = [f.name for f in fields]
    return names.index(check_column(name, names, error=SchemaChangeError))


def _check_new_name(fields: list[DataField], name: str) -> None:
    if any(f.name == name for f in fields):
        raise SchemaChangeError("a column of that name already exists in the table", name)
    if not name or name.startswith(RESERVED_PREFIXES):
        raise SchemaChangeError(f"column names starting with {RESERVED_PREFIXES} (or empty) are reserved", name)


def _add(fields: list[DataField], change: AddColumn, field_id: int) -> list[DataField]:
    _check_new_name(fields, change.name)
    t = normalize_arrow_type(change.type)
    field = DataField(id=field_id, name=change.name, type=arrow_to_type_json(t, True, change.name))
    if change.comment is not None:
        field = field.model_copy(update={"description": change.comment})
    if change.first and change.after is not None:
        raise SchemaChangeError("give either first or after, not both", change.name)
    if change.first:
        return [field, *fields]
    if change.after is not None:
        i = _index(fields, change.after)
        return [*fields[: i + 1], field, *fields[i + 1 :]]
    return [*fields, field]


def _rename(fields: list[DataField], schema: TableSchema, change: RenameColumn) -> list[DataField]:
    i = _index(fields, change.name)
    if change.name in schema.partition_keys:
        raise SchemaChangeError("a partition column cannot be renamed (its name is in every directory)", change.name)
    if change.new_name == change.name:
        return fields
    _check_new_name(fields, change.new_name)
    out = list(fields)
    out[i] = fields[i].model_copy(update={"name": change.new_name})
    return out


def _update_type(fields: list[DataField], schema: TableSchema, change: UpdateColumnType) -> list[DataField]:
    i = _index(fields, change.name)
    if change.name in schema.partition_keys:
        raise SchemaChangeError("the type of a partition column cannot be changed", change.name)
    if change.name in schema.primary_keys:
        raise SchemaChangeError("the type of a primary key column cannot be changed", change.name)
    old, nullable = type_json_to_arrow(fields[i].type)
    new = normalize_arrow_type(change.type)
    if not is_widening(old, new):
        raise SchemaChangeError(
            f"type {old} cannot be converted to {new} without losing information (only widening is allowed)",
            change.name,
        )
    out = list(fields)
    out[i] = fields[i].model_copy(update={"type": arrow_to_type_json(new, nullable, change.name)})
    return out


def _update_nullability(
    fields: list[DataField], schema: TableSchema, change: UpdateColumnNullability
) -> list[DataField]:
    i = _index(fields, change.name)
    t, nullable = type_json_to_arrow(fields[i].type)
    if change.nullable == nullable:
        return fields
    if change.name in schema.primary_keys:
        raise SchemaChangeError("the nullability of a primary key column cannot be changed", change.name)
    if not change.nullable:
        raise SchemaChangeError(
            "a nullable column cannot become NOT NULL (stored rows may hold nulls)",
            change.name,
        )
    out = list(fields)
    out[i] = fields[i].model_copy(update={"type": arrow_to_type_json(t, True, change.name)})
    return out


__all__ = [
    "IMMUTABLE_OPTIONS",
    "AddColumn",
    "DropColumn",
    "RemoveOption",
    "RenameColumn",
    "SchemaChange",
    "SetOption",
    "UpdateColumnComment",
    "UpdateColumnNullability",
    "UpdateColumnType",
    "UpdateComment",
    "apply_changes",
    "is_widening",
    "merge_changes",
    "read_cast",
]
