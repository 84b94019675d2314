"""Paimon's system tables as Arrow tables: ``$snapshots``, ``$schemas``, ``$options``, ``$files``,
``$manifests``, ``$tags``, ``$consumers``, ``$partitions`` and ``$buckets``.

Column names and types are Paimon's (``TIMESTAMP(3)`` is an Arrow ``timestamp[ms]`` without a zone holding
the UTC wall-clock time; Paimon's columns that mergetable has no data for, such as row ids, are null).
Values print the way Paimon prints them: partitions of ``$files``, ``$manifests`` and ``$buckets`` as
``{v1, v2}``, of ``$partitions`` as ``k1=v1/k2=v2``, keys as ``[k1, k2]``, per-column statistics as
``{col=value, ...}`` and tag retention as an ISO-8601 duration (``PT1H``).

Time travel (``snapshot_id``, ``tag``, ``timestamp_ms`` or ``version``, as in ``Table.read``) applies where
Paimon honours ``scan.*`` options: ``$files``, ``$manifests``, ``$partitions`` and ``$buckets``. The others
describe the table as it is.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.operation import operation_of
from mergetable.commit.rollback import iso_duration
from mergetable.commit.schemas import SchemaManager
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.commit.travel import resolve_travel
from mergetable.core.errors import SnapshotNotFoundError, UnsupportedError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import CONSUMER_PREFIX, PathFactory
from mergetable.core.read_options import Timestamp, TimeTravel
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import ConsumerProgress, ManifestEntry, Snapshot

_S, _L, _I, _TS, _B = pa.string(), pa.int64(), pa.int32(), pa.timestamp("ms"), pa.bool_()


def _schema(*cols: tuple[str, pa.DataType, bool]) -> pa.Schema:
    return pa.schema([pa.field(n, t, nullable=nullable) for n, t, nullable in cols])


SCHEMAS: dict[str, pa.Schema] = {
    "snapshots": _schema(
        ("snapshot_id", _L, False),
        ("schema_id", _L, False),
        ("commit_user", _S, False),
        ("commit_identifier", _L, False),
        ("commit_kind", _S, False),
        ("commit_time", _TS, False),
        ("base_manifest_list", _S, False),
        ("delta_manifest_list", _S, False),
        ("changelog_manifest_list", _S, True),
        ("total_record_count", _L, True),
        ("delta_record_count", _L, True),
        ("changelog_record_count", _L, True),
        ("watermark", _L, True),
        ("next_row_id", _L, True),
        ("operation", _S, True),
        ("writer_version", _S, True),
    ),
    "schemas": _schema(
        ("schema_id", _L, False),
        ("fields", _S, False),
        ("partition_keys", _S, False),
        ("primary_keys", _S, False),
        ("options", _S, False),
        ("comment", _S, True),
        ("update_time", _TS, False),
    ),
    "options": _schema(("key", _S, False), ("value", _S, False)),
    "files": _schema(
        ("partition", _S, True),
        ("bucket", _I, False),
        ("file_path", _S, False),
        ("file_format", _S, False),
        ("schema_id", _L, False),
        ("level", _I, False),
        ("record_count", _L, False),
        ("file_size_in_bytes", _L, False),
        ("min_key", _S, True),
        ("max_key", _S, True),
        ("null_value_counts", _S, False),
        ("min_value_stats", _S, False),
        ("max_value_stats", _S, False),
        ("min_sequence_number", _L, True),
        ("max_sequence_number", _L, True),
        ("creation_time", _TS, True),
        ("deleteRowCount", _L, True),
        ("file_source", _S, True),
        ("first_row_id", _L, True),
        ("write_cols", pa.list_(_S), True),
    ),
    "manifests": _schema(
        ("file_name", _S, False),
        ("file_size", _L, False),
        ("num_added_files", _L, False),
        ("num_deleted_files", _L, False),
        ("schema_id", _L, False),
        ("min_partition_stats", _S, True),
        ("max_partition_stats", _S, True),
        ("min_row_id", _L, True),
        ("max_row_id", _L, True),
    ),
    "tags": _schema(
        ("tag_name", _S, False),
        ("snapshot_id", _L, False),
        ("schema_id", _L, False),
        ("commit_time", _TS, False),
        ("record_count", _L, True),
        ("create_time", _TS, True),
        ("time_retained", _S, True),
    ),
    "consumers": _schema(("consumer_id", _S, False), ("next_snapshot_id", _L, False)),
    "partitions": _schema(
        ("partition", _S, True),
        ("record_count", _L, False),
        ("file_size_in_bytes", _L, False),
        ("file_count", _L, False),
        ("last_update_time", _TS, True),
        ("created_at", _TS, True),
        ("created_by", _S, True),
        ("updated_by", _S, True),
        ("options", _S, True),
        ("total_buckets", _I, False),
        ("done", _B, False),
        ("deleted_record_count", _L, True),
    ),
    "buckets": _schema(
        ("partition", _S, True),
        ("bucket", _I, False),
        ("record_count", _L, False),
        ("file_size_in_bytes", _L, False),
        ("file_count", _L, False),
        ("last_update_time", _TS, True),
    ),
    "table_indexes": _schema(
        ("partition", _S, True),
        ("bucket", _I, False),
        ("index_type", _S, False),
        ("file_name", _S, False),
        ("file_size", _L, False),
        ("row_count", _L, False),
        (
            "dv_ranges",
            pa.list_(
                pa.struct(
                    [
                        pa.field("f0", _S, False),
                        pa.field("f1", pa.int32(), False),
                        pa.field("f2", pa.int32(), False),
                        pa.field("_CARDINALITY", _L, True),
                    ]
                )
            ),
            True,
        ),
        ("row_range_start", _L, True),
        ("row_range_end", _L, True),
        ("index_field_id", _I, True),
        ("index_field_name", _S, True),
    ),
}
TIME_TRAVEL_TABLES = frozenset({"files", "manifests", "partitions", "buckets", "table_indexes"})


def _java(v: Any) -> str:
    """A value as Java's ``toString`` prints it (booleans lower case, null as ``null``)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _row(values: Sequence[Any]) -> str:
    return "{" + ", ".join(_java(v) for v in values) + "}"


