"""The commit protocol: messages → manifests → ``snapshot-N`` published create-if-absent, with retries.

Each attempt reads the latest snapshot, derives the delta (ADD/DELETE entries), checks conflicts against
the live files, writes manifests and tries to create ``snapshot-(latest+1)``. Losing that race means
another commit landed first: the attempt's manifests are removed and the loop retries on the new latest
snapshot (after a randomized, growing wait) until ``commit.max-retries`` or ``commit.timeout``.
Nothing becomes visible before the snapshot file exists, and it appears whole or not at all.
Writers commit through :class:`mergetable.commit.transaction.WriteTransaction`, which also deletes the
files of a commit that failed.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mergetable.commit.bucket_index import IndexBases, fold_hash_files
from mergetable.commit.clock import check_clock, max_clock_skew
from mergetable.commit.index_manifest import IndexManifestIO, marks_rows
from mergetable.commit.manifests import ManifestIO, fold
from mergetable.commit.outcome import publish_snapshot_file
from mergetable.commit.overwrite import Overwrite
from mergetable.commit.sequence import assign_sequence_numbers, next_sequence_number
from mergetable.commit.snapshots import SnapshotManager
from mergetable.commit.txn import carried_properties, committed_version
from mergetable.core.buckets import Partition
from mergetable.core.errors import (
    AlreadyCommittedError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    MergeTableError,
)
from mergetable.core.fileio import FileIO
from mergetable.core.options import POSTPONE_BUCKET
from mergetable.core.paths import PathFactory
from mergetable.core.predicates import comparable
from mergetable.core.schema import TableSchema
from mergetable.core.txn import Txn
from mergetable.metadata.models import (
    CommitKind,
    CommitMessage,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    ManifestEntry,
    ManifestFileMeta,
    Snapshot,
)

STORAGE_RETRIES = 3
Precondition = Callable[[Snapshot | None], None]
"""Called with the snapshot each commit attempt builds on, before it writes anything; raising aborts the commit."""


@dataclass
class _Attempt:
    written: list[str] = field(default_factory=list)
    index_files: list[IndexFileMeta] = field(default_factory=list)


class Committer:
    def __init__(self, fileio: FileIO, schema: TableSchema, commit_user: str) -> None:
        self.fileio = fileio
        self.schema = schema
        self.options = schema.table_options
        self.commit_user = commit_user
        self.snapshots = SnapshotManager(fileio)
        self.manifests = ManifestIO(fileio)
        self.indexes = IndexManifestIO(fileio)
        self._index_of: Snapshot | None = None
        self.index_bases: IndexBases | None = None
        """What the writers of a dynamic-bucket table assigned against (:mod:`mergetable.commit.bucket_index`)."""
        self.paths = PathFactory(fileio.root)

    # -- public ------------------------------------------------------------------------------------
    def commit(
        self,
        messages: Sequence[CommitMessage],
        identifier: int,
        overwrite: Overwrite | None = None,
        properties: dict[str, str] | None = None,
        txn: Txn | None = None,
        precondition: Precondition | None = None,
    ) -> list[Snapshot]:
        """Commit the data increment (APPEND/OVERWRITE) then the compaction increment (COMPACT).

        ``txn`` makes the data commit idempotent (see :mod:`mergetable.commit.txn`): it raises
        :class:`AlreadyCommittedError` and commits nothing when the application's version is already there.
        """
        self.schema.check_writable()
        out = []
        data_msgs = [
            m
            for m in messages
            if m.new_files or m.deleted_files or m.changelog_files or m.new_index_files or m.deleted_index_files
        ]
        if data_msgs or overwrite is not None:
            # A commit that removes files or marks rows deleted (an append table's delete, update or merge) is an
            # overwrite, as in Paimon: the files it removes must still be live.
            # (a dynamic bucket's HASH index files come with every write: they remove nothing)
            removes = any(m.deleted_files or marks_rows(m) for m in data_msgs)
            kind = CommitKind.OVERWRITE if overwrite is not None or removes else CommitKind.APPEND
            out.append(self._commit_with_retry(data_msgs, kind, identifier, overwrite, properties, txn, precondition))
        compact_msgs = [
            m
            for m in messages
            if m.compact_before
            or m.compact_after
            or m.compact_changelog_files
            or m.compact_index_files
            or m.compact_deleted_index_files
        ]
        if compact_msgs:
            out.append(self._commit_with_retry(compact_msgs, CommitKind.COMPACT, identifier, None, properties))
        return out

    def commit_kind(
        self,
        messages: Sequence[CommitMessage],
        kind: CommitKind,
        identifier: int,
        properties: dict[str, str],
        precondition: Precondition | None = None,
        index_of: Snapshot | None = None,
    ) -> Snapshot:
        """Commit the data increment of ``messages`` as one snapshot of ``kind`` with conflict checks
        (a restore: OVERWRITE whose deleted files must still be live, on the snapshot ``precondition`` accepts;
        ``index_of``: the snapshot whose deletion vectors the new one has, the restored one)."""
        self._index_of = index_of
        try:
            return self._commit_with_retry(messages, kind, identifier, None, properties, precondition=precondition)
        finally:
            self._index_of = None

    # -- the retry loop ------------------------------------------------------------------------------
    def _commit_with_retry(
        self,
        messages: Sequence[CommitMessage],
        kind: CommitKind,
        identifier: int,
        overwrite: Overwrite | None,
        properties: dict[str, str] | None,
        txn: Txn | None = None,
        precondition: Precondition | None = None,
    ) -> Snapshot:
        opts = self.options
        started = time.monotonic()
        attempt = 0
        first_latest: int | None = None
        storage_failures = 0
        while True:
            latest = None
            try:
                latest = self.snapshots.latest()
                if attempt == 0:
                    first_latest = latest.id if latest else None
                else:
                    done = self.snapshots.find_committed(self.commit_user, identifier, first_latest)
                    if done is not None and done.commit_kind is kind:
                        return done
                if precondition is not None:
                    precondition(latest)
                if txn is not None:
                    committed = committed_version(latest, txn.app_id)
                    if committed is not None and committed >= txn.version:
                        raise AlreadyCommittedError(txn.app_id, txn.version, committed)
                props = carried_properties(latest, properties, txn)
                result = self._try_commit_once(latest, messages, kind, identifier, overwrite, props)
            except CorruptMetadataError:
                if latest is None or self.snapshots.exists(latest.id):
                    raise
                result = None  # the base was expired while being read: a newer snapshot exists, lose the race
            except OSError:
                # Nothing of this attempt can be published (the snapshot create was not reached or was
                # resolved as not ours), so the attempt is simply made again, a few times.
                storage_failures += 1
                if storage_failures > STORAGE_RETRIES:
                    raise
                time.sleep(random.uniform(0.5, 1.0) * opts.commit_min_retry_wait * 2**storage_failures / 1000.0)
                continue
            if result is not None:
                self.snapshots.commit_hint(result.id)
                return result
            attempt += 1
            elapsed_ms = (time.monotonic() - started) * 1000
            if attempt > opts.commit_max_retries or (
                opts.commit_timeout is not None and elapsed_ms > opts.commit_timeout
            ):
                raise CommitConflictError(
                    f"commit gave up after {attempt} attempts ({elapsed_ms:.0f} ms): other commits kept winning "
                    "(raise 'commit.max-retries' or 'commit.timeout')"
                )
            wait = min(opts.commit_max_retry_wait, opts.commit_min_retry_wait * (2 ** min(attempt, 20)))
            time.sleep(random.uniform(0.5, 1.0) * wait / 1000.0)

    def _try_commit_once(
        self,
        latest: Snapshot | None,
        messages: Sequence[CommitMessage],
        kind: CommitKind,
        identifier: int,
        overwrite: Overwrite | None,
        properties: dict[str, str] | None,
    ) -> Snapshot | None:
        live = self.manifests.live_entries(latest)
        next_seq = next_sequence_number(latest, live)
        if kind is not CommitKind.COMPACT:  # numbered against this attempt's base: above every earlier commit
            stamp = (latest.id if latest else 0) + 1 if self.options.sequence_snapshot_ordering else None
            messages, next_seq = assign_sequence_numbers(messages, next_seq, stamp)
        delta = self._delta_entries(live, messages, kind, overwrite)
        self._check_conflicts(live, delta, kind)
        dropped: set[Partition] = set()
        if overwrite is not None:  # a partition may hold index files and no data file (a HASH entry of a delete)
            held = {e.partition for e in live} | {e.partition for e in self.indexes.entries(latest)}
            dropped = {p for p in held if overwrite.covers(p)}
        compaction = kind is CommitKind.COMPACT
        live_files = None
        if any(m.compact_index_files if compaction else marks_rows(m) for m in messages):
            live_files = {(e.partition, e.bucket, e.file.file_name) for e in fold([*live, *delta])}
        index_entries = self.indexes.updated(latest, messages, dropped, compaction, live_files)
        hashes = None
        if not compaction and self._index_of is None:
            live_index = self.indexes.entries(latest)
            base = live_index if index_entries is None else index_entries
            hashes = fold_hash_files(self.indexes, live_index, base, messages, self.index_bases, dropped)
            if hashes is not None:
                index_entries = hashes.entries
        self._check_vectors(latest, delta, index_entries)
        changelog = [
            ManifestEntry(
                kind=FileKind.ADD, partition=m.partition, bucket=m.bucket, total_buckets=m.total_buckets, file=f
            )
            for m in messages
            for f in (m.compact_changelog_files if kind is CommitKind.COMPACT else m.changelog_files)
        ]
        attempt = _Attempt(index_files=hashes.written if hashes is not None else [])
        try:
            index_manifest = latest.index_manifest if latest else None
            if self._index_of is not None:
                index_manifest = self._index_of.index_manifest
            elif index_entries is not None:
                index_manifest = self.indexes.write(index_entries) if index_entries else None
                if index_manifest is not None:
                    attempt.written.append(index_manifest)
            snapshot = self._write_snapshot(
                latest, delta, changelog, kind, identifier, properties, attempt, next_seq, index_manifest
            )
        except CommitStateUnknownError:
            raise  # the snapshot may be published: everything it references stays
        except BaseException:
            self._cleanup(attempt)
            raise
        if snapshot is None:
            self._cleanup(attempt)
        elif hashes is not None and hashes.superseded:
            self.indexes.delete_files(hashes.superseded)  # merged into the files the snapshot lists
        return snapshot

    def _write_snapshot(
        self,
        latest: Snapshot | None,
        delta: list[ManifestEntry],
        changelog: list[ManifestEntry],
        kind: CommitKind,
        identifier: int,
        properties: dict[str, str] | None,
        attempt: _Attempt,
        next_seq: int,
        index_manifest: str | None = None,
    ) -> Snapshot | None:
        opts = self.options
        sid = max(self.schema.id, latest.schema_id if latest else 0)  # a schema change is never undone
        base = self._merged_base(latest, sid, attempt)
        delta_metas = self.manifests.write_manifests(delta, sid, opts.manifest_target_file_size)
        attempt.written += [m.file_name for m in delta_metas]
        base_name, base_size = self.manifests.write_list(base)
        attempt.written.append(base_name)  # each file listed once written: a failure after it removes it
        delta_name, delta_size = self.manifests.write_list(delta_metas)
        attempt.written.append(delta_name)
        changelog_name = changelog_size = None
        if changelog:
            cl_metas = self.manifests.write_manifests(changelog, sid, opts.manifest_target_file_size)
            attempt.written += [m.file_name for m in cl_metas]
            changelog_name, changelog_size = self.manifests.write_list(cl_metas)
            attempt.written.append(changelog_name)
        added = sum(e.file.row_count for e in delta if e.kind is FileKind.ADD)
        removed = sum(e.file.row_count for e in delta if e.kind is FileKind.DELETE)
        new_id = (latest.id if latest else 0) + 1
        now = int(time.time() * 1000)
        check_clock(self.fileio, latest, now, max_clock_skew(opts), self.paths.manifest_file(delta_name))
        snapshot = Snapshot(
            id=new_id,
            schema_id=sid,
            base_manifest_list=base_name,
            base_manifest_list_size=base_size,
            delta_manifest_list=delta_name,
            delta_manifest_list_size=delta_size,
            changelog_manifest_list=changelog_name,
            changelog_manifest_list_size=changelog_size,
            commit_user=self.commit_user,
            commit_identifier=identifier,
            commit_kind=kind,
            time_millis=max(now, latest.time_millis if latest else 0),
            total_record_count=(latest.total_record_count if latest else 0) + added - removed,
            delta_record_count=added - removed,
            changelog_record_count=sum(e.file.row_count for e in changelog) if changelog else None,
            properties=properties or None,
            next_sequence_number=next_seq,
            index_manifest=index_manifest,
        )
        if self.snapshots.expired(new_id):  # the base is so old that this id was made and expired since
            return None
        path = self.paths.snapshot_file(new_id)
        if not publish_snapshot_file(self.fileio, path, snapshot.to_json().encode()):
            return None
        try:
            recycled = self.snapshots.expired(new_id)
        except (OSError, MergeTableError):  # published, and nothing tells otherwise: it stands
            recycled = False
        if recycled:
            # The id was made and expired between the check above and the create (expiration writes its hint
            # before it deletes): this snapshot is off the table's lineage. Take it back and lose the race.
            self.fileio.delete_quietly([path])
            return None
        return snapshot

    def _merged_base(self, latest: Snapshot | None, schema_id: int, attempt: _Attempt) -> list[ManifestFileMeta]:
        """The previous state's manifests, compacted into few files once there are many."""
        if latest is None:
            return []
        metas = self.manifests.data_manifests(latest)
        opts = self.options
        small = [m for m in metas if m.file_size < opts.manifest_target_file_size]
        deleted = sum(m.num_deleted_files for m in metas)
        if len(small) < opts.manifest_merge_min_count and deleted * 300 < opts.manifest_full_compaction_threshold_size:
            return metas
        entries = fold(self.manifests.read_entries(metas))
        merged = self.manifests.write_manifests(entries, schema_id, opts.manifest_target_file_size)
        attempt.written += [m.file_name for m in merged]
        return merged

    def _cleanup(self, attempt: _Attempt) -> None:
        self.fileio.delete_quietly([self.paths.manifest_file(n) for n in attempt.written])
        self.indexes.delete_files(attempt.index_files)

    # -- delta and conflicts -------------------------------------------------------------------------
    def _delta_entries(
        self,
        live: list[ManifestEntry],
        messages: Sequence[CommitMessage],
        kind: CommitKind,
        overwrite: Overwrite | None,
    ) -> list[ManifestEntry]:
        delta: list[ManifestEntry] = []
        if overwrite is not None:
            for e in live:
                if overwrite.covers(e.partition):
                    delta.append(e.model_copy(update={"kind": FileKind.DELETE}))
        for m in messages:
            common: dict[str, Any] = {"partition": m.partition, "bucket": m.bucket, "total_buckets": m.total_buckets}
            if kind is CommitKind.COMPACT:
                delta += [ManifestEntry(kind=FileKind.DELETE, file=f, **common) for f in m.compact_before]
                delta += [ManifestEntry(kind=FileKind.ADD, file=f, **common) for f in m.compact_after]
            else:
                delta += [ManifestEntry(kind=FileKind.DELETE, file=f, **common) for f in m.deleted_files]
                delta += [ManifestEntry(kind=FileKind.ADD, file=f, **common) for f in m.new_files]
        return delta

    def _check_conflicts(self, live: list[ManifestEntry], delta: list[ManifestEntry], kind: CommitKind) -> None:
        buckets: dict[Partition, int] = {}
        for e in live:
            if e.bucket != POSTPONE_BUCKET:  # staged rows of a postpone table have no bucket count yet
                buckets.setdefault(e.partition, e.total_buckets)
        if kind is not CommitKind.OVERWRITE:
            for e in delta:
                if e.bucket == POSTPONE_BUCKET:
                    continue
                if e.kind is FileKind.ADD and buckets.get(e.partition, e.total_buckets) != e.total_buckets:
                    raise CommitConflictError(
                        f"Try to write partition {list(e.partition)} with a new bucket num {e.total_buckets}, but "
                        f"the previous bucket num is {buckets[e.partition]}: rescale it first "
                        f"(t.rescale(bucket={e.total_buckets}, partitions=[...]), or write it with an overwrite)"
                    )
        if kind is CommitKind.APPEND:
            return
        live_ids = {e.identifier for e in live}
        added_ids = set()
        for e in delta:
            if e.kind is FileKind.ADD:
                added_ids.add(e.identifier)
            elif e.identifier not in live_ids:
                raise CommitConflictError(
                    f"File deletion conflicts detected! file {e.file.file_name} (bucket {e.bucket}, level "
                    f"{e.file.level}) is no longer live: a concurrent commit removed it"
                )
        if any(e.kind is FileKind.DELETE and e.identifier in added_ids for e in delta):
            raise CommitConflictError("a commit must not add and delete the same file")
        self._check_levels(fold([*live, *delta]), {(e.partition, e.bucket) for e in delta})

    def _check_vectors(
        self, latest: Snapshot | None, delta: list[ManifestEntry], index_entries: list[IndexManifestEntry] | None
    ) -> None:
        """A data file the commit removes must not keep a deletion vector (a concurrent commit marked rows of a
        file this one rewrote: its rows would come back)."""
        added = {(e.partition, e.bucket, e.file.file_name) for e in delta if e.kind is FileKind.ADD}
        removed = {(e.partition, e.bucket, e.file.file_name) for e in delta if e.kind is FileKind.DELETE} - added
        if not removed:
            return
        if self._index_of is not None:  # a restore publishes the restored snapshot's vectors
            entries = list(self.indexes.entries(self._index_of))
        else:
            entries = list(self.indexes.entries(latest)) if index_entries is None else index_entries
        for e in entries:
            for r in e.index_file.deletion_vectors_ranges:
                if (e.partition, e.bucket, r.data_file_name) in removed:
                    raise CommitConflictError(
                        f"data file {r.data_file_name} (bucket {e.bucket}, partition {list(e.partition)}) has "
                        "deletion vectors a concurrent commit wrote after this commit read it"
                    )

    def _check_levels(self, entries: list[ManifestEntry], touched: set[tuple[Partition, int]]) -> None:
        """Files of one level ≥ 1 of a bucket must have disjoint key ranges (LSM invariant)."""
        key_types = [self.schema.arrow_type(k) for k in self.schema.trimmed_primary_keys]
        by_level: dict[tuple[Partition, int, int], list[ManifestEntry]] = {}
        for e in entries:
            if e.file.level > 0 and (e.partition, e.bucket) in touched:
                by_level.setdefault((e.partition, e.bucket, e.file.level), []).append(e)

        def key(values: Sequence[Any]) -> tuple[Any, ...]:
            return tuple(comparable(v, t) for v, t in zip(values, key_types, strict=True))

        for (partition, bucket, level), files in by_level.items():
            ranges = sorted((key(e.file.min_key), key(e.file.max_key), e.file.file_name) for e in files)
            for a, b in itertools.pairwise(ranges):
                if not a[1] < b[0]:
                    raise CommitConflictError(
                        f"LSM conflicts detected! files {a[2]} and {b[2]} overlap at level {level} of bucket "
                        f"{bucket} in partition {list(partition)}"
                    )
