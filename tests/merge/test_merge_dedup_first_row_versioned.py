"""deduplicate (§3), first-row (§6), Fluss versioned (§7), sequence.field (§2), delete behaviours (§8)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from merge_support import commits, engine, kv, make_schema, merge, rows_of, visible

from mergetable.core.errors import MergeError
from mergetable.merge import WRITE_MASK

KV = [("k", pa.int64()), ("v", pa.string())]


def dedup(options: dict[str, str] | None = None, fields: list[tuple[str, pa.DataType]] | None = None):  # type: ignore[no-untyped-def]
    s = make_schema(fields or KV, options=options or {})
    return s, engine(s)


# -- deduplicate ----------------------------------------------------------------------------------------
def test_newest_record_wins_and_retractions_remove() -> None:
    s, fn = dedup()
    out = rows_of(
        s, merge(fn, kv(s, [(1, "a"), (2, "x"), (1, "b"), (2, "y"), (3, "z")], ["+I", "+I", "+U", "-U", "-D"]))
    )
    assert out == [
        {"k": 1, "v": "b", "_kind": "+U"},
        {"k": 2, "v": "y", "_kind": "-U"},
        {"k": 3, "v": "z", "_kind": "-D"},
    ]
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "b")], ["+I", "-D"]))) == []


def test_physical_order_does_not_matter() -> None:
    s, fn = dedup()
    out = merge(fn, kv(s, [(1, "new"), (1, "old"), (2, "b")], seq=[5, 1, 3]))
    assert visible(s, out) == [{"k": 1, "v": "new"}, {"k": 2, "v": "b"}]
    assert out.column("_SEQUENCE_NUMBER").to_pylist() == [5, 3]


def test_ignore_delete() -> None:
    s, fn = dedup({"deduplicate.ignore-delete": "true"})
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "b")], ["+I", "-D"]))) == [{"k": 1, "v": "a"}]


def test_sequence_field_ascending_and_descending_with_nulls_first() -> None:
    fields = [("k", pa.int64()), ("s", pa.int64()), ("v", pa.string())]
    s, fn = dedup({"sequence.field": "s"}, fields)
    data = [(1, 3, "three"), (1, None, "null"), (1, 1, "one")]
    assert visible(s, merge(fn, kv(s, data)))[0]["v"] == "three"
    s, fn = dedup({"sequence.field": "s", "sequence.field.sort-order": "descending"}, fields)
    assert visible(s, merge(fn, kv(s, data)))[0]["v"] == "one"
    # NULL is the oldest in both directions: it never wins against a value
    assert visible(s, merge(fn, kv(s, [(1, 1, "one"), (1, None, "null")])))[0]["v"] == "one"


def test_sequence_field_ties_go_to_arrival_order_and_multi_fields() -> None:
    fields = [("k", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("v", pa.string())]
    s, fn = dedup({"sequence.field": "a,b"}, fields)
    # ascending example of the reference: (null,1) < (1,null) < (1,0)
    data = [(1, 1, 0, "1,0"), (1, None, 1, "null,1"), (1, 1, None, "1,null")]
    assert visible(s, merge(fn, kv(s, data)))[0]["v"] == "1,0"
    assert visible(s, merge(fn, kv(s, [(1, 2, 2, "first"), (1, 2, 2, "second")])))[0]["v"] == "second"


def test_delete_behavior_disable_and_ignore() -> None:
    s, fn = dedup({"table.delete.behavior": "disable"})
    with pytest.raises(MergeError, match=r"The table\.delete\.behavior is set to 'disable'"):
        merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-D"]))
    s, fn = dedup({"table.delete.behavior": "ignore"})
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-D"]))) == [{"k": 1, "v": "a"}]


COLS3 = [("k", pa.int64()), ("a", pa.string()), ("b", pa.string())]


def test_target_columns_overwrite_including_nulls() -> None:
    s, fn = dedup(fields=COLS3)
    out = merge(fn, kv(s, [(1, "a1", "b1"), (1, None, "ignored")], masks=[None, ["k", "a"]]))
    assert visible(s, out) == [{"k": 1, "a": None, "b": "b1"}]
    assert out.column(WRITE_MASK).to_pylist() == [0b111]
    # a new key written partially keeps NULL in the other columns
    out = merge(fn, kv(s, [(2, "a", None), (2, "a2", None)], masks=[["k", "a"], ["k", "a"]]))
    assert visible(s, out) == [{"k": 2, "a": "a2", "b": None}]
    assert out.column(WRITE_MASK).to_pylist() == [0b011]


def test_fluss_partial_delete_nulls_targets_or_removes_row() -> None:
    s, fn = dedup({"table.delete.behavior": "allow"}, COLS3)
    target = ["k", "a"]
    kept = commits(fn, s, [[(1, "a", "b")], [(1, None, None)]], kinds=[None, "-D"], masks=[None, [target]])
    assert visible(s, kept) == [{"k": 1, "a": None, "b": "b"}]
    gone = commits(fn, s, [[(1, "a", None)], [(1, None, None)]], kinds=[None, "-D"], masks=[None, [target]])
    assert visible(s, gone) == []
    # a delete without target columns removes the whole row
    full = commits(fn, s, [[(1, "a", "b")], [(1, None, None)]], kinds=[None, "-D"])
    assert visible(s, full) == []
    # a partial delete of an absent key is a no-op
    assert visible(s, merge(fn, kv(s, [(9, None, None)], "-D", masks=[target]))) == []


def test_fluss_partial_delete_composes_across_merges() -> None:
    s, fn = dedup({"table.delete.behavior": "allow"}, COLS3)
    target = ["k", "a"]
    # write buffer: +I{a} then partial delete of {a} → a conditional delete; the stored b keeps the row
    out = commits(
        fn,
        s,
        [[(1, "a0", "b0")], [(1, "a1", None), (1, None, None)]],
        kinds=[None, ["+I", "-D"]],
        masks=[None, [target, target]],
    )
    assert visible(s, out) == [{"k": 1, "a": None, "b": "b0"}]
    out = commits(
        fn,
        s,
        [[(1, "a0", None)], [(1, "a1", None), (1, None, None)]],
        kinds=[None, ["+I", "-D"]],
        masks=[None, [target, target]],
    )
    assert visible(s, out) == []


# -- first-row --------------------------------------------------------------------------------------------
def test_first_row_keeps_first_add_and_is_visible_before_compaction() -> None:
    s = make_schema(KV, options={"merge-engine": "first-row"})
    fn = engine(s)
    out = rows_of(s, merge(fn, kv(s, [(1, "b"), (1, "a"), (2, "x")], ["+U", "+I", "+I"], seq=[2, 1, 3])))
    assert out == [{"k": 1, "v": "a", "_kind": "+I"}, {"k": 2, "v": "x", "_kind": "+I"}]


def test_first_row_lone_retraction_passes_and_ignore_options() -> None:
    s = make_schema(KV, options={"merge-engine": "first-row"})
    fn = engine(s)
    assert rows_of(s, merge(fn, kv(s, [(1, "a")], "-D")))[0]["_kind"] == "-D"
    with pytest.raises(MergeError, match="You can config 'ignore-delete'"):
        merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-U"]))
    for options in ({"ignore-delete": "true"}, {"table.merge-engine": "first_row", "table.delete.behavior": "ignore"}):
        s = make_schema(KV, options={"merge-engine": "first-row", **options})
        assert visible(s, merge(engine(s), kv(s, [(1, "a"), (1, "a"), (1, "c")], ["+I", "-D", "+I"]))) == [
            {"k": 1, "v": "a"}
        ]
    s = make_schema(KV, options={"table.merge-engine": "first_row", "table.delete.behavior": "disable"})
    with pytest.raises(MergeError, match="Delete operations are disabled"):
        merge(engine(s), kv(s, [(1, "a"), (1, "a")], ["+I", "-D"]))


# -- versioned ----------------------------------------------------------------------------------------------
def versioned(t: pa.DataType | None = None, **extra: str):  # type: ignore[no-untyped-def]
    t = t or pa.int64()
    opts = {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "ver", **extra}
    s = make_schema([("k", pa.int64()), ("ver", t), ("v", pa.string())], options=opts)
    return s, engine(s)


def test_versioned_largest_version_wins_ties_to_newer() -> None:
    s, fn = versioned()
    assert visible(s, commits(fn, s, [[(1, 5, "five")], [(1, 3, "three")]]))[0]["v"] == "five"
    assert visible(s, commits(fn, s, [[(1, 5, "five")], [(1, 5, "tie")]]))[0]["v"] == "tie"
    assert visible(s, commits(fn, s, [[(1, 5, "five")], [(1, 6, "six")]]))[0]["v"] == "six"


def test_versioned_null_version_is_minimum() -> None:
    s, fn = versioned()
    assert visible(s, commits(fn, s, [[(1, 1, "one")], [(1, None, "null")]]))[0]["v"] == "one"
    assert visible(s, commits(fn, s, [[(1, None, "first")], [(1, None, "second")]]))[0]["v"] == "second"
    assert visible(s, commits(fn, s, [[(1, None, "null")], [(1, 0, "zero")]]))[0]["v"] == "zero"
    assert visible(s, merge(fn, kv(s, [(1, None, "only")]))) == [{"k": 1, "ver": None, "v": "only"}]


def test_versioned_timestamp_column_and_deletes() -> None:
    s, fn = versioned(pa.timestamp("ms"))
    t1, t2 = dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)
    assert visible(s, commits(fn, s, [[(1, t2, "new")], [(1, t1, "old")]]))[0]["v"] == "new"
    # deletes are ignored by default
    assert visible(s, commits(fn, s, [[(1, t1, "x")], [(1, t2, None)]], kinds=[None, "-D"]))[0]["v"] == "x"
    s, fn = versioned(**{"table.delete.behavior": "disable"})
    with pytest.raises(MergeError, match="Delete operations are disabled"):
        merge(fn, kv(s, [(1, 1, "x")], "-D"))


def test_ignore_update_before_drops_only_update_before() -> None:
    s, fn = dedup({"ignore-update-before": "true"})
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-U"]))) == [{"k": 1, "v": "a"}]
    assert visible(s, merge(fn, kv(s, [(1, "a"), (1, "a")], ["+I", "-D"]))) == []


def test_primary_key_only_partial_write_changes_nothing() -> None:
    s, fn = dedup(fields=COLS3)
    out = commits(fn, s, [[(1, "a", "b")], [(1, None, None)]], masks=[None, [("k",)]])
    assert visible(s, out) == [{"k": 1, "a": "a", "b": "b"}]


def test_fluss_partial_delete_in_partitioned_table() -> None:
    fields = [("dt", pa.string()), ("k", pa.int64()), ("a", pa.string()), ("b", pa.string())]
    s = make_schema(fields, ["dt", "k"], {"table.delete.behavior": "allow"}, ["dt"])
    fn = engine(s)
    target = ["dt", "k", "a"]
    out = commits(fn, s, [[("d", 1, "a", None)], [("d", 1, None, None)]], kinds=[None, "-D"], masks=[None, [target]])
    assert visible(s, out) == []
