"""aggregation engine (reference §5): function choice, retraction, remove-record-on-delete, passthrough,
Fluss delete behaviours and partial writes."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from merge_support import commits, engine, fold, kv, make_schema, merge, rows_of, visible

import mergetable as mt
from mergetable.core.errors import MergeError
from mergetable.merge import WRITE_MASK


def agg(extra: dict[str, str], fields: list[tuple[str, pa.DataType]] | None = None, **kw: object):  # type: ignore[no-untyped-def]
    fields = fields or [("k", pa.int64()), ("a", pa.int64()), ("b", pa.int64())]
    s = make_schema(fields, options={"merge-engine": "aggregation", **extra}, **kw)  # type: ignore[arg-type]
    return s, engine(s)


def test_default_function_is_last_non_null_value() -> None:
    s, fn = agg({})
    assert visible(s, merge(fn, kv(s, [(1, 1, 1), (1, None, 2)]))) == [{"k": 1, "a": 1, "b": 2}]


def test_default_aggregate_function_option() -> None:
    s, fn = agg({"fields.default-aggregate-function": "sum", "fields.b.aggregate-function": "max"})
    assert visible(s, merge(fn, kv(s, [(1, 1, 1), (1, 2, 5), (1, 3, 2)]))) == [{"k": 1, "a": 6, "b": 5}]


def test_sequence_field_uses_last_value_and_orders_records() -> None:
    s, fn = agg({"sequence.field": "b", "fields.default-aggregate-function": "first_value"})
    out = merge(fn, kv(s, [(1, 10, 3), (1, 20, 1), (1, 30, 2)]))
    # fold order is by b: (20,1), (30,2), (10,3): first_value of a = 20, b = last value = 3
    assert visible(s, out) == [{"k": 1, "a": 20, "b": 3}]


def test_partition_key_column_is_not_aggregated() -> None:
    fields = [("dt", pa.string()), ("k", pa.int64()), ("a", pa.int64())]
    s = make_schema(
        fields, ["dt", "k"], {"merge-engine": "aggregation", "fields.default-aggregate-function": "sum"}, ["dt"]
    )
    out = merge(engine(s), kv(s, [("d1", 1, 1), ("d1", 1, 2)]))
    assert visible(s, out) == [{"dt": "d1", "k": 1, "a": 3}]


def test_result_is_insert_even_with_only_retractions() -> None:
    s, fn = agg({"fields.a.aggregate-function": "sum"})
    out = rows_of(s, merge(fn, kv(s, [(1, 5, None), (1, 2, None)], ["-D", "-U"])))
    assert out == [{"k": 1, "a": -7, "b": None, "_kind": "+I"}]


def test_lone_retraction_passes_through_unchanged() -> None:
    s, fn = agg({"fields.a.aggregate-function": "max"})
    out = rows_of(s, merge(fn, kv(s, [(1, 5, 1), (2, 1, 1), (2, 2, 2)], ["-D", "+I", "+U"])))
    assert out == [{"k": 1, "a": 5, "b": 1, "_kind": "-D"}, {"k": 2, "a": 2, "b": 2, "_kind": "+I"}]


def test_unsupported_retraction_names_function_and_option() -> None:
    s, fn = agg({"fields.a.aggregate-function": "max"})
    message = (
        "Aggregate function 'max' does not support retraction, If you allow this function to ignore retraction "
        "messages, you can configure 'fields.a.ignore-retract'='true'."
    )
    with pytest.raises(MergeError, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        merge(fn, kv(s, [(1, 5, 1), (1, 2, 1)], ["+I", "-U"]))


def test_ignore_retract() -> None:
    s, fn = agg(
        {"fields.a.aggregate-function": "max", "fields.a.ignore-retract": "true", "fields.b.aggregate-function": "sum"}
    )
    out = merge(fn, kv(s, [(1, 5, 10), (1, 9, 3)], ["+I", "-D"]))
    assert visible(s, out) == [{"k": 1, "a": 5, "b": 7}]


def test_remove_record_on_delete_reinitialises_from_delete_row() -> None:
    s, fn = agg({"fields.a.aggregate-function": "sum", "aggregation.remove-record-on-delete": "true"})
    assert visible(s, merge(fn, kv(s, [(1, 5, 1), (1, 3, 1), (1, 2, 1)], ["+I", "-D", "+I"]))) == [
        {"k": 1, "a": 5, "b": 1}
    ]
    out = rows_of(s, merge(fn, kv(s, [(1, 5, 1), (1, 3, None)], ["+I", "-D"])))
    assert out == [{"k": 1, "a": 3, "b": None, "_kind": "-D"}]
    # -U is still a field retraction
    assert visible(s, merge(fn, kv(s, [(1, 5, 1), (1, 3, 1)], ["+I", "-U"])))[0]["a"] == 2


def test_remove_record_on_delete_checks_not_null_columns() -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("a", pa.int64(), False)])
    s = make_schema(schema, options={"merge-engine": "aggregation", "aggregation.remove-record-on-delete": "true"})
    with pytest.raises(MergeError, match="Field 1 can not be null"):
        merge(engine(s), kv(s, [(1, 5), (1, None)], ["+I", "-D"]))


def test_paimon_commit_boundaries_matter_for_retraction() -> None:
    s, fn = agg({"fields.a.aggregate-function": "collect"}, [("k", pa.int64()), ("a", pa.list_(pa.string()))])
    stored = [(1, ["A", "B"])]
    update = [(1, ["A", "B"]), (1, ["C", "D"])]
    together = visible(s, merge(fn, kv(s, stored + update, ["+I", "-U", "+U"])))
    split = visible(s, commits(fn, s, [stored, update], kinds=[None, ["-U", "+U"]]))
    assert together[0]["a"] == ["C", "D"]
    assert split[0]["a"] == ["A", "B", "C", "D"]  # the -U met a NULL accumulator in the write buffer


def test_passthrough_keeps_duplicates_and_null_elements() -> None:
    s, fn = agg(
        {"fields.a.aggregate-function": "collect", "fields.a.distinct": "true"},
        [("k", pa.int64()), ("a", pa.list_(pa.int64()))],
    )
    assert visible(s, merge(fn, kv(s, [(1, [1, 1, 2]), (2, [None])]))) == [
        {"k": 1, "a": [1, 1, 2]},
        {"k": 2, "a": [None]},
    ]
    assert visible(s, commits(fn, s, [[(1, [1, 1, 2])], [(1, [3])]]))[0]["a"] == [1, 2, 3]


def test_fluss_allow_update_before_is_a_delete() -> None:
    s, fn = agg({"table.delete.behavior": "allow", "fields.a.aggregate-function": "sum"})
    assert visible(s, merge(fn, kv(s, [(1, 5, 1), (1, 5, 1)], ["+I", "-U"]))) == []
    assert visible(s, merge(fn, kv(s, [(1, 5, 1), (1, 5, 1), (1, 2, None)], ["+I", "-D", "+I"]))) == [
        {"k": 1, "a": 2, "b": None}
    ]


def test_write_mask_folds_only_written_columns() -> None:
    s, fn = agg({"fields.a.aggregate-function": "sum", "fields.b.aggregate-function": "sum"})
    data = kv(s, [(1, 1, 100), (1, 2, 100), (1, 99, 3)], masks=[None, ["k", "a"], ["k", "b"]])
    out = merge(fn, data)
    assert visible(s, out) == [{"k": 1, "a": 3, "b": 103}]
    assert out.column(WRITE_MASK).to_pylist() == [0b111]
    # a new key written only partially: non-target columns stay NULL
    only = merge(fn, kv(s, [(2, 1, 7), (2, 2, 7)], masks=[["k", "a"], ["k", "a"]]))
    assert visible(s, only) == [{"k": 2, "a": 3, "b": None}]
    assert only.column(WRITE_MASK).to_pylist() == [0b011]


def test_write_mask_with_fluss_partial_delete_keeps_other_columns() -> None:
    s, fn = agg(
        {"table.delete.behavior": "allow", "fields.a.aggregate-function": "sum", "fields.b.aggregate-function": "sum"}
    )
    data = kv(s, [(1, 1, 5), (1, None, None), (1, 4, None)], ["+I", "-D", "+I"], masks=[None, ["k", "a"], ["k", "a"]])
    assert visible(s, merge(fn, data)) == [{"k": 1, "a": 4, "b": 5}]


@pytest.mark.parametrize("function", ["sum", "max", "last_non_null_value", "first_value", "listagg"])
def test_single_record_keys_pass_through(function: str) -> None:
    t = pa.string() if function == "listagg" else pa.int64()
    value = "   " if function == "listagg" else 4
    assert fold(function, t, [value]) == value


def test_fluss_delete_restarts_every_function() -> None:
    s, fn = agg(
        {
            "table.delete.behavior": "allow",
            "fields.a.aggregate-function": "first_value",
            "fields.b.aggregate-function": "max",
        }
    )
    out = merge(fn, kv(s, [(1, 1, 9), (1, None, None), (1, 2, 3)], ["+I", "-D", "+I"]))
    assert visible(s, out) == [{"k": 1, "a": 2, "b": 3}]
    # a partial delete restarts only its target columns
    data = kv(s, [(1, 1, 9), (1, None, None), (1, 2, 3)], ["+I", "-D", "+I"], masks=[None, ["k", "a"], None])
    assert visible(s, merge(fn, data)) == [{"k": 1, "a": 2, "b": 9}]


NOT_NULL_OP = pa.schema([pa.field("k", pa.int64(), False), pa.field("op", pa.string(), False), ("a", pa.int64())])


@pytest.mark.parametrize("remove_on_delete", [False, True])
def test_a_retraction_that_could_null_a_not_null_column_is_refused_and_the_table_stays_readable(
    tmp_path: Path, remove_on_delete: bool
) -> None:
    """A ``-U`` reaching a NOT NULL ``rowkind.field`` column (``last_non_null_value`` retracts it to NULL) is refused
    at write, naming the column; the table reads as before. ``-D`` resets the row under remove-record-on-delete."""
    options = {"merge-engine": "aggregation", "rowkind.field": "op", "fields.a.aggregate-function": "sum"}
    if remove_on_delete:
        options["aggregation.remove-record-on-delete"] = "true"
    t = mt.create_table(str(tmp_path / "t"), NOT_NULL_OP, ["k"], options=options)
    t.write(pa.table({"k": [1, 2], "op": ["+I", "+I"], "a": [5, 7]}, schema=NOT_NULL_OP))
    with pytest.raises(MergeError, match="column 'op' is NOT NULL"):
        t.write(pa.table({"k": [1], "op": ["-U"], "a": [2]}, schema=NOT_NULL_OP))
    expected = [{"k": 1, "op": "+I", "a": 5}, {"k": 2, "op": "+I", "a": 7}]
    assert t.read().sort_by("k").to_pylist() == expected
    if remove_on_delete:
        t.write(pa.table({"k": [2], "op": ["-D"], "a": [7]}, schema=NOT_NULL_OP))
        assert t.read().to_pylist() == expected[:1]


def test_retractions_stay_allowed_where_no_not_null_column_can_end_null(tmp_path: Path) -> None:
    """``sum`` never folds non-null inputs to NULL, and nullable columns may hold NULL: both take retractions."""
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("a", pa.int64(), False), ("op", pa.string())])
    options = {"merge-engine": "aggregation", "rowkind.field": "op", "fields.a.aggregate-function": "sum"}
    t = mt.create_table(str(tmp_path / "t"), schema, ["k"], options=options)
    t.write(pa.table({"k": [1], "a": [5], "op": ["+I"]}, schema=schema))
    t.write(pa.table({"k": [1], "a": [2], "op": ["-U"]}, schema=schema))
    assert t.read().to_pylist() == [{"k": 1, "a": 3, "op": None}]
