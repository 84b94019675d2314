"""partial-update (reference §4): non-null overwrite, deletes, sequence groups, aggregation in groups."""

from __future__ import annotations

import pyarrow as pa
import pytest
from merge_support import commits, engine, kv, make_schema, merge, rows_of, visible

from mergetable.core.errors import MergeError

COLS = ["k", "a", "b", "c"]


def pu(extra: dict[str, str] | None = None, fields: list[tuple[str, pa.DataType]] | pa.Schema | None = None):  # type: ignore[no-untyped-def]
    s = make_schema(
        fields or [(c, pa.int64()) for c in COLS], options={"merge-engine": "partial-update", **(extra or {})}
    )
    return s, engine(s)


def row(*values: object, cols: list[str] = COLS) -> dict[str, object]:
    return dict(zip(cols, values, strict=True))


def test_non_null_fields_overwrite_nulls_never_do() -> None:
    s, fn = pu()
    out = merge(fn, kv(s, [(1, 1, None, 3), (1, None, 2, None), (1, 5, None, None)]))
    assert visible(s, out) == [row(1, 5, 2, 3)]


def test_not_null_column_receiving_null() -> None:
    schema = pa.schema([pa.field("k", pa.int64(), False), pa.field("a", pa.int64(), False), pa.field("b", pa.int64())])
    s, fn = pu(fields=schema)
    with pytest.raises(MergeError, match="Field 1 can not be null"):
        merge(fn, kv(s, [(1, 1, 1), (1, None, 2)]))
    # a lone record passes through untouched
    assert merge(fn, kv(s, [(1, None, 2)])).num_rows == 1


def test_single_record_passthrough_keeps_kind() -> None:
    s, fn = pu()
    out = rows_of(s, merge(fn, kv(s, [(1, 1, 2, 3), (2, 4, 5, 6)], ["+U", "-D"])))
    assert [r["_kind"] for r in out] == ["+U", "-D"]


def test_default_rejects_retraction_in_multi_record_key() -> None:
    s, fn = pu()
    with pytest.raises(MergeError, match=r"1\. Configure 'ignore-delete'"):
        merge(fn, kv(s, [(1, 1, 1, 1), (1, 1, 1, 1)], ["+I", "-U"]))


def test_ignore_delete_skips_retractions() -> None:
    s, fn = pu({"ignore-delete": "true"})
    out = merge(fn, kv(s, [(1, 1, 1, 1), (1, 9, 9, 9), (1, 2, None, None)], ["+I", "-D", "+I"]))
    assert rows_of(s, out) == [{**row(1, 2, 1, 1), "_kind": "+I"}]


def test_ignore_delete_only_retractions_yield_delete_from_first_retract_row() -> None:
    s, fn = pu({"partial-update.ignore-delete": "true"})
    out = rows_of(s, merge(fn, kv(s, [(1, 5, 6, 7), (1, 8, 9, 10)], ["-D", "-U"])))
    assert out == [{**row(1, 5, 6, 7), "_kind": "-D"}]
    # a leading retraction initialises the row: its values survive where later adds are null
    out = rows_of(s, merge(fn, kv(s, [(1, 5, 6, 7), (1, None, 1, None)], ["-D", "+I"])))
    assert out == [{**row(1, 5, 1, 7), "_kind": "+I"}]


def test_remove_record_on_delete() -> None:
    s, fn = pu({"partial-update.remove-record-on-delete": "true"})
    out = rows_of(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, None, None, None)], ["+I", "-D"])))
    assert out[0]["_kind"] == "-D"
    assert visible(s, commits(fn, s, [[(1, 1, 1, 1)], [(1, None, None, None)]], kinds=[None, "-D"])) == []
    # -U is ignored
    assert visible(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, 1, 1, 1)], ["+I", "-U"]))) == [row(1, 1, 1, 1)]
    # later inserts are applied on top of the re-initialised -D row
    out = rows_of(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, 7, None, None), (1, None, 2, None)], ["+I", "-D", "+I"])))
    assert out == [{**row(1, 7, 2, None), "_kind": "+I"}]


def test_key_with_only_retractions_is_delete() -> None:
    s, fn = pu({"fields.a.sequence-group": "b"})
    out = rows_of(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, 2, 2, 2)], ["-U", "-U"])))
    assert out[0]["_kind"] == "-D"


# -- sequence groups ------------------------------------------------------------------------------------
GROUPED = ["k", "g1", "a", "g2", "b", "c"]


