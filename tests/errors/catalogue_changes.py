"""The error catalogue's mistakes with row-level operations (delete, update, merge), history, expiration and
schema or option changes: each names its argument, column or option and leaves the table as it was."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from catalogue_support import Ctx, Mistake

import mergetable as mt
from mergetable.core.errors import (
    ArgumentError,
    FilterError,
    ImmutableOptionError,
    MergeError,
    OptionsError,
    SchemaChangeError,
    SchemaError,
    UnsupportedError,
)

AGG = pa.schema([("k", pa.int64()), ("total", pa.int64())])


def aggregation_table(ctx: Ctx) -> mt.Table:
    """An aggregation table beside the catalogue's table (its own directory, made fresh for the mistake)."""
    t = mt.create_table(str(ctx.tmp / "agg"), AGG, ["k"], options={"merge-engine": "aggregation"})
    t.write(pa.table({"k": [1], "total": [5]}))
    return t


def source(ctx: Ctx, **columns: object) -> pa.Table:
    return ctx.arrow(**columns)


DML = [
    Mistake("delete-sql-text", lambda c: c.table.delete("id = 1"), SchemaError, "filter"),  # type: ignore[arg-type]
    Mistake("delete-keys-table-as-filter", lambda c: c.table.delete(c.arrow()), SchemaError, "delete_keys"),  # type: ignore[arg-type]
    Mistake("delete-empty-filter", lambda c: c.table.delete([]), SchemaError, "filter"),
    Mistake("delete-unknown-column", lambda c: c.table.delete([("key", "=", 1)]), SchemaError, "key"),
    Mistake("delete-wrong-literal", lambda c: c.table.delete([("n", "<", "many")]), FilterError, "n"),
    Mistake(
        "delete-aggregation-without-option",
        lambda c: aggregation_table(c).delete([("k", "=", 1)]),
        OptionsError,
        "aggregation.remove-record-on-delete",
    ),
    Mistake("delete-keys-without-key", lambda c: c.table.delete_keys({"id": [1]}), SchemaError, "dt"),
    Mistake("update-without-set", lambda c: c.table.update([("id", "=", 1)]), SchemaError, "set"),
    Mistake("update-empty-set", lambda c: c.table.update([("id", "=", 1)], set={}), SchemaError, "set"),
    Mistake("update-unknown-column", lambda c: c.table.update(set={"value": "x"}), SchemaError, "value"),
    Mistake("update-key-column", lambda c: c.table.update(set={"id": 7}), SchemaError, "id"),
    Mistake("update-partition-column", lambda c: c.table.update(set={"dt": "2025-01-01"}), SchemaError, "dt"),
    Mistake("update-literal-does-not-fit", lambda c: c.table.update(set={"n": "many"}), SchemaError, "n"),
    Mistake(
        "update-aggregation",
        lambda c: aggregation_table(c).update(set={"total": 1}),
        UnsupportedError,
        "aggregation",
    ),
    Mistake(
        "merge-not-a-source", lambda c: c.table.merge(42).when_not_matched_insert_all().execute(), SchemaError, "source"
    ),
    Mistake(
        "merge-on-unknown-column",
        lambda c: c.table.merge(source(c), on=["key"]).when_not_matched_insert_all().execute(),
        SchemaError,
        "key",
    ),
    Mistake(
        "merge-condition-as-text",
        lambda c: c.table.merge(source(c)).when_matched_delete(condition="v = 'x'").execute(),  # type: ignore[arg-type]
        SchemaError,
        "condition",
    ),
    Mistake(
        "merge-update-key-column",
        lambda c: c.table.merge(source(c)).when_matched_update(set={"id": pc.field("source.id")}).execute(),
        SchemaError,
        "id",
    ),
    Mistake(
        "merge-insert-without-key",
        lambda c: c.table.merge(source(c)).when_not_matched_insert(values={"v": pc.field("source.v")}).execute(),
        SchemaError,
        "id",
    ),
    Mistake(
        "merge-two-source-rows-one-target",
        lambda c: (
            c.table.merge(pa.table({"id": [1, 1], "dt": ["2024-01-01"] * 2, "v": ["p", "q"], "n": [1, 2]}))
            .when_matched_update_all()
            .execute()
        ),
        MergeError,
        "1",
    ),
    Mistake(
        "merge-same-aliases",
        lambda c: c.table.merge(source(c), source_alias="t", target_alias="t"),
        SchemaError,
        "alias",
    ),
    Mistake("history-negative-limit", lambda c: c.table.history(limit=-1), OptionsError, "limit"),
    Mistake("expire-retain-zero", lambda c: c.table.expire_snapshots(retain_last=0), OptionsError, "retain_last"),
    Mistake(
        "expire-older-than-words",
        lambda c: c.table.expire_snapshots(older_than="yesterday"),
        OptionsError,
        "older_than",
    ),
]

ALTER = [
    Mistake("alter-drop-key-column", lambda c: c.table.alter.drop_columns("id"), SchemaChangeError, "id"),
    Mistake("alter-drop-partition-column", lambda c: c.table.alter.drop_columns(["dt"]), SchemaChangeError, "dt"),
    Mistake("alter-drop-unknown-column", lambda c: c.table.alter.drop_columns(["value"]), SchemaChangeError, "value"),
    Mistake("alter-narrow-type", lambda c: c.table.alter.change_column_type("n", pa.int32()), SchemaChangeError, "n"),
    Mistake("alter-rename-onto-existing", lambda c: c.table.alter.rename_column("v", "n"), SchemaChangeError, "n"),
    Mistake("alter-rename-partition", lambda c: c.table.alter.rename_column("dt", "day"), SchemaChangeError, "dt"),
    Mistake(
        "alter-add-not-null",
        lambda c: c.table.alter.add_columns(pa.field("extra", pa.int64(), nullable=False)),
        SchemaChangeError,
        "extra",
    ),
    Mistake("alter-add-a-name", lambda c: c.table.alter.add_columns("extra"), ArgumentError, "fields"),
    Mistake(
        "alter-add-bad-type", lambda c: c.table.alter.add_columns([("extra", "no-such-type")]), ArgumentError, "extra"
    ),
    Mistake(
        "alter-add-existing", lambda c: c.table.alter.add_columns(pa.field("v", pa.string())), SchemaChangeError, "v"
    ),
    Mistake("alter-set-bucket", lambda c: c.table.alter.set_options({"bucket": "8"}), ImmutableOptionError, "bucket"),
    Mistake(
        "alter-set-merge-engine",
        lambda c: c.table.alter.set_options({"merge-engine": "first-row"}),
        ImmutableOptionError,
        "merge-engine",
    ),
    Mistake("alter-set-unknown-option", lambda c: c.table.alter.set_options({"buckets": "2"}), OptionsError, "buckets"),
]

CHANGES = DML + ALTER
