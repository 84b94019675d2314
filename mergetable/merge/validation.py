"""Create-time validation of the merge options shared by every engine.

Engine-specific checks live with the engines (``aggregation.py``, ``partial_update.py``); building an
engine's merge function also validates its aggregate functions (names, types, parameters), so
:func:`~mergetable.merge.base.validate_merge_options` rejects every invalid configuration at
``create_table`` time, naming the option or the column. Messages are Paimon's (or Fluss's, for Fluss
options), adapted to our option names.
"""

from __future__ import annotations

import pyarrow as pa

from mergetable.core.errors import OptionsError, SchemaError
from mergetable.core.options import ChangelogProducer, DeleteBehavior, MergeEngine, TableOptions
from mergetable.core.schema import TableSchema
from mergetable.merge.aggregates.base import ALIASES, function_names, paimon_type_name, resolve_function

#: Per-field option suffixes understood by the engines (``fields.<f>.<suffix>``).
FIELD_SUFFIXES = (
    "aggregate-function",
    "ignore-retract",
    "list-agg-delimiter",
    "distinct",
    "nested-key",
    "nested-sequence-field",
    "count-limit",
    "nested-key-null-strategy",
    "ts-field",
    "sequence-group",
    "agg",  # the Fluss spelling of aggregate-function, kept alongside it
    "stats-mode",
)
_FLUSS_ONLY_FUNCTIONS = frozenset({"last_value_ignore_nulls", "first_value_ignore_nulls", "string_agg"})
_VERSION_TYPES = "[INT, BIGINT, TIMESTAMP, TIMESTAMP_LTZ]"


def split_field_key(key: str) -> tuple[list[str], str]:
    """``fields.a,b.sequence-group`` → (``['a', 'b']``, ``'sequence-group'``)."""
    body = key[len("fields.") :]
    column, _, suffix = body.partition(".")
    return [c.strip() for c in column.split(",")], suffix


def field_function(opts: TableOptions, column: str) -> tuple[str | None, str]:
    """The aggregate function configured for ``column`` (its own, else the default) and its option key."""
    own = opts.field_option(column, "aggregate-function")
    if own is not None:
        return own.strip(), f"fields.{column}.aggregate-function"
    if opts.default_aggregate_function is not None:
        return opts.default_aggregate_function.strip(), "fields.default-aggregate-function"
    return None, f"fields.{column}.aggregate-function"


def is_fluss_table(opts: TableOptions) -> bool:
    """Whether the table uses Fluss-only settings (then Fluss's stricter validation applies)."""
    if opts.delete_behavior is not None or opts.merge_engine == MergeEngine.VERSIONED:
        return True
    if any(k.endswith(".agg") for k in opts.field_options):
        return True
    values = [v for k, v in opts.field_options.items() if k.endswith(".aggregate-function")]
    if opts.default_aggregate_function is not None:
        values.append(opts.default_aggregate_function)
    return any(v.strip().lower() in _FLUSS_ONLY_FUNCTIONS for v in values)


def validate_common(schema: TableSchema) -> None:
    """Checks that apply whatever the merge engine (run before the engine's own validator)."""
    opts = schema.table_options
    names = set(schema.column_names)
    types = {f.name: f.type for f in schema.arrow_schema}
    for key in sorted(opts.field_options):
        columns, suffix = split_field_key(key)
        for c in columns:
            if c not in names:
                raise OptionsError(key, f"Field {c} can not be found in table schema.")
        if suffix not in FIELD_SUFFIXES:
            raise OptionsError(key, _unknown_suffix(columns[0], suffix, key, types))
    for c in opts.sequence_field:
        if opts.field_option(c, "aggregate-function") is not None:
            raise OptionsError(
                f"fields.{c}.aggregate-function", f"Should not define aggregation on sequence field: '{c}'."
            )
    if opts.changelog_producer is ChangelogProducer.LOOKUP and opts.full_compaction_delta_commits is not None:
        raise OptionsError(
            "full-compaction.delta-commits",
            "cannot be combined with 'changelog-producer' = 'lookup' (lookup compacts level 0 at every commit); "
            "for changelog produced by periodic full compaction use 'changelog-producer' = 'full-compaction'",
        )
    engine = opts.merge_engine
    if engine == MergeEngine.FIRST_ROW and opts.sequence_field:
        raise OptionsError("sequence.field", "Do not support use sequence field on FIRST_ROW merge engine.")
    if engine in (MergeEngine.FIRST_ROW, MergeEngine.VERSIONED) and opts.delete_behavior == DeleteBehavior.ALLOW:
        label = "FIRST_ROW" if engine == MergeEngine.FIRST_ROW else "VERSIONED"
        raise OptionsError(
            "table.delete.behavior",
            f"Table with '{label}' merge engine does not support delete operations. The 'table.delete.behavior' "
            "config must be set to 'ignore' or 'disable', but got 'allow'.",
        )
    if engine == MergeEngine.VERSIONED:
        _validate_versioned(schema)
    if engine in (MergeEngine.AGGREGATION, MergeEngine.PARTIAL_UPDATE):
        if opts.default_aggregate_function is not None:
            resolve_function(opts.default_aggregate_function, "fields.default-aggregate-function")
        for c in schema.column_names:
            name, option = field_function(opts, c)
            if name is not None:
                resolve_function(name, option)
    elif is_fluss_table(opts):
        for c in schema.column_names:
            own = opts.field_option(c, "aggregate-function")
            if own is not None:
                fluss_key = f"fields.{c}.agg"
                raise OptionsError(
                    fluss_key if fluss_key in opts.field_options else f"fields.{c}.aggregate-function",
                    "Aggregation function is only supported for aggregation merge engine table, "
                    f"but column '{c}' has aggregation function '{own}'.",
                )


def _unknown_suffix(column: str, suffix: str, key: str, types: dict[str, pa.DataType]) -> str:
    head, _, param = suffix.partition(".")
    known = {*function_names()}
    if param and head in known:
        canonical = ALIASES.get(head, head)
        supported = "delimiter" if canonical == "listagg" else "none"
        return (
            f"Parameter '{param}' is not supported for aggregation function '{head}'. Supported parameters: {supported}"
        )
    if param and column in types and pa.types.is_struct(types[column]):
        return f"Nested-field path is not supported on ROW field '{column}': {key}"
    return f"unknown per-field option '{suffix}' (supported: {', '.join(FIELD_SUFFIXES)})"


def _validate_versioned(schema: TableSchema) -> None:
    column = schema.table_options.versioned_ver_column
    option = "table.merge-engine.versioned.ver-column"
    if column is None:
        raise OptionsError(option, f"'{option}' must be set for versioned merge engine.")
    if column not in schema.column_names:
        raise OptionsError(option, f"The version column '{column}' for versioned merge engine doesn't exist in schema.")
    t = schema.arrow_type(column)
    ok = t in (pa.int32(), pa.int64()) or pa.types.is_timestamp(t)
    if not ok:
        raise SchemaError(
            f"The version column '{column}' for versioned merge engine must be one type of {_VERSION_TYPES}, "
            f"but got {paimon_type_name(t)}.",
            column,
        )


__all__ = ["FIELD_SUFFIXES", "field_function", "is_fluss_table", "split_field_key", "validate_common"]
