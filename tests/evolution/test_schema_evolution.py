"""Schema evolution: each rule, reads/compaction/changelog across changes, time travel, refused changes."""

from __future__ import annotations

import datetime
import json
import os
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.errors import (
    ImmutableOptionError,
    MergeTableError,
    OptionsError,
    SchemaChangeError,
    SchemaError,
)
from mergetable.core.evolution import AddColumn, DropColumn, RenameColumn, UpdateColumnType

SCHEMA = pa.schema(
    [("dt", pa.string()), ("id", pa.int64()), ("i8", pa.int8()), ("f", pa.float32()), ("s", pa.string())]
)


def _table(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["dt", "id"], partition_keys=["dt"], options=options or None)


def _first(t: mt.Table) -> None:
    t.write(
        pa.table(
            {"dt": ["a", "a"], "id": [1, 2], "i8": [1, 2], "f": [0.5, 1.5], "s": ["x", "y"]},
            schema=SCHEMA,
        )
    )


def _listing(uri: str) -> dict[str, bytes]:
    out = {}
    for root, _, files in os.walk(uri):
        for name in files:
            path = os.path.join(root, name)
            out[os.path.relpath(path, uri)] = Path(path).read_bytes()
    return out


def _schema_doc(uri: str, schema_id: int) -> dict[str, object]:
    return dict(json.loads(Path(uri, "schema", f"schema-{schema_id}").read_text()))


def test_each_change_is_a_new_schema_file_with_stable_field_ids(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    t.alter.add_columns(pa.field("n", pa.int32()))
    t.alter.add_columns(pa.field("head", pa.string()), first=True)
    t.alter.add_columns(pa.field("mid", pa.bool_()), after="id")
    t.alter.rename_column("s", "text")
    t.alter.change_column_type("i8", pa.int16())
    t.alter.drop_columns(["f"])
    t.alter.set_column_comment("text", "free text")
    ids = sorted(int(n.split("-")[1]) for n in os.listdir(Path(table_uri, "schema")))
    assert ids == list(range(8))
    doc = _schema_doc(table_uri, 7)
    fields = {f["name"]: f for f in doc["fields"]}  # type: ignore[attr-defined]
    assert [f["name"] for f in doc["fields"]] == ["head", "dt", "id", "mid", "i8", "text", "n"]  # type: ignore[attr-defined]
    assert (fields["text"]["id"], fields["i8"]["id"], fields["n"]["id"], fields["head"]["id"]) == (4, 2, 5, 6)
    assert fields["text"]["description"] == "free text" and doc["highestFieldId"] == 7
    assert fields["i8"]["type"] == "SMALLINT"
    assert t.read().to_pylist() == [
        {"head": None, "dt": "a", "id": 1, "mid": None, "i8": 1, "text": "x", "n": None},
        {"head": None, "dt": "a", "id": 2, "mid": None, "i8": 2, "text": "y", "n": None},
    ]
    # another process opening the table sees the newest schema
    assert mt.open_table(table_uri).schema == t.schema


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        (pa.int8(), pa.int16(), 100),
        (pa.int8(), pa.int64(), -7),
        (pa.int16(), pa.int32(), 30000),
        (pa.int32(), pa.int64(), 2_000_000_000),
        (pa.float32(), pa.float64(), 0.25),
        (pa.decimal128(5, 2), pa.decimal128(12, 2), Decimal("123.45")),
        # Paimon's implicit casts (DataTypeCasts) beyond widening within a family
        (pa.int32(), pa.float64(), 2_000_000_000),
        (pa.int8(), pa.float32(), -100),
        (pa.int16(), pa.decimal128(7, 2), 32767),
        (pa.int64(), pa.decimal128(21, 2), 9_223_372_036_854_775_807),
        (pa.decimal128(5, 2), pa.float64(), Decimal("123.25")),
        (pa.decimal128(5, 2), pa.decimal128(8, 3), Decimal("123.45")),
        (pa.timestamp("ms"), pa.timestamp("us"), datetime.datetime(2024, 5, 6, 7, 8, 9, 123000)),
    ],
)
def test_widening_casts_stored_values(table_uri: str, old: pa.DataType, new: pa.DataType, value: object) -> None:
    t = mt.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", old)]), ["id"])
    t.write(pa.table({"id": [1], "v": pa.array([value], old)}))
    t.alter.change_column_type("v", new)
    as_new = pa.array([value], old).cast(new, safe=not pa.types.is_floating(new))
    t.write(pa.table({"id": [2], "v": as_new}))
    out = t.read()
    assert out.schema.field("v").type == new
    expected = as_new.to_pylist() * 2
    assert out.column("v").to_pylist() == expected
    # a filter on the changed column prunes and matches the old file's rows by their new type
    assert t.read(filter=[("v", "=", expected[0])]).column("id").to_pylist() == [1, 2]
    t.compact(full=True)
    assert t.read().column("v").to_pylist() == expected