def grouped(extra: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    opts = {"fields.g1.sequence-group": "a", "fields.g2.sequence-group": "b", **(extra or {})}
    return pu(opts, [(c, pa.int64()) for c in GROUPED])


def g(*values: object) -> dict[str, object]:
    return row(*values, cols=GROUPED)


def test_group_skipped_when_ordering_null_and_true_partial_update() -> None:
    s, fn = grouped()
    out = merge(fn, kv(s, [(1, 1, 10, 1, 20, 30), (1, None, 99, 2, None, None)]))
    # g1 NULL: a untouched; g2 advanced: b takes NULL ("true partial update"); c non-null overwrite only
    assert visible(s, out) == [g(1, 1, 10, 2, None, 30)]


def test_older_group_values_not_applied_and_equal_ordering_wins() -> None:
    s, fn = grouped()
    out = merge(fn, kv(s, [(1, 5, 10, 1, 1, 1), (1, 3, 30, 1, 2, 2), (1, 5, 50, None, None, None)]))
    assert visible(s, out) == [g(1, 5, 50, 1, 2, 2)]


def test_group_ordering_is_by_value_not_arrival_across_commits() -> None:
    s, fn = grouped()
    out = commits(fn, s, [[(1, 5, 10, 5, 10, 1)], [(1, 3, 30, 7, 70, None)], [(1, 4, 40, 6, 60, None)]])
    assert visible(s, out) == [g(1, 5, 10, 7, 70, 1)]


def test_multi_field_ordering_lexicographic_nulls_lowest() -> None:
    cols = ["k", "o1", "o2", "a"]
    s, fn = pu({"fields.o1,o2.sequence-group": "a"}, [(c, pa.int64()) for c in cols])
    data = [(1, 1, None, 10), (1, 1, 0, 20), (1, None, 5, 30), (1, 0, 9, 40)]
    assert visible(s, merge(fn, kv(s, data))) == [row(1, 1, 0, 20, cols=cols)]


def test_group_comparator_ignores_sequence_sort_order() -> None:
    s, fn = grouped({"sequence.field": "c", "sequence.field.sort-order": "descending"})
    out = merge(fn, kv(s, [(1, 1, 10, None, None, 5), (1, 2, 20, None, None, 4)]))
    # records fold by c descending (5 then 4); the group still keeps the larger g1 (2)
    assert visible(s, out)[0]["a"] == 20


def test_retract_within_group() -> None:
    s, fn = grouped()
    data = [(1, 1, 10, 1, 100, 7), (1, 2, 10, None, None, None), (1, 1, 11, 2, 200, None)]
    out = merge(fn, kv(s, data, ["+I", "-U", "+I"]))
    # the -U advanced g1 (2 >= 1): a := NULL, g1 := 2; the later +I with g1=1 is older and ignored for a
    assert visible(s, out) == [g(1, 2, None, 2, 200, 7)]


def test_retract_with_older_ordering_leaves_plain_fields() -> None:
    s, fn = grouped()
    out = merge(fn, kv(s, [(1, 5, 10, 1, 1, 1), (1, 3, 10, None, None, None)], ["+I", "-D"]))
    assert visible(s, out) == [g(1, 5, 10, 1, 1, 1)]


def test_remove_record_on_sequence_group() -> None:
    s, fn = grouped({"partial-update.remove-record-on-sequence-group": "g1"})
    data = [(1, 1, 10, 1, 1, 1), (1, 2, None, None, None, None)]
    assert rows_of(s, merge(fn, kv(s, data, ["+I", "-D"])))[0]["_kind"] == "-D"
    # an older -D does not reach the group and removes nothing
    assert visible(s, merge(fn, kv(s, [(1, 5, 10, 1, 1, 1), (1, 2, None, None, None, None)], ["+I", "-D"]))) == [
        g(1, 5, 10, 1, 1, 1)
    ]
    # a -U never removes the row; a -D on the other group neither
    assert visible(s, merge(fn, kv(s, data, ["+I", "-U"]))) == [g(1, 2, None, 1, 1, 1)]
    assert visible(s, merge(fn, kv(s, [(1, 1, 10, 1, 1, 1), (1, None, None, 2, None, None)], ["+I", "-D"]))) == [
        g(1, 1, 10, 2, None, 1)
    ]
    # an insert after the removal starts from the -D row
    data3 = [*data, (1, None, None, 3, 30, None)]
    assert rows_of(s, merge(fn, kv(s, data3, ["+I", "-D", "+I"]))) == [{**g(1, 2, None, 3, 30, None), "_kind": "+I"}]


@pytest.mark.parametrize(
    ("function", "expected"),
    [
        ("sum", 60),  # still accumulates the older record
        ("first_value", 30),  # adopts the older value
        ("last_value", 10),  # keeps the current value
        ("last_non_null_value", 10),
        ("max", 30),
        ("min", 10),
        ("product", 6000),
    ],
)
def test_aggregated_field_receives_older_records(function: str, expected: int) -> None:
    s, fn = grouped({"fields.a.aggregate-function": function})
    data = [(1, 5, 20, None, None, None), (1, 6, 10, None, None, None), (1, 3, 30, None, None, None)]
    assert visible(s, merge(fn, kv(s, data)))[0]["a"] == expected


def test_listagg_in_group_prepends_older_values() -> None:
    cols = ["k", "g", "s"]
    s, fn = pu(
        {"fields.g.sequence-group": "s", "fields.s.aggregate-function": "listagg"},
        [("k", pa.int64()), ("g", pa.int64()), ("s", pa.string())],
    )
    out = merge(fn, kv(s, [(1, 2, "b"), (1, 3, "c"), (1, 1, "a")]))
    assert visible(s, out) == [row(1, 3, "a,b,c", cols=cols)]


def test_aggregated_field_retract_in_group() -> None:
    s, fn = grouped({"fields.a.aggregate-function": "sum"})
    data = [(1, 1, 10, None, None, None), (1, 2, 5, None, None, None), (1, 1, 3, None, None, None)]
    assert visible(s, merge(fn, kv(s, data, ["+I", "+I", "-U"])))[0]["a"] == 12


def test_default_aggregate_function_applies_to_protected_fields() -> None:
    opts = {
        "fields.g1.sequence-group": "a",
        "fields.g2.sequence-group": "b,c",
        "fields.default-aggregate-function": "sum",
    }
    s, fn = pu(opts, [(c, pa.int64()) for c in GROUPED])
    out = merge(fn, kv(s, [(1, 1, 1, 1, 1, None), (1, 2, 2, 2, 2, 4)]))
    # every protected field sums; the ordering fields g1/g2 take the newest value
    assert visible(s, out) == [g(1, 2, 3, 2, 3, 4)]


def test_default_last_non_null_without_groups() -> None:
    s, fn = pu({"fields.default-aggregate-function": "last_non_null_value"})
    assert visible(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, None, 2, None)]))) == [row(1, 1, 2, 1)]


