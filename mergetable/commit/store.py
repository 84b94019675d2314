"""The committed state of a table: its schema, snapshots, tags and live files, and their upkeep.

:class:`TableStore` is the metadata side of :class:`mergetable.Table` (which adds writing, reading and
compaction): everything a caller may ask about what a table holds, plus tags, snapshot expiration and
orphan cleaning, through documented members, so that no caller needs the managers behind them. The
examples use ``t``, the table of the ``Table`` example.
"""

from __future__ import annotations

import datetime
from typing import Any

import pyarrow as pa

from mergetable.commit.alter import TableAlter
from mergetable.commit.maintenance import (
    ExpireResult,
    expire_policy,
    expire_snapshots,
    expire_tags,
    remove_orphan_files,
)
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.restore import resolve_target, restore
from mergetable.commit.rollback import RollbackResult, retained_ms, rollback_to, visible
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.commit.travel import resolve_travel
from mergetable.commit.txn import committed_version
from mergetable.core.errors import MergeTableError
from mergetable.core.fileio import FileIO
from mergetable.core.option_view import OptionsView
from mergetable.core.options import TableOptions
from mergetable.core.paths import PathFactory
from mergetable.core.progress import deletions
from mergetable.core.read_options import Timestamp, TimeTravel
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction, create_merge_function
from mergetable.metadata.models import DataFileMeta, ManifestEntry, Snapshot, Tag

LiveFile = tuple[tuple[str | None, ...], int, DataFileMeta]
"""(partition, bucket, file) of a live data file."""