def test_an_integer_read_as_a_double_rounds_as_paimon_does(table_uri: str) -> None:
    t = mt.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.int64())]), ["id"])
    t.write(pa.table({"id": [1], "v": [2**53 + 1]}))
    t.alter.change_column_type("v", pa.float64())
    assert t.read().column("v").to_pylist() == [float(2**53)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (pa.int64(), pa.int32()),
        (pa.float64(), pa.float32()),
        (pa.int64(), pa.decimal128(12, 2)),  # Paimon allows it; old values could overflow at read
        (pa.float64(), pa.decimal128(20, 4)),  # Paimon allows it; a float is not exact in a decimal
        (pa.decimal128(8, 3), pa.decimal128(8, 2)),
        (pa.timestamp("us"), pa.timestamp("ms")),
        (pa.timestamp("us"), pa.date32()),
        (pa.int32(), pa.string()),
    ],
)
def test_casts_that_could_fail_or_lose_values_are_refused(table_uri: str, old: pa.DataType, new: pa.DataType) -> None:
    t = mt.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", old)]), ["id"])
    with pytest.raises(SchemaChangeError, match="without losing information") as info:
        t.alter.change_column_type("v", new)
    assert info.value.column == "v" and mt.open_table(table_uri).table_schema.id == 0


def test_nullable_and_comments(table_uri: str) -> None:
    t = mt.create_table(table_uri, pa.schema([("id", pa.int64()), pa.field("v", pa.string(), False)]), ["id"])
    t.write(pa.table({"id": [1], "v": ["a"]}))
    assert not t.schema.field("v").nullable
    t.alter.set_column_nullable("v")
    assert t.schema.field("v").nullable
    t.write(pa.table({"id": [2], "v": pa.array([None], pa.string())}))
    assert t.read().column("v").to_pylist() == ["a", None]
    assert t.alter.set_table_comment("orders").comment == "orders"
    assert mt.open_table(table_uri).comment == "orders"


def test_renamed_columns_keep_their_data_and_added_ones_read_null_everywhere(table_uri: str) -> None:
    t = _table(table_uri, **{"changelog-producer": "input"})
    _first(t)
    t.alter.apply([RenameColumn("s", "text"), AddColumn("n", pa.int64()), DropColumn("f")])
    t.write(pa.table({"dt": ["a", "b"], "id": [2, 3], "i8": [20, 30], "text": ["Y", "z"], "n": [7, 8]}))
    expected = [
        {"dt": "a", "id": 1, "i8": 1, "text": "x", "n": None},
        {"dt": "a", "id": 2, "i8": 20, "text": "Y", "n": 7},
        {"dt": "b", "id": 3, "i8": 30, "text": "z", "n": 8},
    ]
    assert t.read().to_pylist() == expected
    assert t.read(["text"], filter=[("text", "=", "x")]).to_pylist() == [{"text": "x"}]
    assert t.count() == 3
    # changelog across the change: snapshot 1 was written under schema 0
    log = t.changelog(0, 2)
    assert sorted(log.column("text").to_pylist()) == ["Y", "x", "y", "z"]
    assert set(log.column_names) == {"dt", "id", "i8", "text", "n", "_row_kind"}
    # incremental read across the change
    assert t.read(incremental_between=(0, 1)).column("text").to_pylist() == ["x", "y"]
    # streaming read of both snapshots, with the current schema
    batches = list(t.follow({"scan.mode": "from-snapshot", "scan.snapshot-id": "1"}, stop_when_idle=True))
    assert sorted(r["text"] for b in batches for r in b.data.to_pylist()) == ["Y", "x", "y", "z"]
    # compaction rewrites everything into the newest schema
    t.compact(full=True)
    assert {f.schema_id for _, _, f in t.files()} == {1}
    assert t.read().to_pylist() == expected


def test_a_dropped_name_added_again_is_a_new_column(table_uri: str) -> None:
    t = _table(table_uri, **{"fields.s.stats-mode": "none"})
    _first(t)
    t.alter.drop_columns("s")
    assert "fields.s.stats-mode" not in t.options  # the dropped column's own options go with it
    t.alter.add_columns(pa.field("s", pa.int64()))
    assert t.table_schema.fields[-1].id == 5
    assert t.read(["id", "s"]).to_pylist() == [{"id": 1, "s": None}, {"id": 2, "s": None}]


