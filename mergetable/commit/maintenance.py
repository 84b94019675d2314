"""Snapshot expiration (also after every commit) and orphan-file cleaning.

Expiration follows Paimon's rule: keep at least ``snapshot.num-retained.min`` snapshots, always expire
beyond ``snapshot.num-retained.max``, and in between expire snapshots older than
``snapshot.time-retained``, at most ``snapshot.expire.limit`` per run, and never a snapshot a consumer still
needs (consumers idle for ``consumer.expiration-time`` are retired first). Snapshot files are removed first
(oldest first, so the earliest snapshot is always whole), then data, changelog and manifest files that
no kept snapshot and no tag uses. A crash midway only leaves orphans, which :func:`remove_orphan_files`
deletes.

:class:`ExpirePolicy` replaces the options for one run (``Table.expire_snapshots(older_than=…, retain_last=…)``,
pyiceberg's ``expire_older_than``/``retain_last``): snapshots strictly older than ``older_than_ms`` expire,
the newest ``retain_last`` (at least the latest) are kept, and no per-run limit applies. Tags and consumers
protect what they reference either way. A dry run computes the same result and changes nothing.

:func:`expire_after_commit` is what every commit runs once it succeeded, as Paimon's writers do (not a
``write-only`` writer's: the dedicated compaction job expires then): the options' expiration, in the
committing thread (``snapshot.expire.execution-mode = sync``) or in a background thread (``async``, one at a
time per table). Its failures are logged, never raised: the commit stands.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial

from mergetable.commit.consumers import ConsumerManager
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.orphans import DAY_MS, candidates, check_cutoff, prune_staging
from mergetable.commit.pins import pinned_files, stale_pins
from mergetable.commit.restore import RESTORED_FROM
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import CorruptMetadataError, OptionsError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.options import TableOptions
from mergetable.core.paths import PathFactory
from mergetable.core.read_options import Timestamp, to_epoch_millis
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import FileKind, Snapshot, Tag

__all__ = [
    "DAY_MS",
    "ExpirePolicy",
    "ExpireResult",
    "expire_after_commit",
    "expire_policy",
    "expire_snapshots",
    "expire_tags",
    "expired_tags",
    "remove_orphan_files",
    "used_files",
]


@dataclass
class ExpireResult:
    """What an expiration removed (with ``dry_run``: would remove; nothing was touched)."""

    expired_snapshots: list[int] = field(default_factory=list)
    deleted_files: list[str] = field(default_factory=list)
    expired_tags: list[str] = field(default_factory=list)
    expired_consumers: list[str] = field(default_factory=list)
    dry_run: bool = False


@dataclass(frozen=True)
class ExpirePolicy:
    """Explicit bounds for one expiration instead of the ``snapshot.*`` options (see the module docstring)."""

    older_than_ms: int | None = None
    retain_last: int | None = None


def expire_policy(
    older_than: Timestamp | datetime.timedelta | None, retain_last: int | None, now_ms: int | None = None
) -> ExpirePolicy | None:
    """The policy of ``Table.expire_snapshots``'s arguments (None: none given, the options decide).

    >>> expire_policy("1970-01-01T00:00:01Z", 2)
    ExpirePolicy(older_than_ms=1000, retain_last=2)
    """
    if older_than is None and retain_last is None:
        return None
    if retain_last is not None and (
        isinstance(retain_last, bool) or not isinstance(retain_last, int) or retain_last < 1
    ):
        raise OptionsError(
            "retain_last", f"must be an integer >= 1 (the latest snapshot is always kept), got {retain_last!r}"
        )
    ms: int | None = None
    if isinstance(older_than, datetime.timedelta):
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        ms = now - older_than // datetime.timedelta(milliseconds=1)  # exact: no float rounding
    elif older_than is not None:
        if not isinstance(older_than, int | str | datetime.date):
            raise OptionsError(
                "older_than",
                "must be a datetime, an ISO-8601 string, epoch milliseconds or a timedelta, "
                f"got {type(older_than).__name__}",
            )
        ms = to_epoch_millis(older_than, "older_than")
    return ExpirePolicy(ms, retain_last)


def _bounds(
    opts: TableOptions, policy: ExpirePolicy | None, earliest: int, latest: int, now: int
) -> tuple[int, int, int]:
    """(lowest, end, cutoff): ids below ``lowest`` expire, ``end`` and above stay, in between those older than
    ``cutoff`` expire (up to the first that is not)."""
    if policy is None:
        lowest = max(latest - opts.snapshot_num_retained_max + 1, earliest)
        end = min(latest - opts.snapshot_num_retained_min + 1, earliest + opts.snapshot_expire_limit)
        return lowest, end, now - opts.snapshot_time_retained
    end = latest - max(1, policy.retain_last or 1) + 1
    if policy.older_than_ms is None:
        return end, end, now
    return earliest, end, policy.older_than_ms


def _manifest_names(manifests: ManifestIO, snap: Snapshot) -> set[str]:
    names = {snap.base_manifest_list, snap.delta_manifest_list}
    metas = [*manifests.read_list(snap.base_manifest_list), *manifests.read_list(snap.delta_manifest_list)]
    if snap.changelog_manifest_list:
        names.add(snap.changelog_manifest_list)
        metas += manifests.read_list(snap.changelog_manifest_list)
    names.update(m.file_name for m in metas)
    return names


def _index_paths(indexes: IndexManifestIO, paths: PathFactory, snap: Snapshot) -> set[str]:
    """The index manifest of ``snap`` and the deletion-vector index files it lists."""
    if snap.index_manifest is None:
        return set()
    out = {paths.manifest_file(snap.index_manifest)}
    out.update(paths.index_file(e.index_file.file_name) for e in indexes.entries(snap))
    return out


def expire_snapshots(
    fileio: FileIO,
    schema: TableSchema,
    now_ms: int | None = None,
    policy: ExpirePolicy | None = None,
    dry_run: bool = False,
    dropped_tags: Collection[str] = (),
) -> ExpireResult:
    """Expire snapshots per the options (or ``policy``); ``dropped_tags`` no longer protect anything (a dry
    run's tags that expire first)."""
    opts = schema.table_options
    snapshots = SnapshotManager(fileio)
    manifests = ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    result = ExpireResult(dry_run=dry_run)
    earliest, latest = snapshots.earliest_id(), snapshots.latest_id()
    if earliest is None or latest is None:
        return result
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    consumers = ConsumerManager(fileio)
    if opts.consumer_expiration_time is not None and not dry_run:
        result.expired_consumers = consumers.expire(opts.consumer_expiration_time, now)
    lowest, end, older_than = _bounds(opts, policy, earliest, latest, now)
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
    tags = [tag for name, tag in TagManager(fileio).list().items() if name not in dropped_tags]
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
    indexes = IndexManifestIO(fileio)
    kept_index: set[str] = set()
    for holder in [*(snapshots.load(sid) for sid in range(end, latest + 1) if snapshots.exists(sid)), *tags]:
        kept_index |= _index_paths(indexes, paths, holder)
    doomed_index: set[str] = set()

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
            doomed_index |= _index_paths(indexes, paths, snap) - kept_index

    result.expired_snapshots = [sid for sid in range(earliest, end) if snapshots.exists(sid)]
    result.deleted_files = (
        sorted(doomed_files) + [paths.manifest_file(n) for n in sorted(doomed_manifests)] + sorted(doomed_index)
    )
    if dry_run:
        return result
    snapshots.write_earliest_hint(end)
    for sid in result.expired_snapshots:
        fileio.delete(paths.snapshot_file(sid))
    pinned = pinned_files(fileio)  # read after the snapshots are gone: a restore of one of them pinned first
    result.deleted_files = [p for p in result.deleted_files if p not in pinned]
    fileio.delete_quietly(result.deleted_files)
    return result


log = logging.getLogger(__name__)
_background: dict[str, threading.Thread] = {}
_background_lock = threading.Lock()


def expire_after_commit(fileio: FileIO, schema: TableSchema) -> threading.Thread | None:
    """The options' expiration after a commit (tags past their retention, then snapshots): run now (``sync``),
    or started in a background thread (``async``; returned, None when one is still running for this table).
    Never raises."""
    if schema.table_options.snapshot_expire_execution_mode == "sync":
        _expire_quietly(fileio, schema)
        return None
    with _background_lock:
        running = _background.get(fileio.root)
        if running is not None and running.is_alive():
            return None
        thread = threading.Thread(target=_expire_quietly, args=(fileio, schema), name="expire-snapshots", daemon=True)
        _background[fileio.root] = thread
        thread.start()
        return thread


def _expire_quietly(fileio: FileIO, schema: TableSchema) -> None:
    try:
        expire_tags(fileio, schema)
        expire_snapshots(fileio, schema)
    except Exception as exc:  # the commit stands: expiration is retried after the next one
        log.warning("snapshot expiration after a commit failed (the commit stands): %s", exc)


def _lists(snap: Snapshot) -> list[str]:
    names = [snap.base_manifest_list, snap.delta_manifest_list]
    return names + ([snap.changelog_manifest_list] if snap.changelog_manifest_list else [])


def expired_tags(tags: dict[str, Tag], now_ms: int) -> list[str]:
    """Tags whose retention has passed: ``tag create time + time retained < now`` (no retention: kept)."""
    return sorted(
        name
        for name, t in tags.items()
        if t.tag_time_retained is not None and t.tag_create_time and t.tag_create_time + t.tag_time_retained < now_ms
    )


def expire_tags(
    fileio: FileIO, schema: TableSchema, now_ms: int | None = None, dry_run: bool = False
) -> tuple[list[str], list[str]]:
    """Delete tags past their retention and the files only they referenced: (tag names, deleted files).

    With ``dry_run`` nothing is deleted and the same pair is returned."""
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
        candidates |= _index_paths(IndexManifestIO(fileio), paths, tag)
        for e in manifests.live_entries(tag):
            candidates.add(paths.data_file(e.partition, e.bucket, e.file.file_name))
    if dry_run:
        return names, sorted(candidates - used_files(fileio, schema, dropped_tags=names))
    for name in names:
        tag_manager.delete(name)
    deleted = sorted(candidates - used_files(fileio, schema))
    fileio.delete_quietly(deleted)
    return names, deleted


def used_files(fileio: FileIO, schema: TableSchema, dropped_tags: Collection[str] = ()) -> set[str]:
    """Absolute paths of every file any snapshot, tag (but ``dropped_tags``) or pin references (data, changelog,
    manifests).

    Snapshots expired while they are read are skipped, and the listing is repeated until its newest snapshot
    was read: what a vanished snapshot used that is still needed, a newer one uses. Pins are read last (see
    :mod:`mergetable.commit.pins`)."""
    snapshots, tag_manager = SnapshotManager(fileio), TagManager(fileio)
    manifests = ManifestIO(fileio)
    paths = PathFactory.for_table(fileio.root, schema)
    holders: list[tuple[Snapshot, Callable[[], bool]]] = [
        (snap, partial(snapshots.exists, snap.id)) for snap in _all_snapshots(snapshots)
    ]
    for name in tag_manager.list_names():
        if name in dropped_tags:
            continue
        try:
            holders.append((tag_manager.get(name), partial(tag_manager.exists, name)))
        except SnapshotNotFoundError:  # deleted meanwhile
            continue
    used: set[str] = set()
    seen_manifests: set[str] = set()
    indexes = IndexManifestIO(fileio)
    for snap, still_there in holders:
        try:
            used |= _references(manifests, paths, snap, seen_manifests)
            used |= _index_paths(indexes, paths, snap)
        except CorruptMetadataError:
            if still_there():
                raise
            continue  # expired while being read: its manifests went with it
    return used | pinned_files(fileio)


def _references(manifests: ManifestIO, paths: PathFactory, snap: Snapshot, seen_manifests: set[str]) -> set[str]:
    used = {paths.manifest_file(n) for n in _manifest_names(manifests, snap)}
    for lst in (snap.base_manifest_list, snap.delta_manifest_list, snap.changelog_manifest_list):
        if lst is None:
            continue
        for meta in manifests.read_list(lst):
            if meta.file_name in seen_manifests:
                continue
            entries = manifests.read_manifest(meta.file_name)
            seen_manifests.add(meta.file_name)
            used.update(paths.data_file(e.partition, e.bucket, e.file.file_name) for e in entries)
    return used


def _all_snapshots(snapshots: SnapshotManager) -> list[Snapshot]:
    loaded: dict[int, Snapshot] = {}
    seen: set[int] = set()
    while True:
        ids = snapshots.list_ids()
        for sid in ids:
            if sid in seen:
                continue
            seen.add(sid)
            try:
                loaded[sid] = snapshots.load(sid)
            except SnapshotNotFoundError:  # expired meanwhile
                continue
        if not ids or ids[-1] in loaded:
            return [loaded[i] for i in sorted(loaded)]


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
        prune_staging(fileio, orphans)
        fileio.delete_quietly(stale_pins(fileio, cutoff))  # after the files: they protected this run
    return orphans