def _array(values: Sequence[Any]) -> str:
    return "[" + ", ".join(_java(v) for v in values) + "]"


def _map(names: Sequence[str], values: Sequence[Any]) -> str:
    return "{" + ", ".join(f"{n}={_java(v)}" for n, v in zip(names, values)) + "}"


class _Context:
    def __init__(self, fileio: FileIO, schema: TableSchema) -> None:
        self.fileio, self.schema = fileio, schema
        self.snapshots, self.tags, self.manifests = SnapshotManager(fileio), TagManager(fileio), ManifestIO(fileio)
        self.paths = PathFactory.for_table(fileio.root, schema)

    def schema_of(self, schema_id: int) -> TableSchema:
        if schema_id == self.schema.id:
            return self.schema
        path = self.paths.schema_file(schema_id)
        return TableSchema.from_json(self.fileio.read_bytes(path), path)


def _snapshots(ctx: _Context, _: Snapshot | None) -> list[dict[str, Any]]:
    return [
        {
            "snapshot_id": s.id,
            "schema_id": s.schema_id,
            "commit_user": s.commit_user,
            "commit_identifier": s.commit_identifier,
            "commit_kind": s.commit_kind.value,
            "commit_time": s.time_millis,
            "base_manifest_list": s.base_manifest_list,
            "delta_manifest_list": s.delta_manifest_list,
            "changelog_manifest_list": s.changelog_manifest_list,
            "total_record_count": s.total_record_count,
            "delta_record_count": s.delta_record_count,
            "changelog_record_count": s.changelog_record_count or 0,  # 0 without changelog, as in Paimon
            "watermark": s.watermark,
            "operation": operation_of(s),
        }
        for s in ctx.snapshots.snapshots()
    ]


def _schemas(ctx: _Context, _: Snapshot | None) -> list[dict[str, Any]]:
    rows = []
    for i in SchemaManager(ctx.fileio).ids():
        s = ctx.schema_of(i)
        rows.append(
            {
                "schema_id": s.id,
                "fields": json.dumps([f.model_dump(mode="json", by_alias=True, exclude_none=True) for f in s.fields]),
                "partition_keys": json.dumps(list(s.partition_keys)),
                "primary_keys": json.dumps(list(s.primary_keys)),
                "options": json.dumps(dict(s.options)),
                "comment": s.comment,
                "update_time": s.time_millis,
            }
        )
    return rows


