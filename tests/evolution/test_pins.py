"""The handshake between restores (and rollbacks) and the operations that delete files: pins."""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.pins import PIN_DIR, pin_files, pinned_files
from mergetable.commit.restore import commit_state, resolve_target
from mergetable.commit.snapshots import SnapshotManager, TagManager

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
RETAIN_ONE = {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"}


def _table(uri: str) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "1"})
    t.write(pa.table({"k": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"k": [1, 2], "v": ["c", "d"]}, schema=SCHEMA), overwrite=True)  # replaces snapshot 1's files
    t.alter.set_options(RETAIN_ONE)  # after the writes: a commit expires snapshots too
    return t


def _pins(t: mt.Table) -> list[str]:
    return t.fileio.list_names(t.fileio.join(PIN_DIR))


def test_a_restore_whose_source_expired_first_commits_nothing(table_uri: str) -> None:
    t = _table(table_uri)
    target = resolve_target(SnapshotManager(t.fileio), TagManager(t.fileio), "restore", snapshot_id=1)
    t.expire_snapshots()  # the expiration wins: snapshot 1 and its files are gone
    with pytest.raises(mt.SnapshotNotFoundError, match="snapshot 1 was expired or deleted while being restored"):
        commit_state(t.fileio, t.table_schema, target, {"restored-from": "1"})
    assert t.latest_snapshot_id() == 2 and _pins(t) == []
    assert t.read().column("v").to_pylist() == ["c", "d"]


def test_expiration_keeps_the_files_a_restore_in_flight_pinned(table_uri: str) -> None:
    t = _table(table_uri)
    old = [t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files(snapshot_id=1)]
    pin_files(t.fileio, old)  # a restore of snapshot 1 that checked its source before the expiration began
    result = t.expire_snapshots()
    assert result.expired_snapshots == [1]
    assert all(os.path.exists(p) for p in old) and not set(old) & set(result.deleted_files)
    assert pinned_files(t.fileio) == set(old)
    # orphan cleaning keeps them too while the pin is younger than its cutoff, then retires the pin
    assert set(old).isdisjoint(t.remove_orphan_files(older_than_ms=int(time.time() * 1000) - 60_000, force=True))
    assert _pins(t)
    assert set(old).isdisjoint(t.remove_orphan_files(older_than_ms=2**62, force=True))  # protected a last time
    assert _pins(t) == [] and pinned_files(t.fileio) == set()


def test_a_finished_restore_leaves_its_pin_to_orphan_cleaning(table_uri: str) -> None:
    t = _table(table_uri)
    assert t.restore(snapshot_id=1) is not None
    assert len(_pins(t)) == 1
    t.expire_snapshots()  # snapshot 1 expires; its files are the restore's now
    assert t.read().column("v").to_pylist() == ["a", "b"]
    assert t.remove_orphan_files(older_than_ms=2**62, force=True) == []  # only the pin went
    assert _pins(t) == [] and t.read().column("v").to_pylist() == ["a", "b"]
    assert t.restore(snapshot_id=3) is None and _pins(t) == []  # nothing to commit: no pin kept
