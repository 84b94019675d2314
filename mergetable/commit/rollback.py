"""Rollback to a snapshot or tag (Paimon's ``rollback_to``, made safe for concurrent writers), and tag retention.

Rolling back to snapshot ``T`` (or to a tag, a timestamp or a version, as in time travel):

* commits a new snapshot ``R`` (the latest + 1, kind OVERWRITE, properties ``restored-from`` and
  ``rolled-back-to`` = ``T``) whose live files are exactly ``T``'s: the table's state is ``T``'s again;
* takes the snapshots between ``T`` and ``R`` out of the table's history (:func:`visible`: ``snapshots()``,
  ``history()``); their files stay until expiration or orphan cleaning removes them, so a reader of one
  of them is never cut off, and time travel by id still reaches them until they expire;
* deletes every tag on a snapshot after ``T``.

Nothing is deleted that anything may still use: the files only the rolled-back snapshots and tags used are
left to snapshot expiration and orphan cleaning. Snapshot ids only grow, so no id is ever reused with other
contents. Being a commit, a rollback races like any commit: a writer that committed on a rolled-back snapshot
either landed before ``R`` (and is rolled back with the rest) or is rebased onto ``R``; a compaction of
rolled-back files fails its conflict check. The files ``R`` commits again are pinned against concurrent
expiration and orphan cleaning (:mod:`mergetable.commit.pins`).

A rollback to the latest snapshot changes nothing; a rollback to an expired snapshot that no tag holds fails
with :class:`SnapshotNotFoundError` naming it, before anything changes.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

from mergetable.commit.restore import RESTORED_FROM, ROLLED_BACK_TO, commit_state, resolve_target
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.core.errors import ArgumentError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.read_options import Timestamp
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import Snapshot


@dataclass
class RollbackResult:
    """What a rollback did: ``snapshot_id`` is the target, ``committed`` the new latest snapshot with its state
    (None when the target already was the latest), ``removed_snapshots`` the ids that left the history (newest
    first) and ``removed_tags`` the tags deleted."""

    snapshot_id: int
    committed: int | None = None
    removed_snapshots: list[int] = field(default_factory=list)
    removed_tags: list[str] = field(default_factory=list)


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


def visible(snapshots: list[Snapshot]) -> list[Snapshot]:
    """The snapshots of the table's history, oldest first: from the latest back, a rollback's snapshot leads to
    its target, every other snapshot to the one before it (rolled-back snapshots are left out).

    >>> from mergetable.metadata.models import CommitKind
    >>> def snap(i, to=None):
    ...     props = {ROLLED_BACK_TO: str(to)} if to else None
    ...     return Snapshot(id=i, schema_id=0, base_manifest_list="b", delta_manifest_list="d", commit_user="u",
    ...                     commit_identifier=i, commit_kind=CommitKind.APPEND, time_millis=i, properties=props,
    ...                     total_record_count=0, delta_record_count=0)
    >>> [s.id for s in visible([snap(1), snap(2), snap(3), snap(4, to=1), snap(5)])]
    [1, 4, 5]
    """
    by_id = {s.id: s for s in snapshots}
    ids = sorted(by_id)
    out: list[Snapshot] = []
    pos = len(ids) - 1
    while pos >= 0:
        snap = by_id[ids[pos]]
        out.append(snap)
        target = (snap.properties or {}).get(ROLLED_BACK_TO)
        if target is not None and target.isdigit():
            while pos >= 0 and ids[pos] > int(target):
                pos -= 1
        else:
            pos -= 1
    return out[::-1]


def rollback_to(
    fileio: FileIO,
    schema: TableSchema,
    snapshot_id: int | str | None = None,
    timestamp_ms: Timestamp | None = None,
    tag: str | None = None,
    version: int | str | None = None,
) -> RollbackResult:
    """Make the state of the target the latest again (see the module docstring)."""
    snapshots, tags = SnapshotManager(fileio), TagManager(fileio)
    target = resolve_target(snapshots, tags, "roll back to", snapshot_id, timestamp_ms, tag, version)
    tid = target.snapshot.id
    result = RollbackResult(tid)
    latest = snapshots.latest_id()
    if latest != tid:
        before = visible(snapshots.snapshots())
        props = {RESTORED_FROM: str(tid), ROLLED_BACK_TO: str(tid)}
        committed = commit_state(fileio, schema, target, props, always=True)
        assert committed is not None
        result.committed = committed.id
        after = {s.id for s in visible(snapshots.snapshots())}
        result.removed_snapshots = [s.id for s in reversed(before) if s.id not in after and s.id > tid]
    end = result.committed if result.committed is not None else (latest or tid) + 1
    for name, t in sorted(tags.list().items()):
        if tid < t.id < end:
            try:
                tags.delete(name)
            except SnapshotNotFoundError:  # deleted concurrently
                continue
            result.removed_tags.append(name)
    return result


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
    "RollbackResult",
    "iso_duration",
    "retained_ms",
    "rollback_to",
    "visible",
]
