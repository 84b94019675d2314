"""Create-time validation of merge options: every invalid configuration is rejected, naming the option
or column, with Paimon's (or Fluss's) message."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from merge_support import make_schema

import mergetable as mt
from mergetable.core.errors import MergeTableError, OptionsError, SchemaError

INTS = [("k", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("c", pa.int64())]


def reject(
    options: dict[str, str], match: str, fields: list[tuple[str, pa.DataType]] | None = None, **kw: object
) -> MergeTableError:
    with pytest.raises(MergeTableError, match=match) as info:
        make_schema(fields or INTS, options=options, **kw)  # type: ignore[arg-type]
    return info.value


# -- shared -----------------------------------------------------------------------------------------
def test_fields_option_on_unknown_column() -> None:
    err = reject(
        {"merge-engine": "aggregation", "fields.x.aggregate-function": "sum"},
        "Field x can not be found in table schema.",
    )
    assert isinstance(err, OptionsError) and err.option == "fields.x.aggregate-function"
    reject({"fields.x.ignore-retract": "true"}, "Field x can not be found")


def test_unknown_per_field_option() -> None:
    reject({"fields.a.aggregate-functoin": "sum"}, "unknown per-field option 'aggregate-functoin'")


def test_fluss_parameter_not_supported() -> None:
    reject(
        {"table.merge-engine": "aggregation", "fields.a.agg": "sum", "fields.a.sum.foo": "1"},
        "Parameter 'foo' is not supported for aggregation function 'sum'. Supported parameters: none",
    )


def test_nested_field_path_on_row() -> None:
    fields = [("k", pa.int64()), ("r", pa.struct([("x", pa.int64())]))]
    reject(
        {"merge-engine": "aggregation", "fields.r.x.aggregate-function": "sum"},
        "Nested-field path is not supported on ROW field 'r'",
        fields,
    )


@pytest.mark.parametrize("engine", ["aggregation", "partial-update"])
def test_unknown_function_name(engine: str) -> None:
    err = reject(
        {"merge-engine": engine, "fields.a.aggregate-function": "count"},
        "Could not find any factory for identifier 'count'",
    )
    assert isinstance(err, OptionsError) and err.option == "fields.a.aggregate-function"
    reject({"merge-engine": engine, "fields.default-aggregate-function": "nope"}, "identifier 'nope'")


def test_paimon_ignores_aggregate_function_on_other_engines() -> None:
    make_schema(INTS, options={"fields.a.aggregate-function": "sum"})
    make_schema(INTS, options={"merge-engine": "first-row", "fields.a.aggregate-function": "whatever"})


def test_fluss_rejects_aggregate_function_on_non_aggregation_table() -> None:
    reject(
        {"table.merge-engine": "first_row", "table.delete.behavior": "ignore", "fields.a.agg": "sum"},
        "Aggregation function is only supported for aggregation merge engine table, "
        "but column 'a' has aggregation function 'sum'.",
    )
    reject({"fields.a.agg": "last_value_ignore_nulls"}, "only supported for aggregation merge engine table")
    reject(
        {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "b", "fields.a.agg": "max"},
        "only supported for aggregation merge engine",
    )


def test_aggregate_on_sequence_field() -> None:
    reject(
        {"merge-engine": "aggregation", "sequence.field": "c", "fields.c.aggregate-function": "sum"},
        "Should not define aggregation on sequence field: 'c'.",
    )


def test_first_row_with_sequence_field() -> None:
    reject(
        {"merge-engine": "first-row", "sequence.field": "c"},
        "Do not support use sequence field on FIRST_ROW merge engine.",
    )


@pytest.mark.parametrize(("engine", "label"), [("first_row", "FIRST_ROW"), ("versioned", "VERSIONED")])
def test_fluss_engines_reject_allow(engine: str, label: str) -> None:
    reject(
        {
            "table.merge-engine": engine,
            "table.merge-engine.versioned.ver-column": "a",
            "table.delete.behavior": "allow",
        },
        f"Table with '{label}' merge engine does not support delete operations. The 'table.delete.behavior' config "
        "must be set to 'ignore' or 'disable', but got 'allow'.",
    )


def test_versioned_requires_ver_column() -> None:
    reject(
        {"table.merge-engine": "versioned"},
        "'table.merge-engine.versioned.ver-column' must be set for versioned merge engine.",
    )
    reject(
        {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "x"},
        "The version column 'x' for versioned merge engine doesn't exist in schema.",
    )
    err = reject(
        {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "s"},
        r"must be one type of \[INT, BIGINT, TIMESTAMP, TIMESTAMP_LTZ\], but got STRING.",
        [("k", pa.int64()), ("s", pa.string())],
    )
    assert isinstance(err, SchemaError) and err.column == "s"
    for t in (pa.int32(), pa.int64(), pa.timestamp("ms"), pa.timestamp("us", tz="UTC")):
        make_schema(
            [("k", pa.int64()), ("v", t)],
            options={"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "v"},
        )


# -- aggregate function types ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("function", "type_", "message"),
    [
        ("sum", pa.string(), "Data type for sum column must be 'NumericType' but was 'STRING'."),
        ("product", pa.bool_(), "Data type for product column must be 'NumericType' but was 'BOOLEAN'."),
        ("max", pa.list_(pa.int32()), "Data type for max column 'v' must be comparable but was 'ARRAY<INT>'."),
        ("min", pa.map_(pa.string(), pa.int32()), "Data type for min column 'v' must be comparable"),
        ("bool_and", pa.int32(), "Data type for bool and column must be 'BooleanType' but was 'INT'."),
        ("bool_or", pa.string(), "Data type for bool or column must be 'BooleanType'"),
        ("listagg", pa.int64(), "Data type for list agg column must be 'VarCharType' but was 'BIGINT'."),
        ("collect", pa.string(), "Data type for collect column must be 'Array' but was 'STRING'."),
        ("merge_map", pa.list_(pa.int32()), "Data type for merge map column must be 'MAP' but was 'ARRAY<INT>'"),
        (
            "merge_map_with_keytime",
            pa.map_(pa.string(), pa.int32()),
            "Value type of MAP for field 'v' must be ROW but was 'INT'",
        ),
        ("merge_map_with_keytime", pa.string(), "Data type for field 'v' must be 'MAP'"),
        (
            "nested_update",
            pa.list_(pa.int32()),
            "Data type for nested table column must be 'Array<Row>' but was 'ARRAY<INT>'.",
        ),
        ("rbm32", pa.string(), "Data type for roaring bitmap column must be 'VarBinaryType' but was 'STRING'."),
        ("rbm64", pa.binary(8), "Data type for roaring bitmap column must be 'VarBinaryType' but was 'BINARY\\(8\\)'."),
        ("hll_sketch", pa.int64(), "Data type for hll sketch column must be 'VarBinaryType'"),
        ("theta_sketch", pa.string(), "Data type for theta sketch column must be 'VarBinaryType'"),
    ],
)
def test_function_type_rejected(function: str, type_: pa.DataType, message: str) -> None:
    err = reject(
        {"merge-engine": "aggregation", "fields.v.aggregate-function": function},
        message,
        [("k", pa.int64()), ("v", type_)],
    )
    assert isinstance(err, SchemaError) and err.column == "v"


def test_keytime_row_needs_two_fields_and_known_ts_field() -> None:
    one = pa.map_(pa.string(), pa.struct([("ts", pa.string())]))
    reject(
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "merge_map_with_keytime"},
        "must have at least 2 fields, but found 1",
        [("k", pa.int64()), ("v", one)],
    )
    two = pa.map_(pa.string(), pa.struct([("val", pa.string()), ("ts", pa.string())]))
    reject(
        {
            "merge-engine": "aggregation",
            "fields.v.aggregate-function": "merge_map_with_keytime",
            "fields.v.ts-field": "nope",
        },
        "Timestamp field 'nope' not found in ROW type for field 'v'",
        [("k", pa.int64()), ("v", two)],
    )


def test_nested_update_option_dependencies() -> None:
    rows = pa.list_(pa.struct([("id", pa.int64()), ("seq", pa.int64())]))
    fields = [("k", pa.int64()), ("v", rows)]
    base = {"merge-engine": "aggregation", "fields.v.aggregate-function": "nested_update"}
    reject(
        {**base, "fields.v.nested-key-null-strategy": "ignore"},
        "nested-key-null-strategy' requires 'fields.<field-name>.nested-key'",
        fields,
    )
    reject(
        {**base, "fields.v.nested-sequence-field": "seq"},
        "nested-sequence-field' requires 'fields.<field-name>.nested-key'",
        fields,
    )
    reject(
        {**base, "fields.v.nested-key": "id", "fields.v.nested-key-null-strategy": "drop"},
        "Unsupported nested-key-null-strategy 'drop'",
        fields,
    )
    reject({**base, "fields.v.nested-key": "id", "fields.v.count-limit": "ten"}, "not an integer", fields)
    reject({**base, "fields.v.nested-key": "nope"}, "Field nope can not be found in nested ROW", fields)
    reject(
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "nested_partial_update"},
        "requires a nested key",
        fields,
    )


def test_bad_boolean_field_option() -> None:
    reject({"merge-engine": "aggregation", "fields.a.ignore-retract": "yes"}, "not a boolean")


def test_aggregation_remove_record_on_delete_conflicts_with_ignore_retract() -> None:
    reject(
        {
            "merge-engine": "aggregation",
            "aggregation.remove-record-on-delete": "true",
            "fields.a.ignore-retract": "true",
        },
        "aggregation.remove-record-on-delete and fields.a.ignore-retract have conflicting behavior "
        "so should not be enabled at the same time.",
    )


# -- partial-update -------------------------------------------------------------------------------------
PU = {"merge-engine": "partial-update"}


def test_sequence_group_field_not_found() -> None:
    reject({**PU, "fields.a.sequence-group": "a1"}, "Field a1 can not be found in table schema")
    reject({**PU, "fields.x.sequence-group": "a"}, "Field x can not be found in table schema")


def test_sequence_group_field_defined_twice() -> None:
    reject(
        {**PU, "fields.a.sequence-group": "c", "fields.b.sequence-group": "c"},
        "Field c is defined repeatedly by multiple groups: fields.b.sequence-group",
    )


def test_sequence_group_with_primary_key() -> None:
    reject(
        {**PU, "fields.a.sequence-group": "k"},
        "The sequence-group 'fields.a.sequence-group' contains primary key field 'k', which is not allowed. "
        "Primary key columns cannot be put in sequence-group.",
    )
    reject({**PU, "fields.k.sequence-group": "a"}, "contains primary key field 'k'")


def test_aggregation_needs_sequence_group() -> None:
    reject(
        {**PU, "fields.a.aggregate-function": "sum"},
        "Must use sequence group for aggregation functions but not found for field a.",
    )
    reject({**PU, "fields.default-aggregate-function": "sum"}, "Must use sequence group for aggregation functions")
    make_schema(INTS, options={**PU, "fields.a.aggregate-function": "last_non_null_value"})
    make_schema(INTS, options={**PU, "fields.default-aggregate-function": "last_non_null_value"})
    # the ordering field itself needs no function; protected fields may use any
    make_schema(INTS, options={**PU, "fields.a.sequence-group": "b,c", "fields.default-aggregate-function": "sum"})


@pytest.mark.parametrize(
    ("options", "first", "second"),
    [
        (
            {"ignore-delete": "true", "partial-update.remove-record-on-delete": "true"},
            "ignore-delete",
            "partial-update.remove-record-on-delete",
        ),
        (
            {
                "ignore-delete": "true",
                "fields.a.sequence-group": "b",
                "partial-update.remove-record-on-sequence-group": "a",
            },
            "ignore-delete",
            "partial-update.remove-record-on-sequence-group",
        ),
        (
            {"fields.a.sequence-group": "b", "partial-update.remove-record-on-delete": "true"},
            "sequence-group",
            "partial-update.remove-record-on-delete",
        ),
    ],
)
def test_conflicting_delete_options(options: dict[str, str], first: str, second: str) -> None:
    reject(
        {**PU, **options}, f"{first} and {second} have conflicting behavior so should not be enabled at the same time."
    )


def test_remove_record_on_sequence_group_must_name_ordering_field() -> None:
    reject(
        {**PU, "fields.a.sequence-group": "b", "partial-update.remove-record-on-sequence-group": "b"},
        "field 'b' defined in 'partial-update.remove-record-on-sequence-group' option must be part of sequence groups",
    )


def test_nested_ordering_field_rejected() -> None:
    fields = [("k", pa.int64()), ("g", pa.list_(pa.int64())), ("a", pa.int64())]
    reject({**PU, "fields.g.sequence-group": "a"}, "cannot be used as a sequence-group ordering field", fields)


def test_valid_configurations_pass() -> None:
    make_schema(INTS, options={**PU, "fields.a,b.sequence-group": "c", "fields.c.aggregate-function": "sum"})
    make_schema(
        INTS, options={**PU, "fields.a.sequence-group": "b", "partial-update.remove-record-on-sequence-group": "a"}
    )
    make_schema(INTS, options={"merge-engine": "aggregation", "fields.a.aggregate-function": "first_not_null_value"})
    make_schema(INTS, options={"table.merge-engine": "aggregation", "table.delete.behavior": "allow"})
    make_schema(INTS, options={"table.merge-engine": "default", "table.delete.behavior": "disable"})


def test_fluss_agg_spelling_on_a_non_aggregation_table_is_rejected(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64())])
    with pytest.raises(OptionsError, match="only supported for aggregation merge engine") as info:
        mt.create_table(str(tmp_path / "a"), schema, primary_key=["id"], options={"fields.v.agg": "sum"})
    assert info.value.option == "fields.v.agg"
    # Paimon's spelling on a deduplicate table is ignored, as in Paimon
    t = mt.create_table(str(tmp_path / "b"), schema, primary_key=["id"], options={"fields.v.aggregate-function": "sum"})
    t.write(pa.table({"id": [1, 1], "v": [1, 2]}))
    assert t.read().column("v").to_pylist() == [2]
    # on an aggregation table the Fluss spelling works and survives a reopen
    t = mt.create_table(
        str(tmp_path / "c"),
        schema,
        primary_key=["id"],
        options={"table.merge-engine": "aggregation", "fields.v.agg": "sum"},
    )
    t.write(pa.table({"id": [1, 1], "v": [1, 2]}))
    assert mt.open_table(t.uri).read().column("v").to_pylist() == [3]
    with pytest.raises(OptionsError, match="conflicts"):
        mt.TableOptions.from_map({"fields.v.agg": "sum", "fields.v.aggregate-function": "max"})
