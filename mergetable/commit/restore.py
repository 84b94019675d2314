"""Restore: a new snapshot whose live files are exactly an earlier snapshot's or tag's (Delta's RESTORE).

A restore is one more commit (kind OVERWRITE, property ``restored-from``) made with the commit protocol, so it
races safely with other writers: it replaces whatever is live *at the snapshot it commits on* (a commit that
lands first is rebased on, as an overwrite of the whole table would be), and its result is exactly the target's
files. A rollback (:mod:`mergetable.commit.rollback`) is a restore that also takes the later snapshots out of
the history and deletes the later tags.

The files a restore commits again may be deleted meanwhile by snapshot expiration, tag expiration or orphan
cleaning; they are pinned first (:mod:`mergetable.commit.pins`), and the restore fails with
:class:`SnapshotNotFoundError` (nothing committed) when its source disappeared before the pin was in place.

The target is given as in time travel (``snapshot_id``, ``timestamp_ms``, ``tag`` or ``version``: exactly one),
validated by :class:`~mergetable.core.read_options.TimeTravel` and resolved by
:func:`~mergetable.commit.travel.resolve_travel`. A ``snapshot_id`` that expired while a tag still holds it
resolves to that tag, as Paimon's rollback does.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from mergetable.commit.committer import Committer
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.pins import pin_files, unpin
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.commit.travel import resolve_travel
from mergetable.core.errors import (
    ArgumentError,
    CommitConflictError,
    CommitStateUnknownError,
    CorruptMetadataError,
    MergeTableError,
    SnapshotNotFoundError,
)
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.read_options import Timestamp, TimeTravel
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import CommitKind, CommitMessage, DataFileMeta, ManifestEntry, Snapshot

RESTORED_FROM = "restored-from"
"""Snapshot property: the id of the snapshot whose state a restore or rollback committed."""
ROLLED_BACK_TO = "rolled-back-to"
"""Snapshot property of a rollback: the snapshots between this id and the rollback's own left the history."""

_Bucket = tuple[tuple[str | None, ...], int, int]
Identifier = tuple[tuple[str | None, ...], int, int, str]


@dataclass(frozen=True)
class Target:
    """The state a restore commits: ``snapshot``, held by the snapshot file ``snapshot.id`` or by ``tag``."""

    snapshot: Snapshot
    tag: str | None = None

    def still_held(self, snapshots: SnapshotManager, tags: TagManager) -> bool:
        """Whether the snapshot file or tag the target was read from still exists (not expired or deleted)."""
        if self.tag is None:
            return snapshots.exists(self.snapshot.id)
        try:
            return tags.get(self.tag).id == self.snapshot.id
        except SnapshotNotFoundError:
            return False


def resolve_target(
    snapshots: SnapshotManager,
    tags: TagManager,
    verb: str,
    snapshot_id: int | str | None = None,
    timestamp_ms: Timestamp | None = None,
    tag: str | None = None,
    version: int | str | None = None,
) -> Target:
    """The target of a restore or rollback (``verb`` names it in messages); exactly one argument must be given.

    >>> resolve_target(None, None, "rollback_to")  # type: ignore[arg-type]
    Traceback (most recent call last):
    ...
    mergetable.core.errors.ArgumentError: argument 'snapshot_id': rollback_to needs exactly one of snapshot_id, \
timestamp_ms, tag and version
    """
    args = (("snapshot_id", snapshot_id), ("timestamp_ms", timestamp_ms), ("tag", tag), ("version", version))
    given = [name for name, value in args if value is not None]
    if len(given) != 1:
        needs = f"{verb} needs exactly one of snapshot_id, timestamp_ms, tag and version"
        raise ArgumentError(given[1] if given else "snapshot_id", needs)
    travel = TimeTravel.of(snapshot_id, timestamp_ms, tag, version)
    if travel.snapshot_id is not None:
        return _by_id(snapshots, tags, verb, travel.snapshot_id)
    if travel.version is not None and not tags.exists(travel.version) and travel.version.isdigit():
        return _by_id(snapshots, tags, verb, int(travel.version))
    snap = resolve_travel(snapshots, tags, travel)
    if snap is None:  # pragma: no cover - a timestamp or tag always resolves to a snapshot or raises
        raise SnapshotNotFoundError(f"cannot {verb}: the table has no snapshot")
    name = travel.tag if travel.tag is not None else travel.version
    return Target(snap, name if name is not None and tags.exists(name) else None)


