"""The Python API mistakes of the error catalogue: creating, opening, writing, reading, options, upkeep."""

from __future__ import annotations

import time

import pyarrow as pa
from catalogue_support import SCHEMA, Ctx, Mistake

import mergetable as mt
from mergetable.core.errors import (
    ArgumentError,
    FilterError,
    MissingExtraError,
    OptionsError,
    SchemaError,
    SnapshotNotFoundError,
    TableExistsError,
    TableNotFoundError,
    TagExistsError,
    UnsupportedError,
)

KV = pa.schema([("id", pa.int64()), ("v", pa.string())])


def create(ctx: Ctx, schema: object = KV, primary_key: object = ("id",), **kwargs: object) -> mt.Table:
    return mt.create_table(ctx.new_uri, schema, primary_key, **kwargs)  # type: ignore[arg-type]


def opts(**options: str) -> dict[str, str]:
    return {k.replace("_", "-"): v for k, v in options.items()}


CREATE = [
    Mistake("schema-as-dict", lambda c: create(c, {"id": "int64", "v": "string"}), ArgumentError, "schema"),
    Mistake("schema-as-list", lambda c: create(c, [("id", pa.int64())]), ArgumentError, "schema"),
    Mistake("schema-none", lambda c: create(c, None), ArgumentError, "schema"),
    Mistake("primary-key-as-string", lambda c: create(c, primary_key="id"), ArgumentError, "primary_key"),
    Mistake(
        "append-bucket-without-bucket-key",
        lambda c: create(c, primary_key=None, options={"bucket": "4"}),
        OptionsError,
        "bucket-key",
    ),
    Mistake(
        "append-merge-engine",
        lambda c: create(c, primary_key=[], options={"merge-engine": "first-row"}),
        OptionsError,
        "merge-engine",
    ),
    Mistake("primary-key-unknown-column", lambda c: create(c, primary_key=["key"]), SchemaError, "key"),
    Mistake("primary-key-twice", lambda c: create(c, primary_key=["id", "id"]), SchemaError, "id"),
    Mistake("primary-key-of-ints", lambda c: create(c, primary_key=[0]), ArgumentError, "primary_key"),
    Mistake(
        "partition-keys-as-string",
        lambda c: create(c, SCHEMA, ["id", "dt"], partition_keys="dt"),
        ArgumentError,
        "partition_keys",
    ),
    Mistake(
        "partition-not-in-schema", lambda c: create(c, SCHEMA, ["id", "dt"], partition_keys=["day"]), SchemaError, "day"
    ),
    Mistake(
        "cross-partition-fixed-bucket",
        lambda c: create(c, SCHEMA, ["id"], partition_keys=["dt"], options={"bucket": "4"}),
        OptionsError,
        "bucket",
    ),
    Mistake("partition-is-whole-key", lambda c: create(c, SCHEMA, ["dt"], partition_keys=["dt"]), SchemaError, "dt"),
    Mistake(
        "nested-key-type",
        lambda c: create(c, pa.schema([("id", pa.list_(pa.int64())), ("v", pa.string())])),
        SchemaError,
        "id",
    ),
    Mistake(
        "float-partition-type",
        lambda c: create(c, pa.schema([("id", pa.int64()), ("f", pa.float64())]), ["id", "f"], partition_keys=["f"]),
        SchemaError,
        "f",
    ),
    Mistake(
        "duplicate-column",
        lambda c: create(c, pa.schema([("id", pa.int64()), ("v", pa.string()), ("v", pa.int64())])),
        SchemaError,
        "v",
    ),
    Mistake(
        "reserved-column-name",
        lambda c: create(c, pa.schema([("id", pa.int64()), ("_SEQUENCE_NUMBER", pa.int64())])),
        SchemaError,
        "_SEQUENCE_NUMBER",
    ),
    Mistake(
        "unsupported-arrow-type",
        lambda c: create(c, pa.schema([("id", pa.int64()), ("u", pa.dense_union([]))])),
        UnsupportedError,
        "u",
    ),
    Mistake("existing-table", lambda c: mt.create_table(c.uri, SCHEMA, ["id", "dt"], ["dt"]), TableExistsError, "/t"),
    Mistake(
        "existing-table-other-key",
        lambda c: mt.create_table(c.uri, SCHEMA, ["id", "v"], exist_ok=True),
        TableExistsError,
        "primary key",
    ),
    Mistake("uri-none", lambda c: mt.create_table(None, KV, ["id"]), ArgumentError, "uri"),  # type: ignore[arg-type]
    Mistake("options-as-list", lambda c: create(c, options=["bucket=4"]), ArgumentError, "options"),
    Mistake("bucket-zero", lambda c: create(c, options={"bucket": "0"}), OptionsError, "bucket"),
    Mistake("bucket-not-a-number", lambda c: create(c, options={"bucket": "four"}), OptionsError, "bucket"),
    Mistake(
        "bucket-key-dynamic",
        lambda c: create(c, options={"bucket": "-1", "bucket-key": "id"}),
        OptionsError,
        "bucket-key",
    ),
    Mistake(
        "dynamic-bucket-target-zero",
        lambda c: create(c, options={"dynamic-bucket.target-row-num": "0"}),
        OptionsError,
        "dynamic-bucket.target-row-num",
    ),
    Mistake(
        "postpone-bucket-with-deletion-vectors",
        lambda c: create(c, options={"bucket": "-2", "deletion-vectors.enabled": "true"}),
        OptionsError,
        "bucket",
    ),
    Mistake("bucket-absurd", lambda c: create(c, options={"bucket": str(10**30)}), OptionsError, "bucket"),
    Mistake(
        "write-buffer-size-beyond-int64",
        lambda c: create(c, options={"write-buffer-size": "99999999999999 tb"}),
        OptionsError,
        "write-buffer-size",
    ),
    Mistake(
        "target-file-size-negative",
        lambda c: create(c, options={"target-file-size": "-1"}),
        OptionsError,
        "target-file-size",
    ),
    Mistake("unknown-option", lambda c: create(c, options={"buckets": "4"}), OptionsError, "buckets"),
    Mistake(
        "option-typo", lambda c: create(c, options={"changelog.producer": "input"}), OptionsError, "changelog.producer"
    ),
    Mistake("bad-merge-engine", lambda c: create(c, options=opts(merge_engine="upsert")), OptionsError, "merge-engine"),
    Mistake(
        "bad-changelog-producer",
        lambda c: create(c, options=opts(changelog_producer="always")),
        OptionsError,
        "changelog-producer",
    ),
    Mistake(
        "retained-min-zero",
        lambda c: create(c, options={"snapshot.num-retained.min": "0"}),
        OptionsError,
        "snapshot.num-retained.min",
    ),
    Mistake(
        "retained-min-above-max",
        lambda c: create(c, options={"snapshot.num-retained.min": "20", "snapshot.num-retained.max": "5"}),
        OptionsError,
        "snapshot.num-retained",
    ),
    Mistake(
        "bad-memory-size", lambda c: create(c, options=opts(target_file_size="huge")), OptionsError, "target-file-size"
    ),
    Mistake(
        "bad-duration",
        lambda c: create(c, options={"snapshot.time-retained": "an hour"}),
        OptionsError,
        "snapshot.time-retained",
    ),
    Mistake("bad-boolean", lambda c: create(c, options=opts(write_only="yes please")), OptionsError, "write-only"),
    Mistake(
        "compaction-trigger-zero",
        lambda c: create(c, options={"num-sorted-run.compaction-trigger": "0"}),
        OptionsError,
        "num-sorted-run.compaction-trigger",
    ),
    Mistake("orc-format", lambda c: create(c, options={"file.format": "orc"}), OptionsError, "file.format"),
    Mistake("sequence-field-unknown", lambda c: create(c, options={"sequence.field": "ts"}), SchemaError, "ts"),
    Mistake(
        "unknown-aggregate-function",
        lambda c: create(
            c,
            pa.schema([("id", pa.int64()), ("n", pa.int64())]),
            options={"merge-engine": "aggregation", "fields.n.aggregate-function": "summ"},
        ),
        OptionsError,
        "summ",
    ),
    Mistake(
        "aggregate-of-unknown-column",
        lambda c: create(c, options={"merge-engine": "aggregation", "fields.total.aggregate-function": "sum"}),
        OptionsError,
        "total",
    ),
    Mistake(
        "rowkind-field-not-string", lambda c: create(c, options={"rowkind.field": "id"}), SchemaError, "rowkind.field"
    ),
]