def _options(ctx: _Context, _: Snapshot | None) -> list[dict[str, Any]]:
    return [{"key": k, "value": v} for k, v in sorted(ctx.schema.options.items())]


def _files(ctx: _Context, snap: Snapshot | None) -> list[dict[str, Any]]:
    rows = []
    for e in sorted(ctx.manifests.live_entries(snap), key=lambda e: (_row(e.partition), e.bucket, e.file.file_name)):
        f = e.file
        file_schema = ctx.schema_of(f.schema_id)
        keys = list(file_schema.trimmed_primary_keys)
        value_cols = list(f.value_stats_cols or [c for c in file_schema.column_names if c not in keys])
        stats = {
            "null": dict(zip(keys, f.key_stats.null_counts)) | dict(zip(value_cols, f.value_stats.null_counts)),
            "min": dict(zip(keys, f.key_stats.min_values)) | dict(zip(value_cols, f.value_stats.min_values)),
            "max": dict(zip(keys, f.key_stats.max_values)) | dict(zip(value_cols, f.value_stats.max_values)),
        }
        cols = [c for c in file_schema.column_names if c in stats["null"]]
        rows.append(
            {
                "partition": _row(e.partition),
                "bucket": e.bucket,
                "file_path": ctx.paths.data_file(e.partition, e.bucket, f.file_name),
                "file_format": "parquet",
                "schema_id": f.schema_id,
                "level": f.level,
                "record_count": f.row_count,
                "file_size_in_bytes": f.file_size,
                "min_key": _array(f.min_key),
                "max_key": _array(f.max_key),
                "null_value_counts": _map(cols, [stats["null"][c] for c in cols]),
                "min_value_stats": _map(cols, [stats["min"][c] for c in cols]),
                "max_value_stats": _map(cols, [stats["max"][c] for c in cols]),
                "min_sequence_number": f.min_sequence_number,
                "max_sequence_number": f.max_sequence_number,
                "creation_time": f.creation_time,
                "deleteRowCount": f.delete_row_count,
                "file_source": f.file_source.name,
                "write_cols": list(f.write_cols) if f.write_cols is not None else None,
            }
        )
    return rows


def _manifests(ctx: _Context, snap: Snapshot | None) -> list[dict[str, Any]]:
    metas = ctx.manifests.data_manifests(snap) if snap is not None else []
    return [
        {
            "file_name": m.file_name,
            "file_size": m.file_size,
            "num_added_files": m.num_added_files,
            "num_deleted_files": m.num_deleted_files,
            "schema_id": m.schema_id,
            "min_partition_stats": _row(m.partition_stats.min_values),
            "max_partition_stats": _row(m.partition_stats.max_values),
        }
        for m in metas
    ]


def _tags(ctx: _Context, _: Snapshot | None) -> list[dict[str, Any]]:
    return [
        {
            "tag_name": name,
            "snapshot_id": t.id,
            "schema_id": t.schema_id,
            "commit_time": t.time_millis,
            "record_count": t.total_record_count,
            "create_time": t.tag_create_time or None,
            "time_retained": iso_duration(t.tag_time_retained),
        }
        for name, t in ctx.tags.list().items()
    ]


def _consumers(ctx: _Context, _: Snapshot | None) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(ctx.fileio.list_names(ctx.paths.consumer_dir)):
        if name.startswith(CONSUMER_PREFIX):
            consumer = name[len(CONSUMER_PREFIX) :]
            path = ctx.paths.consumer_file(consumer)
            progress = ConsumerProgress.from_json(ctx.fileio.read_bytes(path), path)
            rows.append({"consumer_id": consumer, "next_snapshot_id": progress.next_snapshot})
    return rows


def _grouped(
    entries: list[ManifestEntry], key: Callable[[ManifestEntry], Any]
) -> dict[Any, tuple[list[ManifestEntry], dict[str, Any]]]:
    groups: dict[Any, list[ManifestEntry]] = {}
    for e in entries:
        groups.setdefault(key(e), []).append(e)
    out = {}
    for k, es in sorted(groups.items(), key=lambda kv: str(kv[0])):
        out[k] = (
            es,
            {
                "record_count": sum(e.file.row_count for e in es),
                "file_size_in_bytes": sum(e.file.file_size for e in es),
                "file_count": len(es),
                "last_update_time": max(e.file.creation_time for e in es),
            },
        )
    return out