def _by_id(snapshots: SnapshotManager, tags: TagManager, verb: str, snapshot_id: int) -> Target:
    if snapshots.exists(snapshot_id):
        return Target(snapshots.load(snapshot_id))
    for name, t in sorted(tags.list().items()):  # an expired snapshot a tag still holds (as Paimon)
        if t.id == snapshot_id:
            return Target(t.to_snapshot(), name)
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is not None and snapshot_id < earliest:
        raise SnapshotNotFoundError(
            f"cannot {verb} snapshot {snapshot_id}: it has expired (the earliest snapshot is {earliest}) and no tag "
            "holds it"
        )
    raise SnapshotNotFoundError(f"cannot {verb} snapshot {snapshot_id}: it does not exist (latest is {latest})")


class _Rebase(Exception):
    """A commit landed after the restore computed its change: compute it again on the new latest snapshot."""


def _messages(current: list[ManifestEntry], wanted: dict[Identifier, ManifestEntry]) -> list[CommitMessage]:
    live = {e.identifier: e for e in current}
    removed: dict[_Bucket, list[DataFileMeta]] = {}
    added: dict[_Bucket, list[DataFileMeta]] = {}
    for i, e in live.items():
        if i not in wanted:
            removed.setdefault((e.partition, e.bucket, e.total_buckets), []).append(e.file)
    for i, e in wanted.items():
        if i not in live:
            added.setdefault((e.partition, e.bucket, e.total_buckets), []).append(e.file)
    return [
        CommitMessage(
            partition=p,
            bucket=b,
            total_buckets=n,
            new_files=tuple(added.get((p, b, n), ())),
            deleted_files=tuple(removed.get((p, b, n), ())),
        )
        for (p, b, n) in sorted({*removed, *added}, key=repr)
    ]


def commit_state(
    fileio: FileIO, schema: TableSchema, target: Target, properties: dict[str, str], always: bool = False
) -> Snapshot | None:
    """Commit a snapshot whose live files are exactly ``target``'s (None when the latest already has them and
    not ``always``). The files are pinned until orphan cleaning retires the pin; see the module docstring."""
    snapshots, tags, manifests = SnapshotManager(fileio), TagManager(fileio), ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    gone = SnapshotNotFoundError(
        f"snapshot {target.snapshot.id}"
        + (f" (tag '{target.tag}')" if target.tag else "")
        + " was expired or deleted while being restored; nothing was committed"
    )
    try:
        wanted = {e.identifier: e for e in manifests.live_entries(target.snapshot)}
    except (OSError, MergeTableError):  # a manifest gone or unreadable: expired under us, or really broken
        if not target.still_held(snapshots, tags):
            raise gone from None
        raise
    pinned = [paths.data_file(e.partition, e.bucket, e.file.file_name) for e in wanted.values()]
    indexes = IndexManifestIO(fileio)
    pinned += [paths.index_file(e.index_file.file_name) for e in indexes.entries(target.snapshot)]
    if target.snapshot.index_manifest is not None:
        pinned.append(paths.manifest_file(target.snapshot.index_manifest))
    pin = pin_files(fileio, pinned)
    committed = False
    try:
        if not target.still_held(snapshots, tags):
            raise gone
        committer = Committer(fileio, schema, f"restore-{uuid.uuid4()}")
        rebases = schema.table_options.commit_max_retries
        for _ in range(rebases + 1):
            latest = snapshots.latest()
            try:
                messages = _messages(manifests.live_entries(latest), wanted)
            except CorruptMetadataError:
                if latest is None or snapshots.exists(latest.id):
                    raise
                continue  # expired while being read: a newer snapshot exists
            same_index = (latest.index_manifest if latest else None) == target.snapshot.index_manifest
            if not messages and same_index and not always:
                return None
            base = latest.id if latest else None

            def unchanged(snap: Snapshot | None, base: int | None = base) -> None:
                if (snap.id if snap else None) != base:
                    raise _Rebase()

            try:
                snap = committer.commit_kind(
                    messages, CommitKind.OVERWRITE, 1, properties, unchanged, index_of=target.snapshot
                )
            except _Rebase:
                continue
            committed = True
            return snap
        raise CommitConflictError(
            f"restore gave up after {rebases + 1} attempts: other commits kept landing first "
            "(raise 'commit.max-retries')"
        )
    except CommitStateUnknownError:
        committed = True  # it may have landed: the pin stays
        raise
    finally:
        if not committed:
            unpin(fileio, pin)


def restore(fileio: FileIO, schema: TableSchema, target: Target) -> Snapshot | None:
    """Commit the state of ``target``; None when the latest snapshot already has exactly its files."""
    return commit_state(fileio, schema, target, {RESTORED_FROM: str(target.snapshot.id)})


__all__ = ["RESTORED_FROM", "ROLLED_BACK_TO", "Target", "commit_state", "resolve_target", "restore"]
