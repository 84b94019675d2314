"""Streaming reads: positions (offsets), Paimon's scan modes, admission control, consumers, a follower.

A position is the next snapshot to read, plus whether that snapshot is first read in full (the ``*-full``
scan modes). Its JSON form ``{"nextSnapshot": N, "fullScan": false, "tableId": ...}``
(:meth:`ChangeStream.offset`) is what Spark checkpoints, so a restarted query continues exactly where it
stopped; ``tableId`` (:func:`~mergetable.commit.schemas.table_identity`) makes a restart on a table deleted and
re-created at the same path fail with :class:`~mergetable.core.errors.TableRecreatedError` instead of reading
the new table's snapshots as if they continued the old ones. Consumer records carry it too.

A batch covers whole snapshots ``[start, end)``; the full read of a snapshot is a batch of its own.
:class:`ChangeStream` is shared by the Spark source and by :func:`follow`, the plain-Python follower.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa

from mergetable.commit.consumers import ConsumerManager
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.schemas import table_identity
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import (
    CorruptMetadataError,
    DataFileError,
    SnapshotExpiredError,
    SnapshotNotFoundError,
    TableRecreatedError,
)
from mergetable.core.fileio import FileIO
from mergetable.core.predicates import Conjunct
from mergetable.core.schema import TableSchema
from mergetable.merge import create_merge_function
from mergetable.metadata.models import CommitKind, Snapshot
from mergetable.read.changes import ChangePlanner, ChangeSplit, drop_before_images, read_change_split, read_changes
from mergetable.read.reader import SplitReader
from mergetable.read.scan_modes import ScanMode, StreamOptions


@dataclass(frozen=True, order=True)
class Position:
    """The next snapshot a stream reads; ``full``: read it in full (all rows as ``+I``) first.

    >>> Position(3).to_offset()
    {'nextSnapshot': 3, 'fullScan': False}
    >>> Position.from_offset({"nextSnapshot": 4, "fullScan": True})
    Position(next_snapshot=4, full=True)
    """

    next_snapshot: int
    full: bool = False

    def to_offset(self) -> dict[str, Any]:
        return {"nextSnapshot": self.next_snapshot, "fullScan": self.full}

    @classmethod
    def from_offset(cls, offset: dict[str, Any]) -> Position:
        return cls(int(offset["nextSnapshot"]), bool(offset.get("fullScan", False)))


@dataclass(frozen=True)
class ChangeBatch:
    """The changes of snapshots ``[start.next_snapshot, end.next_snapshot)`` with a ``_row_kind`` column."""

    start: Position
    end: Position
    data: pa.Table


class ChangeStream:
    """Plans and reads a stream of one table. Picklable (Spark ships it to its workers)."""

    def __init__(
        self, fileio: FileIO, schema: TableSchema, options: StreamOptions, table_id: str | None = None
    ) -> None:
        self.fileio = fileio
        self.schema = schema
        self.options = options
        found = table_id or schema.table_uuid or table_identity(fileio)
        self.table_id: str = found or f"created-{schema.time_millis}"
        """The identity of the table this stream reads (checked against offsets, consumers and the table)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (ChangeStream, (self.fileio, self.schema, self.options, self.table_id))

    # -- identity -------------------------------------------------------------------------------------------
    def offset(self, position: Position) -> dict[str, Any]:
        """``position`` as a checkpointed offset, with this table's identity.

        >>> import pyarrow as pa, tempfile, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("k", pa.int64())]), primary_key=["k"])
        >>> stream = ChangeStream(t.fileio, t.table_schema, StreamOptions())
        >>> offset = stream.offset(Position(3))
        >>> offset["tableId"] == t.table_schema.table_uuid, stream.position(offset)
        (True, Position(next_snapshot=3, full=False))
        >>> stream.position({**offset, "tableId": "another"})
        Traceback (most recent call last):
        mergetable.core.errors.TableRecreatedError: the table at ... was re-created since the checkpoint ...
        """
        return {**position.to_offset(), "tableId": self.table_id}

    def position(self, offset: dict[str, Any]) -> Position:
        """The position of a checkpointed ``offset``; :class:`TableRecreatedError` when it was written for
        another table (an offset without ``tableId``, written before offsets carried it, is taken as is)."""
        written_for = offset.get("tableId")
        if written_for is not None and written_for != self.table_id:
            raise self._recreated("the checkpoint (its offset) was written", str(written_for), self.table_id)
        return Position.from_offset(offset)

    def check_table(self) -> None:
        """:class:`TableRecreatedError` unless the table at the path is still the one this stream opened."""
        now = table_identity(self.fileio)
        if now != self.table_id:
            raise self._recreated("the stream was opened", self.table_id, now)

    def _recreated(self, what: str, expected: str, found: str | None) -> TableRecreatedError:
        hint = "start the stream again with a new checkpoint location (or none), which reads the new table"
        if self.options.consumer_id is not None:
            cid = self.options.consumer_id
            hint += f", after resetting consumer '{cid}' (mergetable consumers URI --delete {cid})"
        return TableRecreatedError(self.fileio.uri, what, expected, found, hint)

    @cached_property
    def snapshots(self) -> SnapshotManager:
        return SnapshotManager(self.fileio)

    @cached_property
    def consumers(self) -> ConsumerManager:
        return ConsumerManager(self.fileio)

    @cached_property
    def planner(self) -> ChangePlanner:
        return ChangePlanner(ManifestIO(self.fileio), self.snapshots, self.schema)

    # -- positions ------------------------------------------------------------------------------------------
    def initial(self) -> Position:
        """Where a stream without a checkpoint starts: the consumer's progress, else the scan mode's start."""
        opts = self.options
        if opts.consumer_id is not None:
            progress = self.consumers.get(opts.consumer_id)
            if progress is not None:
                if progress.table_id is not None and progress.table_id != self.table_id:
                    raise self._recreated(
                        f"the record of consumer '{opts.consumer_id}' was written", progress.table_id, self.table_id
                    )
                resumed = Position(progress.next_snapshot, full=bool(progress.full_scan))
                if resumed.full:
                    self._load(resumed.next_snapshot)
                    return resumed
                return self._checked(resumed)
        latest = self.snapshots.latest_id()
        mode = opts.scan_mode
        if mode is ScanMode.LATEST:
            pos = Position((latest or 0) + 1)
        elif mode in (ScanMode.FROM_SNAPSHOT, ScanMode.FROM_SNAPSHOT_FULL):
            sid = opts.snapshot_id if opts.snapshot_id is not None else TagManager(self.fileio).get(str(opts.tag)).id
            # as Paimon: a start before the earliest snapshot starts at the earliest (a resumption never does)
            pos = Position(max(sid, self.snapshots.earliest_id() or sid), full=mode is ScanMode.FROM_SNAPSHOT_FULL)
        elif mode is ScanMode.FROM_TIMESTAMP:
            assert opts.timestamp_ms is not None
            try:  # the first snapshot committed at or after the timestamp
                pos = Position(self.snapshots.at_or_before(opts.timestamp_ms - 1).id + 1)
            except SnapshotNotFoundError:
                pos = Position(self.snapshots.earliest_id() or 1)
        elif mode is ScanMode.COMPACTED_FULL and self._latest_compacted(latest) is not None:
            pos = Position(int(self._latest_compacted(latest) or 0), full=True)
        else:  # latest-full (and compacted-full before any compaction)
            pos = Position(latest, full=True) if latest is not None else Position(1)
        if opts.consumer_id is not None:
            # protect the start from now on: record first, then check that it still exists (an expiration that
            # read the consumers before the record may have removed it meanwhile: then a typed error, never a
            # partial read)
            self.consumers.record(opts.consumer_id, pos.next_snapshot, self.table_id, full_scan=pos.full)
        if pos.full:
            self._load(pos.next_snapshot)
            return pos
        return self._checked(pos)

    def _latest_compacted(self, latest: int | None) -> int | None:
        earliest = self.snapshots.earliest_id() or 1
        for sid in range(latest or 0, earliest - 1, -1):
            if self.snapshots.load(sid).commit_kind is CommitKind.COMPACT:
                return sid
        return None

    def _checked(self, pos: Position) -> Position:
        """``pos`` unless its snapshot was expired (then a typed error: never skip changes silently)."""
        earliest = self.snapshots.earliest_id()
        if earliest is not None and pos.next_snapshot < earliest:
            raise self._expired(pos.next_snapshot, earliest)
        return pos

    def _expired(self, snapshot_id: int, earliest: int | None) -> SnapshotExpiredError:
        hint = (
            "start the stream again without its checkpoint, with scan.mode 'latest-full' or 'from-snapshot-full' "
            f"(scan.snapshot-id={earliest})"
        )
        if self.options.consumer_id is not None:
            cid = self.options.consumer_id
            hint += f", after resetting consumer '{cid}' (mergetable consumers URI --reset {cid} --snapshot {earliest})"
        hint += "; keep snapshots longer with consumer-id or snapshot.time-retained"
        return SnapshotExpiredError(snapshot_id, earliest, hint)

    def _load(self, snapshot_id: int) -> Snapshot:
        try:
            return self.snapshots.load(snapshot_id)
        except SnapshotNotFoundError:
            earliest = self.snapshots.earliest_id()
            if earliest is not None and snapshot_id < earliest:
                raise self._expired(snapshot_id, earliest) from None
            raise

    def latest(
        self,
        start: Position,
        until: int | None = None,
        max_files: int | None = None,
        max_rows: int | None = None,
    ) -> Position:
        """The end of the next batch after ``start`` (``start`` itself when there is nothing new).

        ``until`` caps the last snapshot (Trigger.AvailableNow); ``max-snapshots-per-trigger``, ``max_files``
        and ``max_rows`` limit a batch, which still always holds at least one whole snapshot.
        """
        self.check_table()
        if start.full:
            self._load(start.next_snapshot)
            return Position(start.next_snapshot + 1)
        latest = self.snapshots.latest_id()
        if latest is not None and until is not None:
            latest = min(latest, until)
        if latest is None or latest < start.next_snapshot:
            return start
        self._checked(start)
        end = latest + 1
        if self.options.max_snapshots_per_trigger is not None:
            end = min(end, start.next_snapshot + self.options.max_snapshots_per_trigger)
        if max_files is not None or max_rows is not None:
            files = rows = 0
            for sid in range(start.next_snapshot, end):
                planned = self.planner.follow(self._load(sid), read_overwrite=self.options.read_overwrite)
                files += sum(c.file_count for c in planned)
                rows += sum(c.row_count for c in planned)
                over = (max_files is not None and files > max_files) or (max_rows is not None and rows > max_rows)
                if over and sid > start.next_snapshot:
                    return Position(sid)
        return Position(end)

    def plan(self, start: Position, end: Position, dnf: list[Conjunct] | None = None) -> list[ChangeSplit]:
        """The change splits of the batch ``[start, end)``, in snapshot order."""
        if start.full:
            return self.planner.full(self._load(start.next_snapshot), dnf)
        out: list[ChangeSplit] = []
        for sid in range(start.next_snapshot, end.next_snapshot):
            out.extend(self.planner.follow(self._load(sid), dnf, self.options.read_overwrite))
        return out

    def commit(self, end: Position) -> None:
        """Record the consumer's progress (when the stream has a ``consumer-id``)."""
        if self.options.consumer_id is not None and not end.full:
            self.consumers.record(self.options.consumer_id, end.next_snapshot, self.table_id)

    # -- reading --------------------------------------------------------------------------------------------
    def reader(self, columns: Sequence[str] | None = None, dnf: list[Conjunct] | None = None) -> SplitReader:
        return SplitReader(self.fileio, self.schema, create_merge_function(self.schema), columns, dnf)

    def read_split(self, reader: SplitReader, change: ChangeSplit) -> Iterator[pa.Table]:
        try:
            for table in read_change_split(reader, change):
                if self.options.drop_update_before:
                    table = drop_before_images(table)
                if table.num_rows:
                    yield table
        except (DataFileError, CorruptMetadataError) as exc:
            raise self._expired_meanwhile(change.snapshot_id) or exc from exc

    def read(self, start: Position, end: Position, reader: SplitReader) -> pa.Table:
        try:
            return read_changes(reader, self.plan(start, end, reader.dnf), self.options.drop_update_before)
        except (DataFileError, CorruptMetadataError) as exc:
            raise self._expired_meanwhile(start.next_snapshot) or exc from exc

    def _expired_meanwhile(self, first: int) -> SnapshotExpiredError | None:
        """The error of a batch from snapshot ``first`` on whose files went missing while it was read, when an
        expiration explains it (snapshot ``first`` is expired now); None when the table is damaged instead."""
        earliest = self.snapshots.earliest_id()
        if earliest is not None and first >= earliest:
            return None
        return self._expired(first, earliest)


def follow(
    stream: ChangeStream,
    columns: Sequence[str] | None = None,
    dnf: list[Conjunct] | None = None,
    poll_interval_ms: int | None = None,
    stop_when_idle: bool = False,
    start: Position | None = None,
) -> Iterator[ChangeBatch]:
    """Batches of changes as they are committed, polling every ``poll_interval_ms``.

    A consumer's progress is recorded when the next batch is asked for (the previous one was handled);
    ``stop_when_idle`` ends the iteration once everything committed so far was delivered.
    """
    opts = stream.options
    reader = stream.reader(columns, dnf)
    position = start if start is not None else stream.initial()
    interval = opts.discovery_interval_ms if poll_interval_ms is None else poll_interval_ms
    while True:
        end = stream.latest(position, max_files=opts.max_files_per_trigger, max_rows=opts.max_rows_per_trigger)
        if end == position:
            if stop_when_idle:
                return
            time.sleep(interval / 1000)
            continue
        yield ChangeBatch(position, end, stream.read(position, end, reader))
        stream.commit(end)
        position = end


__all__ = ["ChangeBatch", "ChangeStream", "Position", "follow"]
