"""Snapshot expiration and orphan-file cleaning.

Expiration follows Paimon's rule: keep at least ``snapshot.num-retained.min`` snapshots, always expire
beyond ``snapshot.num-retained.max``, and in between expire snapshots older than
``snapshot.time-retained``, at most ``snapshot.expire.limit`` per run, and never a snapshot a consumer still
needs (consumers idle for ``consumer.expiration-time`` are retired first). Snapshot files are removed first
(oldest first, so the earliest snapshot is always whole), then data, changelog and manifest files that
no kept snapshot and no tag uses. A crash midway only leaves orphans, which :func:`remove_orphan_files`
deletes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mergetable.commit.consumers import ConsumerManager
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.orphans import DAY_MS, candidates, check_cutoff
from mergetable.commit.restore import RESTORED_FROM
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import FileKind, Snapshot

__all__ = ["DAY_MS", "ExpireResult", "expire_snapshots", "remove_orphan_files", "used_files"]


@dataclass
class ExpireResult:
    expired_snapshots: list[int] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    expired_tags: list[str] = field(default_factory=list)
    expired_consumers: list[str] = field(default_factory=list)


def _manifest_names(manifests: ManifestIO, snap: Snapshot) -> set[str]:
    names = {snap.base_manifest_list, snap.delta_manifest_list}
    metas = [*manifests.read_list(snap.base_manifest_list), *manifests.read_list(snap.delta_manifest_list)]
    if snap.changelog_manifest_list:
        names.add(snap.changelog_manifest_list)
        metas += manifests.read_list(snap.changelog_manifest_list)
    names.update(m.file_name for m in metas)
    return names


def expire_snapshots(fileio: FileIO, schema: TableSchema, now_ms: int | None = None) -> ExpireResult:
    opts = schema.table_options
    snapshots = SnapshotManager(fileio)
    manifests = ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    result = ExpireResult()
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is None or latest is None:
        return result
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    consumers = ConsumerManager(fileio)
    if opts.consumer_expiration_time is not None:
        result.expired_consumers = consumers.expire(opts.consumer_expiration_time, now)
    older_than = now - opts.snapshot_time_retained
    lowest = max(latest - opts.snapshot_num_retained_max + 1, earliest)
    end = min(latest - opts.snapshot_num_retained_min + 1, earliest + opts.snapshot_expire_limit)
    needed = consumers.min_next_snapshot()
    if needed is not None:  # a consumer still reads snapshot `needed`: keep it and everything after it
        end = min(end, needed)
        lowest = min(lowest, end)
    for sid in range(lowest, end):
        if snapshots.exists(sid) and older_than <= snapshots.load(sid).time_millis:
            end = sid
            break
    if end <= earliest:
        return result
    end_snap = snapshots.load(end)
    tags = list(TagManager(fileio).list().values())
    kept_files: set[tuple[tuple[str | None, ...], int, str]] = set()
    for snap in [end_snap, *tags]:
        kept_files.update((e.partition, e.bucket, e.file.file_name) for e in manifests.live_entries(snap))
    kept_manifests: set[str] = set()
    for sid in range(end, latest + 1):
        if snapshots.exists(sid):
            kept = snapshots.load(sid)
            kept_manifests |= _manifest_names(manifests, kept)
            if kept.properties and RESTORED_FROM in kept.properties:  # a restore brings deleted files back
                kept_files.update((e.partition, e.bucket, e.file.file_name) for e in manifests.live_entries(kept))
    for tag in tags:
        kept_manifests |= _manifest_names(manifests, tag)

    doomed_files: set[str] = set()
    doomed_manifests: set[str] = set()
    for sid in range(earliest, end + 1):
        if not snapshots.exists(sid):
            continue
        snap = snapshots.load(sid)
        if sid > earliest:
            for e in manifests.delta_entries(snap):
                if e.kind is FileKind.DELETE and (e.partition, e.bucket, e.file.file_name) not in kept_files:
                    doomed_files.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
        if sid < end:
            for e in manifests.changelog_entries(snap):
                doomed_files.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
            doomed_manifests |= _manifest_names(manifests, snap) - kept_manifests

    snapshots.write_earliest_hint(end)
    for sid in range(earliest, end):
        fileio.delete(paths.snapshot_file(sid))
        result.expired_snapshots.append(sid)
    doomed = sorted(doomed_files) + [paths.manifest_file(n) for n in sorted(doomed_manifests)]
    fileio.delete_quietly(doomed)
    result.deleted_files = doomed
    return result


def used_files(fileio: FileIO, schema: TableSchema) -> set[str]:
    """Absolute paths of every file any snapshot or tag references (data, changelog, manifests)."""
    snapshots = SnapshotManager(fileio)
    manifests = ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    snaps: list[Snapshot] = [*snapshots.snapshots(), *TagManager(fileio).list().values()]
    used: set[str] = set()
    seen_manifests: set[str] = set()
    for snap in snaps:
        names = _manifest_names(manifests, snap)
        used.update(paths.manifest_file(n) for n in names)
        lists = [snap.base_manifest_list, snap.delta_manifest_list, snap.changelog_manifest_list]
        for lst in lists:
            if lst is None:
                continue
            for meta in manifests.read_list(lst):
                if meta.file_name in seen_manifests:
                    continue
                seen_manifests.add(meta.file_name)
                for e in manifests.read_manifest(meta.file_name):
                    used.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
    return used


def remove_orphan_files(
    fileio: FileIO,
    schema: TableSchema,
    older_than_ms: int | None = None,
    dry_run: bool = False,
    force: bool = False,
) -> list[str]:
    """Delete mergetable's own files that nothing references and that are older than ``older_than_ms``.

    Only files of the table's own layout and naming are considered (see :mod:`mergetable.commit.orphans`);
    a cutoff younger than :data:`~mergetable.commit.orphans.MIN_AGE_MS` needs ``force``. Returns the
    (with ``dry_run``: would-be) deleted paths, sorted.
    """
    cutoff = check_cutoff(older_than_ms, force)
    found = list(candidates(fileio, schema))  # listed before the references are read: newer files are young
    used = used_files(fileio, schema)
    orphans = sorted(
        path for path, mtime in found if path not in used and (mtime * 1000 <= cutoff if mtime is not None else force)
    )
    if not dry_run:
        fileio.delete_quietly(orphans)
    return orphans