OPEN = [
    Mistake("open-missing-path", lambda c: mt.open_table(str(c.tmp / "nowhere")), TableNotFoundError, "nowhere"),
    Mistake("open-data-file", lambda c: mt.open_table(c.data_file), TableNotFoundError, ".parquet"),
    Mistake(
        "open-text-file",
        lambda c: (c.tmp / "notes.txt").write_text("x") and mt.open_table(str(c.tmp / "notes.txt")),
        TableNotFoundError,
        "notes.txt",
    ),
    Mistake("open-plain-directory", lambda c: mt.open_table(str(c.tmp)), TableNotFoundError, lambda c: str(c.tmp)),
    Mistake(
        "open-bucket-directory",
        lambda c: mt.open_table(c.uri + "/dt=2024-01-01/bucket-0"),
        TableNotFoundError,
        "bucket-0",
    ),
    Mistake("open-uri-as-path-list", lambda c: mt.open_table([c.uri]), ArgumentError, "uri"),  # type: ignore[arg-type]
]

STORAGE = [
    Mistake(
        "storage-option-typo-local",
        lambda c: mt.open_table(c.uri, storage_options={"auto_mkdirr": True}),
        OptionsError,
        "auto_mkdirr",
    ),
    Mistake(
        "storage-option-s3-name-on-local",
        lambda c: mt.open_table(c.uri, storage_options={"endpoint_url": "http://localhost:9000"}),
        OptionsError,
        "endpoint_url",
    ),
    Mistake(
        "storage-options-as-string",
        lambda c: mt.open_table(c.uri, storage_options="anon=true"),  # type: ignore[arg-type]
        ArgumentError,
        "storage_options",
    ),
    Mistake(
        "storage-option-typo-on-create",
        lambda c: create(c, storage_options={"auto_mkdri": True}),
        OptionsError,
        "auto_mkdri",
    ),
    Mistake("s3-without-s3fs", lambda c: mt.open_table("s3://bucket/t"), MissingExtraError, "s3", without="s3fs"),
    Mistake("unknown-protocol", lambda c: mt.open_table("foo://bucket/t"), ArgumentError, "foo"),
]