class TableStore:
    """A table's committed state at ``fileio``, read with ``schema``.

    Attributes:
        fileio: The storage the table lives on.
        table_schema: The persisted schema (columns, keys, options) this object reads and writes with.
    """

    def __init__(self, fileio: FileIO, schema: TableSchema) -> None:
        self.fileio = fileio
        self.table_schema = schema
        self._snapshots = SnapshotManager(fileio)
        self._tags = TagManager(fileio)
        self._manifests = ManifestIO(fileio)
        self._merge_function: MergeFunction | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.fileio, self.table_schema))

    @property
    def uri(self) -> str:
        """The location the table was opened with.

        Example:
            >>> mt.open_table(t.uri).uri == t.uri
            True
        """
        return self.fileio.uri

    @property
    def schema(self) -> pa.Schema:
        """The Arrow schema of the rows.

        Example:
            >>> t.schema.names
            ['id', 'v']
        """
        return self.table_schema.arrow_schema

    @property
    def primary_key(self) -> tuple[str, ...]:
        """The primary key columns.

        Example:
            >>> t.primary_key
            ('id',)
        """
        return self.table_schema.primary_keys

    @property
    def partition_keys(self) -> tuple[str, ...]:
        """The partition columns (empty when the table is not partitioned).

        Example:
            >>> t.partition_keys
            ()
        """
        return self.table_schema.partition_keys

    @property
    def options(self) -> OptionsView:
        """The table options as stored (by Paimon name, defaults included; :attr:`table_options` types them), a
        ``dict`` that prints as a table of the options that differ from their defaults.

        Example:
            >>> t.options["merge-engine"], t.options["bucket"]  # bucket -1: dynamic buckets
            ('deduplicate', '-1')
        """
        return OptionsView(self.table_schema.options)

    @property
    def table_options(self) -> TableOptions:
        """The typed options, with their defaults.

        Example:
            >>> t.table_options.bucket, t.table_options.merge_engine.value
            (-1, 'deduplicate')
        """
        return self.table_schema.table_options

    @property
    def comment(self) -> str | None:
        """The table comment given at creation (None without one).

        Example:
            >>> t.comment is None
            True
        """
        return self.table_schema.comment

    @property
    def version(self) -> int | None:
        """The id of the latest snapshot, like deltalake's ``version()`` (None for a table never written).

        Example:
            >>> t.version
            2
        """
        return self.latest_snapshot_id()

    @property
    def alter(self) -> TableAlter:
        """Schema evolution and option changes, each one atomic commit of a new schema (``docs/evolution.md``).

        This object then reads and writes with the new schema; files written under older schemas are read
        into it by field id.

        Example:
            >>> t.alter.rename_column("v", "name").column_names
            ('id', 'name')
            >>> t.schema.names, t.read().to_pydict()
            (['id', 'name'], {'id': [1, 2], 'name': ['a', 'B']})
        """
        return TableAlter(self.fileio, self._use_schema)

    def _use_schema(self, schema: TableSchema) -> None:
        self.table_schema = schema
        self._merge_function = None

    @property
    def merge_function(self) -> MergeFunction:
        """The merge engine that combines the rows of one key (``merge-engine``).

        Example:
            >>> type(t.merge_function).__name__
            'Deduplicate'
        """
        if self._merge_function is None:
            self._merge_function = create_merge_function(self.table_schema)
        return self._merge_function

    @property
    def path_factory(self) -> PathFactory:
        """Where each file of the table lives.

        Example:
            >>> t.path_factory.data_file((), 0, "data-1.parquet") == t.fileio.join("bucket-0", "data-1.parquet")
            True
        """
        return PathFactory.for_table(self.fileio.root, self.table_schema)

    def snapshots(self) -> list[Snapshot]:
        """The table's history: every kept snapshot, oldest first, but those a rollback took out of it.

        Example:
            >>> [(s.id, s.commit_kind.name) for s in t.snapshots()]
            [(1, 'APPEND'), (2, 'APPEND')]
        """
        return visible(self._snapshots.snapshots())

    def latest_snapshot(self) -> Snapshot | None:
        """The newest snapshot (None for a table never written).

        Example:
            >>> t.latest_snapshot().id
            2
        """
        return self._snapshots.latest()

    def latest_snapshot_id(self) -> int | None:
        """The id of the newest snapshot, without loading it (None for a table never written).

        Example:
            >>> t.latest_snapshot_id()
            2
        """
        return self._snapshots.latest_id()

    def snapshot(self, snapshot_id: int) -> Snapshot:
        """Snapshot ``snapshot_id`` (:class:`SnapshotNotFoundError` if expired or never made).

        Example:
            >>> t.snapshot(1).total_record_count
            2
        """
        return self._snapshots.load(snapshot_id)

    def resolve_travel(self, travel: TimeTravel) -> Snapshot | None:
        """The snapshot a read with ``travel`` uses (the latest when none is given; None for an empty table),
        resolved by :func:`mergetable.commit.travel.resolve_travel`.

        Example:
            >>> t.resolve_travel(TimeTravel(version="1")).id
            1
        """
        return resolve_travel(self._snapshots, self._tags, travel)

    def txn_version(self, app_id: str) -> int | None:
        """The last version of application ``app_id`` written with ``txn_app_id``/``txnAppId`` (None: never).

        Example:
            >>> _ = t.write(pa.table({"id": [3], "v": ["c"]}), txn_app_id="loader", txn_version=4)
            >>> again = t.write(pa.table({"id": [3], "v": ["c"]}), txn_app_id="loader", txn_version=4)
            >>> t.txn_version("loader"), again.snapshot
            (4, None)
        """
        return committed_version(self.latest_snapshot(), app_id)

    def resolve_snapshot(
        self,
        snapshot_id: int | None = None,
        timestamp_ms: Timestamp | None = None,
        tag: str | None = None,
        version: int | str | None = None,
    ) -> Snapshot | None:
        """The snapshot a read should use: by id, the newest at or before a time, a tag, a version, or the latest.

        ``timestamp_ms`` takes epoch milliseconds, a ``datetime`` or an ISO-8601 string (no zone: local time);
        ``version`` is a tag name, else a snapshot id. Give at most one.

        Example:
            >>> t.resolve_snapshot(timestamp_ms=t.snapshot(1).time_millis).id
            1
        """
        return self.resolve_travel(TimeTravel.of(snapshot_id, timestamp_ms, tag, version))

    def restore(
        self,
        snapshot_id: int | str | None = None,
        timestamp_ms: Timestamp | None = None,
        tag: str | None = None,
        version: int | str | None = None,
    ) -> Snapshot | None:
        """Commit a new snapshot with the state of an earlier one (Delta's RESTORE; nothing is removed).

        The target is given as in time travel: exactly one of ``snapshot_id``, ``timestamp_ms``, ``tag`` and
        ``version``. See ``docs/evolution.md``. Returns None when the latest snapshot already has exactly
        those files.

        Example:
            >>> t.restore(snapshot_id=1).properties
            {'restored-from': '1'}
        """
        target = resolve_target(self._snapshots, self._tags, "restore", snapshot_id, timestamp_ms, tag, version)
        return restore(self.fileio, self.table_schema, target)

    def find_commit(self, commit_user: str, identifier: int, after_snapshot_id: int | None = None) -> Snapshot | None:
        """The snapshot newer than ``after_snapshot_id`` that ``commit_user`` made with ``identifier``, if any.

        Engines with retried commits use it for exactly-once: commit again only when this is None.

        Example:
            >>> w = t.new_writer(); w.write(pa.table({"id": [4], "v": ["d"]}))
            >>> t.commit(w.prepare_commit(), commit_user="job-1", identifier=7) == t.find_commit("job-1", 7)
            True
        """
        return self._snapshots.find_committed(commit_user, identifier, after_snapshot_id)

    def create_tag(
        self,
        name: str,
        snapshot_id: int | None = None,
        time_retained_ms: int | None = None,
        time_retained: datetime.timedelta | int | None = None,
    ) -> Tag:
        """Name a snapshot (default: the latest) so that it is kept and can be read by name.

        ``time_retained`` (a ``timedelta`` or milliseconds; ``time_retained_ms`` is the same in ms): snapshot
        expiration deletes the tag once its creation time plus this retention has passed, as in Paimon.

        Example:
            >>> t.create_tag("v1", snapshot_id=1).id
            1
            >>> t.read(tag="v1").to_pydict()
            {'id': [1, 2], 'v': ['a', 'b']}
        """
        snap = (
            self.latest_snapshot() if snapshot_id is None else self._tags.tagged_or_live(self._snapshots, snapshot_id)
        )
        if snap is None:
            raise MergeTableError("cannot tag an empty table (no snapshot yet)")
        retained = retained_ms(time_retained if time_retained is not None else time_retained_ms)
        return self._tags.create(name, snap, retained)

    def rollback_to(
        self,
        snapshot_id: int | str | None = None,
        timestamp_ms: Timestamp | None = None,
        tag: str | None = None,
        version: int | str | None = None,
    ) -> RollbackResult:
        """Make a snapshot's state the latest again, with a new commit; the snapshots after it leave the history
        and the tags after it are deleted (see ``docs/evolution.md``).

        The target is given as in time travel: exactly one of ``snapshot_id``, ``timestamp_ms``, ``tag`` and
        ``version``. Safe with concurrent writers, expiration and orphan cleaning; it deletes no data file.

        Raises:
            ArgumentError: None or several targets given.
            SnapshotNotFoundError: The snapshot expired (and no tag holds it) or never existed; nothing changed.

        Example:
            >>> w = mt.open_table(t.uri); _ = w.write(pa.table({"id": [8], "v": ["h"]}))
            >>> r = w.rollback_to(snapshot_id=str(w.latest_snapshot_id() - 1)); r.removed_snapshots == [r.committed - 1]
            True
        """
        return rollback_to(self.fileio, self.table_schema, snapshot_id, timestamp_ms, tag, version)

    def delete_tag(self, name: str) -> None:
        """Delete a tag (its snapshot's files go with the next expiration).

        Example:
            >>> _ = t.create_tag("v1"); t.delete_tag("v1"); t.tags()
            {}
        """
        self._tags.delete(name)

    def tags(self) -> dict[str, Tag]:
        """Every tag by name.

        Example:
            >>> _ = t.create_tag("v1"); {name: tag.id for name, tag in t.tags().items()}
            {'v1': 2}
        """
        return self._tags.list()

    def files(self, snapshot_id: int | None = None) -> list[LiveFile]:
        """(partition, bucket, file) of every live data file of a snapshot (default: the latest).

        Example:
            >>> sorted(f.row_count for _, _, f in t.files())
            [1, 2]
        """
        snap = self.latest_snapshot() if snapshot_id is None else self.snapshot(int(snapshot_id))
        return [(e.partition, e.bucket, e.file) for e in self._manifests.live_entries(snap)]

    def delta_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The files ``snapshot`` added (``ADD``) and removed (``DELETE``).

        Example:
            >>> [(e.kind.name, e.file.row_count) for e in t.delta_entries(t.snapshot(2))]
            [('ADD', 1)]
        """
        return self._manifests.delta_entries(snapshot)

    def changelog_entries(self, snapshot: Snapshot) -> list[ManifestEntry]:
        """The changelog files ``snapshot`` added (none unless ``changelog-producer`` makes them).

        Example:
            >>> t.changelog_entries(t.snapshot(2))
            []
        """
        return self._manifests.changelog_entries(snapshot)

    def expire_snapshots(
        self,
        older_than: Timestamp | datetime.timedelta | None = None,
        retain_last: int | None = None,
        dry_run: bool = False,
        now_ms: int | None = None,
        progress: bool | None = None,
    ) -> ExpireResult:
        """Expire tags past their retention, then old snapshots, deleting files no kept snapshot or tag uses.

        Without arguments the ``snapshot.*`` options decide (``snapshot.num-retained.min/max``,
        ``snapshot.time-retained``, ``snapshot.expire.limit``). With ``older_than`` and/or ``retain_last``
        they replace the options for this run, as pyiceberg's ``expire_snapshots``: every snapshot strictly
        older than ``older_than`` expires except the newest ``retain_last`` (default 1: the latest is always
        kept). Tags and consumers protect what they use; only files the table's metadata references are
        deleted (see ``docs/maintenance.md``).

        Args:
            older_than: A ``datetime``, an ISO-8601 string (no zone: local time), epoch milliseconds, or a
                ``timedelta`` meaning that long ago.
            retain_last: How many of the newest snapshots to keep (≥ 1).
            dry_run: Compute and return what would be expired and deleted, changing nothing.
            now_ms: The current time (tests; tag retention and ``timedelta`` are measured from it).
            progress: A bar over the file deletions on stderr (default: when run interactively).

        Raises:
            OptionsError: ``older_than`` or ``retain_last`` is malformed (the message names it).

        Example:
            >>> t.expire_snapshots(retain_last=1, dry_run=True).expired_snapshots
            [1]
            >>> len(t.snapshots())
            2
            >>> opts = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}
            >>> mt.Table(t.fileio, t.table_schema.with_options(opts)).expire_snapshots().expired_snapshots
            [1]
        """
        policy = expire_policy(older_than, retain_last, now_ms)
        with deletions("expire", progress):
            tags, tag_files = expire_tags(self.fileio, self.table_schema, now_ms, dry_run)
            result = expire_snapshots(self.fileio, self.table_schema, now_ms, policy, dry_run, tags)
        result.expired_tags, result.deleted_files = tags, [*tag_files, *result.deleted_files]
        return result

    def remove_orphan_files(
        self, older_than_ms: int | None = None, dry_run: bool = False, force: bool = False, progress: bool | None = None
    ) -> list[str]:
        """Delete the table's own files that no snapshot or tag references, older than ``older_than_ms``.

        Only files of mergetable's layout and naming are candidates (never a README, hidden or ``_``
        files, another table, a user's file); see ``docs/maintenance.md``. The default cutoff is one day
        ago; a younger one is refused unless ``force`` (files of commits in flight could go). ``progress``: a bar
        over the deletions on stderr (default: when run interactively).

        Example:
            >>> t.fileio.write_bytes(t.fileio.join("bucket-0", "data-stray.parquet"), b"")
            >>> t.fileio.write_bytes(t.fileio.join("bucket-0", "notes.csv"), b"")
            >>> [p.rsplit("/", 1)[-1] for p in t.remove_orphan_files(older_than_ms=2**62, force=True)]
            ['data-stray.parquet']
        """
        with deletions("orphans", progress):
            return remove_orphan_files(self.fileio, self.table_schema, older_than_ms, dry_run, force)
