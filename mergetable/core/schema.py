"""Table schema: persisted ``schema/schema-N`` model, Paimon type strings and Arrow conversion.

Types are written as Paimon type strings (``BIGINT NOT NULL``, ``DECIMAL(10, 2)``, ``TIMESTAMP(6)``,
``TIMESTAMP(6) WITH LOCAL TIME ZONE``); nested types are JSON objects (``{"type": "ARRAY", "element": …}``,
``MAP`` with ``key``/``value``, ``ROW`` with ``fields``). Every Arrow type that has a Paimon counterpart
round-trips; ``large_*`` and dictionary types are normalised to their plain forms.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import pyarrow as pa

from mergetable.core import arguments
from mergetable.core.append import append_defaults, check_append_options, check_key_table_options, key_table_defaults
from mergetable.core.errors import OptionsError, SchemaError, UnsupportedError
from mergetable.core.model import JsonModel, Versioned
from mergetable.core.option_map import did_you_mean
from mergetable.core.options import TableOptions, normalize_option_keys

SEQUENCE_NUMBER = "_SEQUENCE_NUMBER"
VALUE_KIND = "_VALUE_KIND"
SYSTEM_COLUMNS = (SEQUENCE_NUMBER, VALUE_KIND)
RESERVED_PREFIXES = ("_KEY_", "_SEQUENCE_NUMBER", "_VALUE_KIND", "_ROW_KIND", "_row_kind")

TypeJson = str | dict[str, Any]

_SIMPLE = {
    pa.bool_(): "BOOLEAN",
    pa.int8(): "TINYINT",
    pa.int16(): "SMALLINT",
    pa.int32(): "INT",
    pa.int64(): "BIGINT",
    pa.float32(): "FLOAT",
    pa.float64(): "DOUBLE",
    pa.string(): "STRING",
    pa.binary(): "BYTES",
    pa.date32(): "DATE",
}
_SIMPLE_BACK = {v: k for k, v in _SIMPLE.items()}
_UNIT_PRECISION = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_PRECISION_UNIT = {0: "s", 3: "ms", 6: "us", 9: "ns"}


def normalize_arrow_type(t: pa.DataType) -> pa.DataType:
    """Plain form of an Arrow type: large/view/dictionary variants replaced recursively."""
    if pa.types.is_dictionary(t):
        return normalize_arrow_type(t.value_type)
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return pa.list_(normalize_arrow_type(t.value_field.type))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(normalize_arrow_type(t.value_type))
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(normalize_arrow_type(t.value_field.type)))
    if pa.types.is_map(t):
        return pa.map_(normalize_arrow_type(t.key_type), t.item_field.with_type(normalize_arrow_type(t.item_type)))
    if pa.types.is_struct(t):
        return pa.struct([f.with_type(normalize_arrow_type(f.type)) for f in t])
    return t


def arrow_to_type_json(t: pa.DataType, nullable: bool = True, column: str = "?") -> TypeJson:
    """Paimon type JSON for an Arrow type (``column`` only names the culprit in errors)."""
    t = normalize_arrow_type(t)
    suffix = "" if nullable else " NOT NULL"
    if t in _SIMPLE:
        return _SIMPLE[t] + suffix
    if pa.types.is_decimal128(t):
        return f"DECIMAL({t.precision}, {t.scale}){suffix}"
    if pa.types.is_fixed_size_binary(t):
        return f"BINARY({t.byte_width}){suffix}"
    if pa.types.is_time(t):
        return f"TIME({_UNIT_PRECISION[t.unit]}){suffix}"
    if pa.types.is_timestamp(t):
        p = _UNIT_PRECISION[t.unit]
        if t.tz is None:
            return f"TIMESTAMP({p}){suffix}"
        if t.tz.upper() in ("UTC", "+00:00", "Z"):
            return f"TIMESTAMP({p}) WITH LOCAL TIME ZONE{suffix}"
        return {"type": f"TIMESTAMP({p}) WITH LOCAL TIME ZONE{suffix}", "timezone": t.tz}
    if pa.types.is_list(t):
        el = t.value_field
        return {"type": "ARRAY" + suffix, "element": arrow_to_type_json(el.type, el.nullable, column)}
    if pa.types.is_map(t):
        return {
            "type": "MAP" + suffix,
            "key": arrow_to_type_json(t.key_type, False, column),
            "value": arrow_to_type_json(t.item_type, t.item_field.nullable, column),
        }
    if pa.types.is_struct(t):
        return {
            "type": "ROW" + suffix,
            "fields": [
                {"id": i, "name": f.name, "type": arrow_to_type_json(f.type, f.nullable, column)}
                for i, f in enumerate(t)
            ],
        }
    raise UnsupportedError(f"column '{column}': Arrow type {t} has no Paimon counterpart")


_PARAM = re.compile(r"^(\w+)\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\)$")


def type_json_to_arrow(tj: TypeJson) -> tuple[pa.DataType, bool]:
    """Arrow type and nullability for Paimon type JSON."""
    if isinstance(tj, dict):
        head = str(tj["type"])
        nullable = not head.upper().endswith(" NOT NULL")
        base = head.upper().removesuffix(" NOT NULL").strip()
        if base == "ARRAY":
            el, el_null = type_json_to_arrow(tj["element"])
            return pa.list_(pa.field("item", el, el_null)), nullable
        if base == "MAP":
            k, _ = type_json_to_arrow(tj["key"])
            v, v_null = type_json_to_arrow(tj["value"])
            return pa.map_(k, pa.field("value", v, v_null)), nullable
        if base == "ROW":
            fields = []
            for f in tj["fields"]:
                ft, fn = type_json_to_arrow(f["type"])
                fields.append(pa.field(f["name"], ft, fn))
            return pa.struct(fields), nullable
        t, _ = type_json_to_arrow(base)
        if pa.types.is_timestamp(t) and "timezone" in tj:
            t = pa.timestamp(t.unit, tz=str(tj["timezone"]))
        return t, nullable
    text = tj.strip()
    nullable = not text.upper().endswith(" NOT NULL")
    base = text.upper().removesuffix(" NOT NULL").strip()
    if base in _SIMPLE_BACK:
        return _SIMPLE_BACK[base], nullable
    if base in ("VARCHAR(2147483647)",):
        return pa.string(), nullable
    if base in ("VARBINARY(2147483647)",):
        return pa.binary(), nullable
    ltz = base.endswith("WITH LOCAL TIME ZONE")
    m = _PARAM.match(base.removesuffix("WITH LOCAL TIME ZONE").strip())
    if m:
        name, a, b = m.group(1), int(m.group(2)), m.group(3)
        if name == "DECIMAL":
            return pa.decimal128(a, int(b or 0)), nullable
        if name == "BINARY":
            return pa.binary(a), nullable
        if name in ("TIME", "TIMESTAMP") and a in _PRECISION_UNIT:
            unit = _PRECISION_UNIT[a]
            if name == "TIME":
                return (pa.time32(unit) if unit in ("s", "ms") else pa.time64(unit)), nullable
            return pa.timestamp(unit, tz="UTC" if ltz else None), nullable
    raise SchemaError(f"unknown or unsupported type '{tj}'")


def check_column(
    name: str, columns: Sequence[str], what: str = "column", error: type[SchemaError] = SchemaError
) -> str:
    """``name`` when it is one of ``columns`` (a table's); else ``error`` naming it, listing the columns and
    suggesting the nearest. The one check of "is this a column of the table".

    >>> check_column("amount", ["id", "amount"])
    'amount'
    >>> check_column("amout", ["id", "amount"], "filter column")
    Traceback (most recent call last):
    ...
    mergetable.core.errors.SchemaError: column 'amout': filter column is not in the table schema ['id', 'amount'] \
(did you mean 'amount'?)
    """
    if name in columns:
        return name
    raise error(f"{what} is not in the table schema {list(columns)}{did_you_mean(str(name), columns)}", str(name))


class DataField(JsonModel):
    id: int
    name: str
    type: TypeJson
    description: str | None = None


class TableSchema(Versioned):
    """Persisted as ``schema/schema-<id>``."""

    id: int = 0
    fields: tuple[DataField, ...]
    highest_field_id: int
    partition_keys: tuple[str, ...] = ()
    primary_keys: tuple[str, ...]
    options: dict[str, str]
    comment: str | None = None
    time_millis: int
    table_uuid: str | None = None
    """The table's identity, written at creation and carried by every later schema (absent in tables
    created before it existed; :func:`mergetable.commit.schemas.table_identity` derives one for those)."""

    @classmethod
    def create(
        cls,
        schema: pa.Schema,
        primary_key: Sequence[str] | None,
        partition_keys: Sequence[str] | None = (),
        options: dict[str, str] | None = None,
        comment: str | None = None,
    ) -> TableSchema:
        """Validate a user schema and options into schema 0 (no primary key: an append table, see
        :mod:`mergetable.core.append`)."""
        schema = arguments.arrow_schema(schema)
        pk = arguments.name_list(primary_key, "primary_key", allow_none=True)
        parts = arguments.name_list(partition_keys, "partition_keys", allow_none=True)
        opts = TableOptions.from_map(key_table_defaults(options) if pk else append_defaults(options))
        names = [f.name for f in schema]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise SchemaError("column is defined twice", dup)
        for n in names:
            if n.startswith(RESERVED_PREFIXES):
                raise SchemaError(f"column names starting with {RESERVED_PREFIXES} are reserved", n)
        for kind, cols in (("primary key", pk), ("partition key", parts)):
            for c in cols:
                check_column(c, names, f"{kind} column")
            if len(set(cols)) != len(cols):
                raise SchemaError(f"{kind} lists a column twice: {list(cols)}")
        missing = [p for p in parts if p not in pk]
        if pk and missing and opts.bucket != -1:
            raise OptionsError(
                "bucket",
                f"primary key {list(pk)} lacks partition key(s) {missing}: a cross-partition upsert table (a key "
                "moves between partitions) places each key through an index of the whole table, which only "
                f"dynamic bucket mode (bucket = -1, the default) keeps; got bucket = {opts.bucket}",
            )
        if pk and set(pk) == set(parts):
            raise SchemaError(f"primary key {list(pk)} must not be the same as the partition keys")
        fields = []
        for i, f in enumerate(schema):
            t = normalize_arrow_type(f.type)
            nullable = f.nullable and f.name not in pk
            if f.name in parts and not _is_partition_type(t):
                raise SchemaError(f"type {t} cannot be a partition key", f.name)
            if f.name in pk and not _is_key_type(t):
                raise SchemaError(f"type {t} cannot be part of a primary key", f.name)
            fields.append(DataField(id=i, name=f.name, type=arrow_to_type_json(t, nullable, f.name)))
        out = cls(
            id=0,
            fields=tuple(fields),
            highest_field_id=len(fields) - 1,
            partition_keys=parts,
            primary_keys=pk,
            options=opts.to_map(),
            comment=comment,
            time_millis=int(time.time() * 1000),
            table_uuid=uuid.uuid4().hex,
        )
        out.validate_options()
        return out

    def validate_options(self) -> None:
        """Check option references against the columns (merge-engine specifics are checked by the engine)."""
        opts = self.table_options
        names = self.column_names
        trimmed = self.trimmed_primary_keys
        if self.is_append_table:
            check_append_options(opts, names, self.partition_keys)
        for c in opts.bucket_key if trimmed else ():
            check_column(c, names, "bucket-key column")
            if c not in trimmed:
                raise SchemaError(
                    f"bucket-key must be a subset of the primary key without partition keys {list(trimmed)}", c
                )
        if not self.is_append_table:
            check_key_table_options(opts)
        seen: set[str] = set()
        for c in opts.sequence_field:
            if c not in names:
                raise SchemaError(f"Sequence field: '{c}' can not be found in table schema.", c)
            if c in seen:
                raise SchemaError(f"Sequence field '{c}' is defined repeatedly.", c)
            seen.add(c)
        if opts.rowkind_field is not None:
            check_column(opts.rowkind_field, names, "rowkind.field column")
            if self.arrow_type(opts.rowkind_field) != pa.string():
                raise SchemaError("rowkind.field must be a STRING column", opts.rowkind_field)

    # -- derived views (not persisted) ----------------------------------------------------------
    @cached_property
    def table_options(self) -> TableOptions:
        """The options this version knows (see :attr:`unknown_options` for the others)."""
        unknown = set(self.unknown_options)
        return TableOptions.from_map({k: v for k, v in self.options.items() if k not in unknown})

    @cached_property
    def unknown_options(self) -> tuple[str, ...]:
        """Stored options this version does not know: a newer writer's. Reads go on without them; writes are
        refused (:meth:`check_writable`), since what they promise cannot be kept.

        >>> schema = TableSchema.create(pa.schema([("k", pa.int64())]), ["k"])
        >>> options = {**schema.options, "future.option": "on"}
        >>> newer = TableSchema.model_validate({**schema.model_dump(), "options": options})
        >>> newer.unknown_options, newer.table_options.bucket
        (('future.option',), -1)
        """
        return unknown_option_keys(self.options)

    def check_writable(self) -> None:
        """Refuse to change a table whose schema holds options this version does not know.

        Raises:
            UnsupportedError: Naming the options and what to do.
        """
        if self.unknown_options:
            raise UnsupportedError(
                f"schema {self.id} holds option(s) {', '.join(self.unknown_options)} that this mergetable "
                "does not know (a newer version wrote them); it reads the table without them but does not "
                "change it, since a change could break what they promise: upgrade mergetable to write"
            )

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The user-facing Arrow schema (primary-key columns are non-nullable)."""
        out = []
        for f in self.fields:
            t, nullable = type_json_to_arrow(f.type)
            out.append(pa.field(f.name, t, nullable))
        return pa.schema(out)

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    @property
    def is_append_table(self) -> bool:
        """Whether the table has no primary key: an append table (rows kept as written, no merge).

        >>> TableSchema.create(pa.schema([("event", pa.string())]), None).is_append_table
        True
        """
        return not self.primary_keys

    @property
    def is_dynamic_bucket(self) -> bool:
        """A primary-key table in dynamic bucket mode (``bucket`` -1): keys are placed by its HASH index."""
        return bool(self.primary_keys) and self.table_options.bucket == -1

    @property
    def is_cross_partition(self) -> bool:
        """A cross-partition upsert table: a primary key without every partition key (always dynamic bucket
        mode), so a key may move between partitions (:mod:`mergetable.write.cross_partition`).

        >>> s = pa.schema([("id", pa.int64()), ("dt", pa.string())])
        >>> TableSchema.create(s, ["id"], ["dt"]).is_cross_partition
        True
        >>> TableSchema.create(s, ["id"], ["dt"], options={"bucket": "2"})
        Traceback (most recent call last):
        mergetable.core.errors.OptionsError: option 'bucket': primary key ['id'] lacks partition key(s) ['dt']: ...
        """
        return bool(self.primary_keys) and any(p not in self.primary_keys for p in self.partition_keys)

    @cached_property
    def trimmed_primary_keys(self) -> tuple[str, ...]:
        """The key stored and merged on: the primary key without partition keys."""
        return tuple(k for k in self.primary_keys if k not in self.partition_keys)

    @cached_property
    def bucket_keys(self) -> tuple[str, ...]:
        return self.table_options.bucket_key or self.trimmed_primary_keys

    @cached_property
    def file_schema(self) -> pa.Schema:
        """Schema of key-value data files: key columns, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND``, other columns.

        Value columns are nullable in files even when the table declares them NOT NULL: a retract record
        (-U/-D) needs only its key. An append table's files hold the table's columns only, as declared.
        """
        arrow = self.arrow_schema
        if self.is_append_table:
            return arrow
        keys = [arrow.field(k) for k in self.trimmed_primary_keys]
        rest = [f.with_nullable(True) for f in arrow if f.name not in self.trimmed_primary_keys]
        system = [pa.field(SEQUENCE_NUMBER, pa.int64(), False), pa.field(VALUE_KIND, pa.int8(), False)]
        return pa.schema(keys + system + rest)

    def field(self, column: str, what: str = "column") -> DataField:
        """The field of ``column``; :class:`SchemaError` naming it (see :func:`check_column`) when there is none."""
        return self.fields[self.column_names.index(check_column(column, self.column_names, what))]

    def arrow_type(self, column: str) -> pa.DataType:
        return self.arrow_schema.field(check_column(column, self.column_names)).type

    def with_options(self, options: dict[str, str]) -> TableSchema:
        """A copy with ``options`` over the stored ones (validated; derived views are recomputed, not copied)."""
        merged = TableOptions.from_map({**self.options, **options}).to_map()
        return TableSchema.model_validate({**self.model_dump(), "options": merged})


def _is_partition_type(t: pa.DataType) -> bool:
    return not (pa.types.is_nested(t) or pa.types.is_floating(t) or pa.types.is_binary(t))


def _is_key_type(t: pa.DataType) -> bool:
    return not pa.types.is_nested(t)


def unknown_option_keys(options: dict[str, str]) -> tuple[str, ...]:
    """The keys of ``options`` that name no option of :class:`TableOptions` (``fields.*`` keys excepted)."""
    known = {info.alias or name for name, info in TableOptions.model_fields.items()} - {"field-options"}
    out = []
    for key, value in options.items():
        plain, _ = normalize_option_keys({key: value})
        if plain and next(iter(plain)) not in known:
            out.append(key)
    return tuple(out)


__all__ = [
    "SEQUENCE_NUMBER",
    "SYSTEM_COLUMNS",
    "VALUE_KIND",
    "DataField",
    "TableSchema",
    "arrow_to_type_json",
    "check_column",
    "normalize_arrow_type",
    "type_json_to_arrow",
]