WRITE = [
    Mistake("write-unknown-column", lambda c: c.table.write(c.rows(extra=[1, 2])), SchemaError, "extra"),
    Mistake("write-missing-key-column", lambda c: c.table.write(c.rows(id=None)), SchemaError, "id"),
    Mistake("write-missing-partition-column", lambda c: c.table.write(c.rows(dt=None)), SchemaError, "dt"),
    Mistake("write-null-key", lambda c: c.table.write(c.rows(id=[1, None])), SchemaError, "id"),
    Mistake("write-null-partition-key", lambda c: c.table.write(c.rows(dt=[None, "x"])), SchemaError, "dt"),
    Mistake("write-uncastable-key", lambda c: c.table.write(c.rows(id=["one", "two"])), SchemaError, "id"),
    Mistake("write-uncastable-value", lambda c: c.table.write(c.arrow(n=["lots", "few"])), SchemaError, "n"),
    Mistake("write-overflowing-value", lambda c: c.table.write(c.arrow(n=pa.array([1.5, 1e30]))), SchemaError, "n"),
    Mistake(
        "write-overwrite-mode-string", lambda c: c.table.write(c.rows(), overwrite="append"), ArgumentError, "overwrite"
    ),
    Mistake(
        "write-overwrite-unknown-partition",
        lambda c: c.table.write(c.rows(), overwrite={"day": "2024-01-01"}),
        SchemaError,
        "day",
    ),
    Mistake("write-bad-row-kind", lambda c: c.table.write(c.rows(), row_kind="+X"), SchemaError, "+X"),
    Mistake("write-row-kind-number", lambda c: c.table.write(c.rows(), row_kind=7), SchemaError, "row kind 7"),
    Mistake("write-row-kinds-too-few", lambda c: c.table.write(c.rows(), row_kind=["+I"]), SchemaError, "row_kind"),
    Mistake("write-list-of-ints", lambda c: c.table.write([1, 2, 3]), SchemaError, "data"),
    Mistake("write-list-of-tuples", lambda c: c.table.write([(1, "2024-01-01", "a", 1)]), SchemaError, "data"),
    Mistake("write-none", lambda c: c.table.write(None), SchemaError, "data"),
    Mistake("write-string", lambda c: c.table.write("id,dt\n1,x"), SchemaError, "data"),
    Mistake("write-ragged-columns", lambda c: c.table.write(c.rows(v=["x"])), SchemaError, "data"),
    Mistake(
        "write-duplicate-columns",
        lambda c: c.table.write(pa.table([[1], ["d"], ["v"], ["w"]], ["id", "dt", "v", "v"])),
        SchemaError,
        "v",
    ),
    Mistake(
        "write-target-columns-without-key",
        lambda c: c.table.write(c.rows(id=None), target_columns=["dt", "v"]),
        SchemaError,
        "id",
    ),
    Mistake(
        "write-target-columns-string",
        lambda c: c.table.write(c.rows(), target_columns="v"),
        ArgumentError,
        "target_columns",
    ),
    Mistake(
        "write-target-column-unknown",
        lambda c: c.table.write(c.rows(), target_columns=["id", "dt", "w"]),
        SchemaError,
        "w",
    ),
    Mistake("write-txn-without-version", lambda c: c.table.write(c.rows(), txn_app_id="loader"), OptionsError, "txn"),
    Mistake(
        "write-txn-negative-version",
        lambda c: c.table.write(c.rows(), txn_app_id="a", txn_version=-1),
        OptionsError,
        "txn",
    ),
]

