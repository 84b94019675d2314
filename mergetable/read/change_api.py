"""The change-data part of the :class:`~mergetable.table.Table` facade (a mixin, so the facade stays thin).

``changelog`` (batch change data between two snapshots, Paimon's ``incremental-between`` with its scan
modes), ``audit_log`` (Paimon's ``$audit_log`` view), ``stream``/``follow`` (a plain-Python streaming
reader sharing the planning of the Spark source) and the consumers (list, reset, delete).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa

from mergetable.commit.consumers import ConsumerManager
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import ArgumentError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.predicates import Filters
from mergetable.core.read_options import to_epoch_millis
from mergetable.core.rowkind import ROW_KIND_COLUMN
from mergetable.core.schema import TableSchema
from mergetable.read.changes import ChangePlanner, read_changes
from mergetable.read.incremental import IncrementalRange, SnapshotRef, resolve_range, resolve_timestamp_range
from mergetable.read.reader import SplitReader
from mergetable.read.scan_modes import IncrementalMode, StreamOptions, parse_incremental_mode
from mergetable.read.stream import ChangeBatch, ChangeStream, follow

AUDIT_ROW_KIND = "rowkind"
"""The row-kind column of the ``$audit_log`` view, named and placed (first) as in Paimon."""


def as_audit_log(changes: pa.Table) -> pa.Table:
    """Change rows (``_row_kind`` last) in the ``$audit_log`` shape (``rowkind`` first)."""
    kinds = changes.column(ROW_KIND_COLUMN)
    rest = changes.drop_columns([ROW_KIND_COLUMN])
    return rest.add_column(0, pa.field(AUDIT_ROW_KIND, pa.string(), False), kinds)


class ChangeData:
    """Change data of a table. Mixed into ``Table``, which provides ``fileio``, ``table_schema`` and
    ``split_reader``."""

    fileio: FileIO
    table_schema: TableSchema

    def split_reader(self, columns: Sequence[str] | None = None, filter: Filters | None = None) -> SplitReader:
        raise NotImplementedError

    @property
    def _snapshot_manager(self) -> SnapshotManager:
        return SnapshotManager(self.fileio)

    def change_planner(self) -> ChangePlanner:
        """The planner of this table's change splits (shared by the Python and Spark readers)."""
        return ChangePlanner(ManifestIO(self.fileio), self._snapshot_manager, self.table_schema)

    def change_range(
        self,
        start: SnapshotRef | None = None,
        end: SnapshotRef | None = None,
        timestamps: tuple[Any, Any] | None = None,
    ) -> IncrementalRange:
        """Snapshots ``(start, end]`` from ids or tags (a tag name first), or from timestamps (ms, ISO strings)."""
        if timestamps is not None:
            if start is not None or end is not None:
                raise ArgumentError("start_snapshot_exclusive", "give either start and end or timestamps, not both")
            t1, t2 = (to_epoch_millis(t, "timestamps") for t in timestamps)
            return resolve_timestamp_range(self._snapshot_manager, t1, t2)
        if start is None or end is None:
            raise ArgumentError("start_snapshot_exclusive", "give start and end snapshots (ids or tags) or timestamps")
        return resolve_range(self._snapshot_manager, TagManager(self.fileio), (start, end))

    def changelog(
        self,
        start_snapshot_exclusive: SnapshotRef | None = None,
        end_snapshot_inclusive: SnapshotRef | None = None,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        mode: str | IncrementalMode = IncrementalMode.AUTO,
        timestamps: tuple[Any, Any] | None = None,
    ) -> pa.Table:
        """The changes of snapshots ``(start, end]`` in commit order, with a ``_row_kind`` column (+I -U +U -D).

        ``mode`` is Paimon's ``incremental-between-scan-mode``: ``auto`` (changelog files when the table
        has a ``changelog-producer``, else deltas), ``delta`` (each APPEND commit's records as written,
        unmerged; a retract is ``-D``; no before-images; OVERWRITE and COMPACT commits are skipped),
        ``changelog`` (the producer's changelog files) or ``diff`` (the difference between the two
        snapshots). Between two tags it is always the diff of the tagged snapshots, which works after the
        snapshots between them expired. ``timestamps=(t1, t2)`` gives the range as commit times; an empty
        table has no changes.

        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"])
        >>> _ = t.write(pa.table({"k": [1, 2], "v": [10, 20]}))
        >>> _ = t.delete_keys(pa.table({"k": [2]}))
        >>> t.changelog(1, 2).to_pylist()
        [{'k': 2, 'v': None, '_row_kind': '-D'}]
        >>> t.changelog(0, 2, mode="diff").to_pylist()
        [{'k': 1, 'v': 10, '_row_kind': '+I'}]
        """
        window = self.change_range(start_snapshot_exclusive, end_snapshot_inclusive, timestamps)
        reader = self.split_reader(columns, filter)
        changes = self.change_planner().between(window, parse_incremental_mode(mode), reader.dnf)
        return read_changes(reader, changes)

    def audit_log(
        self,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        snapshot_id: int | None = None,
        incremental_between: tuple[SnapshotRef, SnapshotRef] | None = None,
        mode: str | IncrementalMode = IncrementalMode.AUTO,
    ) -> pa.Table:
        """Paimon's ``$audit_log``: a ``rowkind`` column first, then the rows of a snapshot (all ``+I``) or,
        with ``incremental_between``, the changes of that range."""
        if incremental_between is not None:
            if snapshot_id is not None:
                raise ArgumentError("incremental_between", "cannot be combined with snapshot_id")
            return as_audit_log(self.changelog(*incremental_between, columns=columns, filter=filter, mode=mode))
        snapshots = self._snapshot_manager
        snap = snapshots.load(snapshot_id) if snapshot_id is not None else snapshots.latest()
        reader = self.split_reader(columns, filter)
        if snap is None:
            return as_audit_log(read_changes(reader, []))
        return as_audit_log(read_changes(reader, self.change_planner().snapshot(snap, reader.dnf)))

    # -- streaming ----------------------------------------------------------------------------------------------
    def stream(self, options: Mapping[str, Any] | None = None, **kwargs: Any) -> ChangeStream:
        """A change stream with Paimon's option names (``scan.mode``, ``scan.snapshot-id``, ``consumer-id`` …)."""
        merged = {**(options or {}), **{k.replace("_", "-"): v for k, v in kwargs.items()}}
        return ChangeStream(self.fileio, self.table_schema, StreamOptions.parse(merged))

    def follow(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        consumer_id: str | None = None,
        poll_interval_ms: int | None = None,
        columns: Sequence[str] | None = None,
        filter: Filters | None = None,
        stop_when_idle: bool = False,
    ) -> Iterator[ChangeBatch]:
        """Follow the table: an iterator of :class:`ChangeBatch` (Arrow tables with ``_row_kind``).

        ``options`` take the streaming read options (``scan.mode`` …, see :mod:`mergetable.read.scan_modes`).
        With ``consumer_id`` the progress is stored in the table: a new follower with the same id resumes
        after the last batch it handed out and asked past, and expiration keeps the snapshots it needs.

        >>> import tempfile, pyarrow as pa, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("k", pa.int64())]), ["k"])
        >>> _ = t.write(pa.table({"k": [1]}))
        >>> [b.data.to_pylist() for b in t.follow(consumer_id="doc", stop_when_idle=True)]
        [[{'k': 1, '_row_kind': '+I'}]]
        >>> t.consumers()
        {'doc': 2}
        """
        opts = dict(options or {})
        if consumer_id is not None:
            opts["consumer-id"] = consumer_id
        stream = self.stream(opts)
        dnf = self.split_reader(columns, filter).dnf
        return follow(stream, columns, dnf, poll_interval_ms, stop_when_idle)

    # -- consumers ----------------------------------------------------------------------------------------------
    def consumers(self) -> dict[str, int]:
        """Every consumer with the next snapshot it will read."""
        return {cid: p.next_snapshot for cid, p in ConsumerManager(self.fileio).list().items()}

    def reset_consumer(self, consumer_id: str, snapshot_id: int) -> None:
        """Make ``consumer_id`` read ``snapshot_id`` next (it must exist, or be the next one to be committed)."""
        latest = self._snapshot_manager.latest_id() or 0
        earliest = self._snapshot_manager.earliest_id() or 1
        if not earliest <= snapshot_id <= latest + 1:
            raise SnapshotNotFoundError(
                f"cannot reset consumer '{consumer_id}' to snapshot {snapshot_id}: "
                f"snapshots {earliest}..{latest + 1} are possible"
            )
        ConsumerManager(self.fileio).record(consumer_id, snapshot_id)

    def delete_consumer(self, consumer_id: str) -> None:
        ConsumerManager(self.fileio).delete(consumer_id)


__all__ = ["AUDIT_ROW_KIND", "ChangeData", "as_audit_log"]
