"""Rollback to a snapshot or tag, and expiry of tags by their retention (Paimon's semantics).

Rolling back to snapshot ``T`` (or to a tag on ``T``):

* the ``LATEST`` hint is set to ``T`` first, then every snapshot after ``T`` is deleted, newest first, so a
  reader never sees a snapshot whose predecessor is gone; their changelog goes with them;
* every tag on a snapshot after ``T`` is deleted;
* the data, changelog and manifest files that only the removed snapshots and tags referenced are deleted:
  never a file that a kept snapshot or tag references;
* a rollback to a tag whose snapshot was already expired writes the tag's snapshot back as
  ``snapshot-T`` (and the ``EARLIEST`` hint), as Paimon does;
* a rollback to an expired snapshot that no tag holds fails with :class:`SnapshotNotFoundError` naming it,
  before anything changes.

Concurrent commits: a writer that committed on a snapshot being removed publishes a snapshot numbered
above ``T + 1`` (a commit on the rolled-back state gets exactly ``T + 1``). Such a commit is detected after
the snapshot files are removed; the rollback then stops before deleting any data file and raises
:class:`RollbackConflictError` naming the snapshots that landed (run the rollback again to discard them
too, or keep them).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field

from mergetable.commit.maintenance import used_files
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import ArgumentError, CommitConflictError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import FileKind, Snapshot, Tag


class RollbackConflictError(CommitConflictError):
    """Commits landed on snapshots that a rollback was removing."""

    def __init__(self, target: int, landed: list[int]) -> None:
        self.target = target
        self.landed = landed
        super().__init__(
            f"rollback to snapshot {target}: snapshot(s) {landed} were committed concurrently on snapshots the "
            "rollback removed; no data file was deleted. Roll back again to discard them, or keep them."
        )


@dataclass
class RollbackResult:
    snapshot_id: int
    removed_snapshots: list[int] = field(default_factory=list)
    removed_tags: list[str] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)


def retained_ms(value: datetime.timedelta | int | None) -> int | None:
    """A retention given as a ``timedelta`` or as milliseconds, in milliseconds (None: forever)."""
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        ms = int(value.total_seconds() * 1000)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise ArgumentError("time_retained", f"must be a timedelta or milliseconds, got {value!r}")
    if ms <= 0:
        raise ArgumentError("time_retained", f"must be positive, got {value!r}")
    return ms


def _target(snapshots: SnapshotManager, tags: TagManager, snapshot_id: int | None, tag: str | None) -> Snapshot:
    if (snapshot_id is None) == (tag is None):
        raise ArgumentError("snapshot_id", "rollback_to needs exactly one of snapshot_id and tag")
    if tag is not None:
        return tags.get(tag).to_snapshot()
    assert snapshot_id is not None
    if snapshots.exists(snapshot_id):
        return snapshots.load(snapshot_id)
    for t in tags.list().values():  # an expired snapshot a tag still holds (Paimon falls back to the tag)
        if t.id == snapshot_id:
            return t.to_snapshot()
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is not None and snapshot_id < earliest:
        raise SnapshotNotFoundError(
            f"cannot roll back to snapshot {snapshot_id}: it has expired (the earliest snapshot is {earliest}) and "
            "no tag holds it"
        )
    raise SnapshotNotFoundError(f"cannot roll back to snapshot {snapshot_id}: it does not exist (latest is {latest})")


def _referenced(paths: PathFactory, manifests: ManifestIO, snap: Snapshot) -> set[str]:
    """Files a removed snapshot added or referenced through its own manifests: the deletion candidates."""
    out = {paths.manifest_file(n) for n in _lists(snap)}
    metas = [m for lst in _lists(snap) for m in manifests.read_list(lst)]
    out |= {paths.manifest_file(m.file_name) for m in metas}
    for e in [*manifests.delta_entries(snap), *manifests.changelog_entries(snap)]:
        if e.kind is FileKind.ADD:
            out.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
    return out


def _lists(snap: Snapshot) -> list[str]:
    names = [snap.base_manifest_list, snap.delta_manifest_list]
    return names + ([snap.changelog_manifest_list] if snap.changelog_manifest_list else [])


def rollback_to(
    fileio: FileIO, schema: TableSchema, snapshot_id: int | None = None, tag: str | None = None
) -> RollbackResult:
    snapshots, tags, manifests = SnapshotManager(fileio), TagManager(fileio), ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    target = _target(snapshots, tags, snapshot_id, tag)
    tid = target.id
    result = RollbackResult(tid)
    removed = [snapshots.load(i) for i in reversed(snapshots.list_ids()) if i > tid]  # listed: gaps included
    doomed_tags = {name: t for name, t in tags.list().items() if t.id > tid}
    candidates: set[str] = set()
    for snap in [*removed, *doomed_tags.values()]:
        candidates |= _referenced(paths, manifests, snap)

    snapshots.commit_hint(tid)
    for snap in removed:
        fileio.delete_quietly([paths.snapshot_file(snap.id)])
        result.removed_snapshots.append(snap.id)
    landed = [i for i in snapshots.list_ids() if i > tid + 1]
    if landed:
        raise RollbackConflictError(tid, landed)
    for name in sorted(doomed_tags):
        tags.delete(name)
        result.removed_tags.append(name)
    if not snapshots.exists(tid):  # a tag's snapshot that was expired: bring it back
        fileio.write_if_absent(paths.snapshot_file(tid), target.to_json().encode())
        snapshots.write_earliest_hint(tid)
    snapshots.commit_hint(tid)
    used = used_files(fileio, schema)
    result.deleted_files = sorted(candidates - used)
    fileio.delete_quietly(result.deleted_files)
    return result


def expired_tags(tags: dict[str, Tag], now_ms: int) -> list[str]:
    """Tags whose retention has passed: ``tag create time + time retained < now`` (no retention: kept)."""
    return sorted(
        name
        for name, t in tags.items()
        if t.tag_time_retained is not None and t.tag_create_time and t.tag_create_time + t.tag_time_retained < now_ms
    )


def expire_tags(fileio: FileIO, schema: TableSchema, now_ms: int | None = None) -> tuple[list[str], list[str]]:
    """Delete tags past their retention and the files only they referenced: (tag names, deleted files)."""
    tag_manager, manifests = TagManager(fileio), ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    all_tags = tag_manager.list()
    names = expired_tags(all_tags, now)
    if not names:
        return [], []
    candidates: set[str] = set()
    for name in names:
        tag = all_tags[name]
        candidates |= {paths.manifest_file(n) for n in _lists(tag)}
        for e in manifests.live_entries(tag):
            candidates.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
        tag_manager.delete(name)
    deleted = sorted(candidates - used_files(fileio, schema))
    fileio.delete_quietly(deleted)
    return names, deleted


def iso_duration(ms: int | None) -> str | None:
    """Milliseconds as an ISO-8601 duration the way Java's ``Duration.toString`` prints it (``PT1H30M``)."""
    if ms is None:
        return None
    total_s, rem_ms = divmod(ms, 1000)
    hours, rest = divmod(total_s, 3600)
    minutes, seconds = divmod(rest, 60)
    out = "PT"
    if hours:
        out += f"{hours}H"
    if minutes:
        out += f"{minutes}M"
    if seconds or rem_ms or out == "PT":
        out += f"{seconds}.{rem_ms:03d}".rstrip("0").rstrip(".") + "S"
    return out


__all__ = [
    "RollbackConflictError",
    "RollbackResult",
    "expire_tags",
    "expired_tags",
    "iso_duration",
    "retained_ms",
    "rollback_to",
]