READ = [
    Mistake("read-unknown-column", lambda c: c.table.read(columns=["id", "value"]), SchemaError, "value"),
    Mistake("read-columns-as-string", lambda c: c.table.read(columns="id"), OptionsError, "columns"),
    Mistake("read-no-columns", lambda c: c.table.read(columns=[]), OptionsError, "columns"),
    Mistake("filter-unknown-column", lambda c: c.table.read(filter=[("value", "=", "a")]), SchemaError, "value"),
    Mistake("filter-wrong-literal", lambda c: c.table.read(filter=[("id", "=", "abc")]), FilterError, "id"),
    Mistake("filter-list-for-equals", lambda c: c.table.read(filter=[("id", "=", [1, 2])]), FilterError, "id"),
    Mistake("filter-scalar-for-in", lambda c: c.table.read(filter=[("id", "in", 1)]), FilterError, "id"),
    Mistake("filter-bad-op", lambda c: c.table.read(filter=[("id", "~", 1)]), SchemaError, "~"),
    Mistake("filter-sql-like", lambda c: c.table.read(filter=[("v", "like", "a%")]), SchemaError, "like"),
    Mistake("filter-pair", lambda c: c.table.read(filter=[("id", "=")]), SchemaError, "filter"),
    Mistake("filter-as-text", lambda c: c.table.read(filter="id > 1"), ArgumentError, "filter"),
    Mistake("filter-bare-tuple", lambda c: c.table.read(filter=("id", "=", 1)), ArgumentError, "filter"),
    Mistake("snapshot-missing", lambda c: c.table.read(snapshot_id=99), SnapshotNotFoundError, "99"),
    Mistake("snapshot-not-a-number", lambda c: c.table.read(snapshot_id="latest"), OptionsError, "snapshot_id"),
    Mistake(
        "timestamp-before-first",
        lambda c: c.table.read(timestamp_ms=1000),
        SnapshotNotFoundError,
        "1970-01-01T00:00:01",
    ),
    Mistake("timestamp-bad-iso", lambda c: c.table.read(timestamp_ms="2024-13-45T25:00"), OptionsError, "timestamp_ms"),
    Mistake("timestamp-words", lambda c: c.table.read(timestamp_ms="yesterday"), OptionsError, "yesterday"),
    Mistake("snapshot-and-tag", lambda c: c.table.read(snapshot_id=1, tag="first"), OptionsError, "tag"),
    Mistake("unknown-tag", lambda c: c.table.read(tag="release"), SnapshotNotFoundError, "release"),
    Mistake("unknown-version", lambda c: c.table.read(version="v9"), SnapshotNotFoundError, "v9"),
    Mistake("unknown-read-argument", lambda c: c.table.read(snapshot=1), ArgumentError, "snapshot"),
    Mistake("incremental-reversed", lambda c: c.table.read(incremental_between=(2, 1)), OptionsError, "incremental"),
    Mistake(
        "incremental-one-end", lambda c: c.table.read(incremental_between=(1,)), OptionsError, "incremental_between"
    ),
    Mistake("scan-unknown-column", lambda c: c.table.scan(columns=["value"]), SchemaError, "value"),
    Mistake("scan-wrong-literal", lambda c: c.table.scan(filter=[("n", ">", "big")]), FilterError, "n"),
    Mistake("count-unknown-filter-column", lambda c: c.table.count(filter=[("value", "=", 1)]), SchemaError, "value"),
    Mistake("count-missing-snapshot", lambda c: c.table.count(snapshot_id=42), SnapshotNotFoundError, "42"),
    Mistake("count-unknown-tag", lambda c: c.table.count(tag="nope"), SnapshotNotFoundError, "nope"),
    Mistake("plan-zero-split-size", lambda c: c.table.plan(target_split_size=0), OptionsError, "split_size"),
    Mistake("changelog-unknown-start", lambda c: c.table.changelog("nope", 2), SnapshotNotFoundError, "nope"),
    Mistake("changelog-bad-mode", lambda c: c.table.changelog(1, 2, mode="everything"), OptionsError, "everything"),
    Mistake("system-table-unknown", lambda c: c.table.system_table("snapshotz"), UnsupportedError, "snapshotz"),
]