def test_fields_outside_groups_non_null_overwrite() -> None:
    s, fn = grouped()
    out = merge(fn, kv(s, [(1, 1, 1, 1, 1, 5), (1, None, None, None, None, None), (1, None, None, None, None, 6)]))
    assert visible(s, out)[0]["c"] == 6


def test_leading_retraction_with_groups_initialises_row() -> None:
    s, fn = grouped({"fields.a.aggregate-function": "sum"})
    out = rows_of(s, merge(fn, kv(s, [(1, 1, 10, 1, 5, 7), (1, None, None, None, None, 8)], ["-U", "+I"])))
    # the -U initialises every field, then retracts: a := 10 - 10, b := NULL; c is then overwritten
    assert out == [{**g(1, 1, 0, 1, None, 8), "_kind": "+I"}]


# -- partial writes -----------------------------------------------------------------------------------------
def test_write_mask_non_target_columns_keep_values() -> None:
    s, fn = pu()
    out = merge(fn, kv(s, [(1, 1, 1, 1), (1, 2, 2, 2), (1, None, 3, 3)], masks=[None, ["k", "a"], ["k", "b"]]))
    assert visible(s, out) == [row(1, 2, 3, 1)]


def test_write_mask_with_sequence_group() -> None:
    s, fn = grouped()
    data = [(1, 1, 10, 1, 1, 1), (1, 2, 99, None, None, None)]
    # the second row wrote only g1 (not a): a keeps 10 while g1 advances
    out = merge(fn, kv(s, data, masks=[None, ["k", "g1"]]))
    assert visible(s, out) == [g(1, 2, 10, 1, 1, 1)]


def test_aggregate_function_on_primary_key_is_ignored() -> None:
    s, fn = pu({"fields.k.aggregate-function": "sum"})
    assert visible(s, merge(fn, kv(s, [(1, 1, None, None), (1, None, 2, None)]))) == [row(1, 1, 2, None)]


def test_ignore_update_before_drops_update_before_records() -> None:
    s, fn = pu({"ignore-update-before": "true"})
    assert visible(s, merge(fn, kv(s, [(1, 1, 1, 1), (1, 2, 2, 2), (1, 3, None, None)], ["+I", "-U", "+U"]))) == [
        row(1, 3, 1, 1)
    ]