def _partitions(ctx: _Context, snap: Snapshot | None) -> list[dict[str, Any]]:
    keys = ctx.schema.partition_keys
    default = ctx.schema.table_options.partition_default_name
    rows = []
    for part, (es, agg) in _grouped(ctx.manifests.live_entries(snap), lambda e: e.partition).items():
        text = "/".join(f"{k}={default if v is None else v}" for k, v in zip(keys, part))
        rows.append({"partition": text, **agg, "total_buckets": es[0].total_buckets, "done": False})
    return rows


def _buckets(ctx: _Context, snap: Snapshot | None) -> list[dict[str, Any]]:
    groups = _grouped(ctx.manifests.live_entries(snap), lambda e: (e.partition, e.bucket))
    rows = [{"partition": _row(p), "bucket": b, **agg} for (p, b), (_, agg) in groups.items()]
    return sorted(rows, key=lambda r: (r["partition"], r["bucket"]))


def _table_indexes(ctx: _Context, snap: Snapshot | None) -> list[dict[str, Any]]:
    """Paimon's ``$table_indexes``: one row per live index file (deletion vectors)."""
    rows = []
    for e in sorted(IndexManifestIO(ctx.fileio).entries(snap), key=lambda e: (_row(e.partition), e.bucket)):
        f = e.index_file
        ranges = [
            {"f0": r.data_file_name, "f1": r.offset, "f2": r.length, "_CARDINALITY": r.cardinality}
            for r in f.deletion_vectors_ranges
        ]
        rows.append(
            {
                "partition": _row(e.partition),
                "bucket": e.bucket,
                "index_type": f.index_type,
                "file_name": f.file_name,
                "file_size": f.file_size,
                "row_count": f.row_count,
                "dv_ranges": ranges,
            }
        )
    return rows


_BUILDERS: dict[str, Callable[[_Context, Snapshot | None], list[dict[str, Any]]]] = {
    "snapshots": _snapshots,
    "schemas": _schemas,
    "options": _options,
    "files": _files,
    "manifests": _manifests,
    "tags": _tags,
    "consumers": _consumers,
    "partitions": _partitions,
    "buckets": _buckets,
    "table_indexes": _table_indexes,
}
SYSTEM_TABLES = tuple(_BUILDERS)


def system_table(
    fileio: FileIO,
    schema: TableSchema,
    name: str,
    snapshot_id: int | str | None = None,
    tag: str | None = None,
    timestamp_ms: Timestamp | None = None,
    version: int | str | None = None,
) -> pa.Table:
    """The system table ``name`` (with or without the leading ``$``) as an Arrow table.

    At most one of ``snapshot_id``, ``tag``, ``timestamp_ms`` and ``version`` (as in ``Table.read``), resolved
    by :func:`mergetable.commit.travel.resolve_travel`, for the tables that have time travel.
    """
    key = name.removeprefix("$").lower()
    if key not in _BUILDERS:
        raise UnsupportedError(f"unknown system table '{name}' (known: {', '.join(SYSTEM_TABLES)})")
    travel = TimeTravel.of(snapshot_id, timestamp_ms, tag, version)
    if travel.given and key not in TIME_TRAVEL_TABLES:
        raise UnsupportedError(
            f"system table '{key}' has no time travel (only {', '.join(sorted(TIME_TRAVEL_TABLES))} have)"
        )
    ctx = _Context(fileio, schema)
    snap = resolve_travel(ctx.snapshots, ctx.tags, travel) if key in TIME_TRAVEL_TABLES else None
    if travel.given and snap is None:
        raise SnapshotNotFoundError("no snapshot to travel to")
    target = SCHEMAS[key]
    rows = _BUILDERS[key](ctx, snap)
    return pa.Table.from_pylist(rows, schema=target) if rows else target.empty_table()


__all__ = ["SCHEMAS", "SYSTEM_TABLES", "TIME_TRAVEL_TABLES", "system_table"]