UPKEEP = [
    Mistake("tag-exists", lambda c: c.table.create_tag("first"), TagExistsError, "first"),
    Mistake("tag-missing-snapshot", lambda c: c.table.create_tag("v9", snapshot_id=99), SnapshotNotFoundError, "99"),
    Mistake("tag-empty-name", lambda c: c.table.create_tag(""), ArgumentError, "name"),
    Mistake("tag-name-with-slash", lambda c: c.table.create_tag("a/b"), ArgumentError, "a/b"),
    Mistake("tag-delete-unknown", lambda c: c.table.delete_tag("release"), SnapshotNotFoundError, "release"),
    Mistake("rollback-missing-snapshot", lambda c: c.table.rollback_to(snapshot_id=99), SnapshotNotFoundError, "99"),
    Mistake("rollback-unknown-tag", lambda c: c.table.rollback_to(tag="release"), SnapshotNotFoundError, "release"),
    Mistake("rollback-no-target", lambda c: c.table.rollback_to(), ArgumentError, "snapshot_id"),
    Mistake("rollback-two-targets", lambda c: c.table.rollback_to(snapshot_id=1, tag="first"), ArgumentError, "tag"),
    Mistake("restore-missing-snapshot", lambda c: c.table.restore(snapshot_id=99), SnapshotNotFoundError, "99"),
    Mistake(
        "compact-unknown-partition-column",
        lambda c: c.table.compact(partitions=[{"day": "2024-01-01"}]),
        SchemaError,
        "day",
    ),
    Mistake(
        "compact-partitions-as-dict",
        lambda c: c.table.compact(partitions={"dt": "2024-01-01"}),
        ArgumentError,
        "partitions",
    ),
    Mistake(
        "orphans-too-young",
        lambda c: c.table.remove_orphan_files(older_than_ms=int(time.time() * 1000)),
        OptionsError,
        "older_than_ms",
    ),
    Mistake(
        "consumer-reset-missing-snapshot", lambda c: c.table.reset_consumer("job", 99), SnapshotNotFoundError, "99"
    ),
]

CATALOGUE = CREATE + OPEN + STORAGE + WRITE + READ + UPKEEP