def test_time_travel_reads_the_schema_the_snapshot_was_committed_with(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    t.create_tag("before")
    t.alter.rename_column("s", "text")
    t.alter.drop_columns("f")
    t.write(pa.table({"dt": ["a"], "id": [1], "i8": [5], "text": ["new"]}))
    old = t.read(snapshot_id=1)
    assert old.schema.names == ["dt", "id", "i8", "f", "s"]
    assert old.column("s").to_pylist() == ["x", "y"] and old.column("f").to_pylist() == [0.5, 1.5]
    assert t.read(tag="before").schema.names == ["dt", "id", "i8", "f", "s"]
    assert t.read(snapshot_id=2).to_pylist()[0] == {"dt": "a", "id": 1, "i8": 5, "text": "new"}
    assert t.latest_snapshot().schema_id == 2  # type: ignore[union-attr]


def test_filters_on_a_renamed_key_prune_correctly(table_uri: str) -> None:
    t = mt.create_table(table_uri, pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
    t.write(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    t.write(pa.table({"id": [10, 11], "v": ["j", "k"]}))
    t.alter.rename_column("id", "key")
    assert t.primary_key == ("key",)
    assert len(t.plan(filter=[("key", ">=", 10)])[0].files) == 1  # the old file's key range prunes it
    assert t.read(filter=[("key", ">=", 10)]).to_pydict() == {"key": [10, 11], "v": ["j", "k"]}
    assert t.read(filter=[("key", "=", 2)]).to_pydict() == {"key": [2], "v": ["b"]}
    t.write(pa.table({"key": [2], "v": ["B"]}))
    assert t.read(filter=[("key", "<", 3)]).to_pydict() == {"key": [1, 2], "v": ["a", "B"]}


def test_options_naming_a_column_follow_a_rename(table_uri: str) -> None:
    t = mt.create_table(
        table_uri,
        pa.schema([("id", pa.int64()), ("total", pa.int64()), ("g", pa.int64()), ("a", pa.string())]),
        ["id"],
        options={
            "merge-engine": "partial-update",
            "fields.g.sequence-group": "a,total",
            "fields.total.aggregate-function": "sum",
        },
    )
    t.write(pa.table({"id": [1], "total": [1], "g": [1], "a": ["x"]}))
    t.alter.rename_column("total", "sum_total")
    t.alter.rename_column("g", "grp")
    opts = t.options
    assert opts["fields.sum_total.aggregate-function"] == "sum" and "fields.total.aggregate-function" not in opts
    assert opts["fields.grp.sequence-group"] == "a,sum_total"
    t.write(pa.table({"id": [1], "sum_total": [2], "grp": [2], "a": ["newer"]}))
    assert t.read().to_pylist() == [{"id": 1, "sum_total": 3, "grp": 2, "a": "newer"}]
    # a column a sequence group needs cannot be dropped: the options are validated again
    with pytest.raises(MergeTableError, match="a"):
        t.alter.drop_columns("a")


def test_set_and_unset_options(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    t.alter.set_options({"snapshot.num-retained.min": "3", "changelog-producer": "lookup"})
    assert mt.open_table(table_uri).options["changelog-producer"] == "lookup"
    t.alter.unset_options(["snapshot.num-retained.min"])
    assert t.options["snapshot.num-retained.min"] == "10"
    t.alter.set_options({"ignore-delete": "true"})
    with pytest.raises(ImmutableOptionError, match="ignore-delete"):
        t.alter.set_options({"ignore-delete": "false"})


def test_immutable_options_may_change_before_the_first_snapshot(table_uri: str) -> None:
    t = _table(table_uri)
    t.alter.set_options({"bucket": "4", "merge-engine": "first-row"})
    assert (t.table_options.bucket, t.table_options.merge_engine.value) == (4, "first-row")


BAD = [
    (lambda t: t.alter.drop_columns("id"), SchemaChangeError, "id"),
    (lambda t: t.alter.drop_columns("dt"), SchemaChangeError, "dt"),
    (lambda t: t.alter.drop_columns("nope"), SchemaChangeError, "nope"),
    (lambda t: t.alter.change_column_type("i8", pa.int64()) and t.alter.change_column_type("i8", pa.int8()), None, ""),
    (lambda t: t.alter.change_column_type("f", pa.int32()), SchemaChangeError, "f"),
    (lambda t: t.alter.change_column_type("s", pa.int64()), SchemaChangeError, "s"),
    (lambda t: t.alter.change_column_type("id", pa.decimal128(30, 0)), SchemaChangeError, "id"),
    (lambda t: t.alter.rename_column("s", "i8"), SchemaChangeError, "i8"),
    (lambda t: t.alter.rename_column("dt", "day"), SchemaChangeError, "dt"),
    (lambda t: t.alter.rename_column("nope", "x"), SchemaChangeError, "nope"),
    (lambda t: t.alter.rename_column("s", "_KEY_s"), SchemaChangeError, "_KEY_s"),
    (lambda t: t.alter.add_columns(pa.field("s", pa.int8())), SchemaChangeError, "s"),
    (lambda t: t.alter.add_columns(pa.field("n", pa.int8(), nullable=False)), SchemaChangeError, "n"),
    (lambda t: t.alter.add_columns(pa.field("n", pa.int8()), after="nope"), SchemaChangeError, "nope"),
    (lambda t: t.alter.apply([UpdateColumnType("nope", pa.int64())]), SchemaChangeError, "nope"),
    (lambda t: t.alter.set_options({"bucket": "4"}), ImmutableOptionError, "bucket"),
    (lambda t: t.alter.set_options({"merge-engine": "aggregation"}), ImmutableOptionError, "merge-engine"),
    (lambda t: t.alter.set_options({"sequence.field": "i8"}), ImmutableOptionError, "sequence.field"),
    (lambda t: t.alter.set_options({"bucket-key": "id"}), ImmutableOptionError, "bucket-key"),
    (lambda t: t.alter.set_options({"no-such-option": "1"}), OptionsError, "no-such-option"),
    (lambda t: t.alter.set_options({"write-buffer-size": "lots"}), OptionsError, "write-buffer-size"),
    (lambda t: t.alter.unset_options(["bucket"]), ImmutableOptionError, "bucket"),
    (lambda t: t.alter.unset_options(["no-such-option"]), OptionsError, "no-such-option"),
]


@pytest.mark.parametrize(("change", "error", "culprit"), [b for b in BAD if b[1] is not None])
def test_refused_changes_name_the_culprit_and_leave_the_table_byte_for_byte(
    table_uri: str, change: object, error: type[MergeTableError], culprit: str
) -> None:
    t = _table(table_uri)
    _first(t)
    before = _listing(table_uri)
    with pytest.raises(error) as info:
        change(t)  # type: ignore[operator]
    assert f"'{culprit}'" in str(info.value)
    assert getattr(info.value, "column", None) == culprit or getattr(info.value, "option", None) == culprit
    assert _listing(table_uri) == before
    assert t.table_schema.id == 0 and mt.open_table(table_uri).table_schema.id == 0


def test_narrowing_after_widening_is_refused(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    t.alter.change_column_type("i8", pa.int64())
    before = _listing(table_uri)
    with pytest.raises(SchemaChangeError, match="without losing information") as info:
        t.alter.change_column_type("i8", pa.int8())
    assert info.value.column == "i8" and _listing(table_uri) == before


def test_nullable_to_not_null_and_key_nullability_are_refused(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    from mergetable.core.evolution import UpdateColumnNullability

    with pytest.raises(SchemaChangeError, match="NOT NULL"):
        t.alter.apply([UpdateColumnNullability("s", False)])
    with pytest.raises(SchemaChangeError, match="primary key"):
        t.alter.set_column_nullable("id")
    assert mt.open_table(table_uri).table_schema.id == 0


def test_a_writer_prepared_under_an_older_schema_still_commits(table_uri: str) -> None:
    t = _table(table_uri)
    _first(t)
    stale = mt.open_table(table_uri)
    w = stale.new_writer()
    w.write(pa.table({"dt": ["a"], "id": [3], "i8": [3], "f": [3.0], "s": ["z"]}, schema=SCHEMA))
    t.alter.rename_column("s", "text")
    t.alter.add_columns(pa.field("n", pa.int64()))
    snap = stale.commit(w.prepare_commit())
    assert snap is not None and snap.schema_id == 0  # the schema it was committed with (as Paimon records it)
    assert t.read(["id", "text", "n"]).to_pylist()[-1] == {"id": 3, "text": "z", "n": None}
    # the stale object still reads with its own schema: newer files are projected into it
    t.write(pa.table({"dt": ["a"], "id": [4], "i8": [4], "f": [4.0], "text": ["w"], "n": [1]}))
    assert t.latest_snapshot().schema_id == 2  # type: ignore[union-attr]
    assert stale.commit([]) is None or stale.latest_snapshot().schema_id == 2  # type: ignore[union-attr]
    assert stale.read(["id", "s"]).to_pylist()[-1] == {"id": 4, "s": "w"}
    # a compaction through the stale object writes the newest schema, keeping the new column
    stale.compact(full=True)
    assert {f.schema_id for _, _, f in t.files()} == {2}
    assert t.read(["id", "n"]).to_pylist()[-1] == {"id": 4, "n": 1}


def test_schema_error_is_a_merge_table_error() -> None:
    assert issubclass(SchemaChangeError, SchemaError) and issubclass(ImmutableOptionError, OptionsError)
