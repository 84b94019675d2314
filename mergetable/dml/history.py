"""``Table.history()``: one row per snapshot, newest first, in deltalake's spirit (also behind Spark's
``MergeTable.history()`` and consistent with the ``snapshots`` system table).

``operation`` is what made the snapshot (:func:`mergetable.commit.operation.operation_of`): ``DELETE``/
``UPDATE``/``MERGE`` for row-level operations, ``RESTORE`` for a restore, else the commit kind.
"""

from __future__ import annotations

import pyarrow as pa

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.operation import operation_of
from mergetable.commit.rollback import visible
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.errors import ArgumentError, OptionsError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import CommitKind

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("version", pa.int64(), False),
        pa.field("timestamp", pa.timestamp("ms", tz="UTC"), False),
        pa.field("operation", pa.string(), False),
        pa.field("commit_kind", pa.string(), False),
        pa.field("commit_user", pa.string(), False),
        pa.field("commit_identifier", pa.int64(), False),
        pa.field("schema_id", pa.int64(), False),
        pa.field("read_version", pa.int64()),
        pa.field("total_record_count", pa.int64()),
        pa.field("delta_record_count", pa.int64()),
        pa.field("changelog_record_count", pa.int64()),
        pa.field("added_files", pa.int64()),
        pa.field("deleted_files", pa.int64()),
        pa.field("watermark", pa.int64()),
        pa.field("properties", pa.map_(pa.string(), pa.string())),
    ]
)


def history(fileio: FileIO, limit: int | None = None, include_compaction: bool = True) -> pa.Table:
    """The history table of the table at ``fileio`` (at most ``limit`` rows, newest first; without the COMPACT
    snapshots unless ``include_compaction``)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise OptionsError("limit", f"must be an integer >= 0 or None, got {limit!r}")
    if not isinstance(include_compaction, bool):
        raise ArgumentError("include_compaction", f"must be True or False, got {include_compaction!r}")
    snaps = visible(SnapshotManager(fileio).snapshots())[::-1]
    if not include_compaction:
        snaps = [s for s in snaps if s.commit_kind is not CommitKind.COMPACT]
    snaps = snaps[:limit]
    manifests = ManifestIO(fileio)
    rows = []
    for s in snaps:
        metas = manifests.read_list(s.delta_manifest_list)
        rows.append(
            {
                "version": s.id,
                "timestamp": s.time_millis,
                "operation": operation_of(s),
                "commit_kind": s.commit_kind.value,
                "commit_user": s.commit_user,
                "commit_identifier": s.commit_identifier,
                "schema_id": s.schema_id,
                "read_version": s.id - 1 if s.id > 1 else None,
                "total_record_count": s.total_record_count,
                "delta_record_count": s.delta_record_count,
                "changelog_record_count": s.changelog_record_count,
                "added_files": sum(m.num_added_files for m in metas),
                "deleted_files": sum(m.num_deleted_files for m in metas),
                "watermark": s.watermark,
                "properties": list((s.properties or {}).items()),
            }
        )
    return pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA)


__all__ = ["HISTORY_SCHEMA", "history"]
