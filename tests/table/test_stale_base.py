"""A commit built on a snapshot so old that the id it would create was made and expired since never creates it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.committer import Committer
from mergetable.commit.snapshots import SnapshotManager
from mergetable.metadata.models import CommitKind

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def test_a_stale_commit_does_not_recreate_an_expired_id(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=SCHEMA))
    stale = t.snapshot(1)  # a writer read snapshot 1 as the latest, then stalled
    t.create_tag("keep", snapshot_id=1)  # keeps snapshot 1's manifests readable for the stalled writer
    for i in range(4):
        t.write(pa.table({"k": [i], "v": [str(i)]}, schema=SCHEMA))
    assert t.expire_snapshots(retain_last=2).expired_snapshots == [1, 2, 3, 4]
    committer = Committer(t.fileio, t.table_schema, "stalled")
    manifests_before = set(t.fileio.list_names(t.fileio.join("manifest")))
    assert committer._try_commit_once(stale, [], CommitKind.APPEND, 1, None, None) is None  # lost, as to a race
    assert SnapshotManager(t.fileio).list_ids() == [5, 6]  # snapshot 2 was not made again
    assert set(t.fileio.list_names(t.fileio.join("manifest"))) == manifests_before  # its attempt cleaned up


def test_an_id_expired_between_the_check_and_the_create_is_taken_back(
    table_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = mt.create_table(table_uri, SCHEMA, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1], "v": ["a"]}, schema=SCHEMA))
    stale = t.snapshot(1)
    t.create_tag("keep", snapshot_id=1)
    for i in range(4):
        t.write(pa.table({"k": [i], "v": [str(i)]}, schema=SCHEMA))
    snapshots = SnapshotManager(t.fileio)
    committer = Committer(t.fileio, t.table_schema, "stalled")
    checked = committer.snapshots.expired

    def expire_right_after_the_check(snapshot_id: int) -> bool:
        before = checked(snapshot_id)
        if not before:  # the first check passes; then an expiration passes the id before the create
            t.expire_snapshots(retain_last=2)
            monkeypatch.setattr(committer.snapshots, "expired", checked)
        return before

    monkeypatch.setattr(committer.snapshots, "expired", expire_right_after_the_check)
    snapshots.write_earliest_hint(1)  # as if the stalled writer read the hint before any expiration
    assert committer._try_commit_once(stale, [], CommitKind.APPEND, 1, None, None) is None  # lost, as to a race
    assert snapshots.list_ids() == [5, 6]  # the snapshot 2 it created was taken back
