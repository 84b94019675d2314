"""``Table.history()`` (agreeing with ``$snapshots``) and ``expire_snapshots(older_than, retain_last, dry_run)``."""

from __future__ import annotations

import datetime
import os
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import mergetable as mt
from mergetable.core.errors import OptionsError
from mergetable.metadata.models import FileKind

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])


def _table(uri: str, commits: int = 4) -> mt.Table:
    t = mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "2"})
    for i in range(commits):
        t.write(pa.table({"id": [i, i + 100], "v": [i, i]}))
        time.sleep(0.005)  # distinct commit times
    return t


def _listing(root: str) -> dict[str, int]:
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[p] = os.stat(p).st_mtime_ns
    return out


def test_history_names_each_operation_and_agrees_with_snapshots(table_uri: str) -> None:
    t = _table(table_uri, commits=2)
    t.delete([("id", "=", 0)])
    t.update([("id", "=", 1)], {"v": pc.field("v") + 1})
    t.merge({"id": [5], "v": [5]}).when_not_matched_insert_all().execute()
    t.restore(snapshot_id=1)
    t.compact(full=True)
    h = t.history()
    assert h.schema.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    ops = h.column("operation").to_pylist()
    assert ops[:6] == ["COMPACT", "RESTORE", "MERGE", "UPDATE", "DELETE", "APPEND"]
    assert h.column("version").to_pylist() == sorted((s.id for s in t.snapshots()), reverse=True)
    snaps = {r["snapshot_id"]: r for r in t.system_table("snapshots").to_pylist()}
    for row in h.to_pylist():
        s = snaps[row["version"]]
        assert row["operation"] == s["operation"] and row["commit_user"] == s["commit_user"]
        assert row["timestamp"].timestamp() * 1000 == t.snapshot(row["version"]).time_millis
        assert row["total_record_count"] == s["total_record_count"]
        entries = t.delta_entries(t.snapshot(row["version"]))
        assert row["added_files"] == sum(e.kind is FileKind.ADD for e in entries)
        assert row["deleted_files"] == sum(e.kind is FileKind.DELETE for e in entries)
    assert t.history(limit=2).column("version").to_pylist() == h.column("version").to_pylist()[:2]
    assert mt.create_table(table_uri + "2", SCHEMA, ["id"]).history().num_rows == 0


@pytest.mark.parametrize("how", ["snapshot", "iso", "datetime", "timedelta"])
def test_expire_older_than_keeps_newer_and_the_latest(table_uri: str, how: str) -> None:
    t = _table(table_uri, commits=4)
    cut = t.snapshot(3).time_millis
    as_dt = datetime.datetime.fromtimestamp(cut / 1000, tz=datetime.UTC)
    now = t.snapshot(4).time_millis + 1000
    arg = {
        "snapshot": cut,
        "iso": as_dt.isoformat(),
        "datetime": as_dt,
        "timedelta": datetime.timedelta(milliseconds=now - cut),
    }[how]
    result = t.expire_snapshots(older_than=arg, now_ms=now)
    assert result.expired_snapshots == [1, 2] and not result.dry_run
    assert [s.id for s in t.snapshots()] == [3, 4]
    assert sorted(t.read().column("id").to_pylist()) == [0, 1, 2, 3, 100, 101, 102, 103]
    assert t.expire_snapshots(older_than=now + 10**9).expired_snapshots == [3]  # the latest is always kept


def test_retain_last_and_tags_protect_files(table_uri: str) -> None:
    t = _table(table_uri, commits=5)
    t.delete([("id", "<", 3)])
    t.compact(full=True)
    t.create_tag("first", snapshot_id=1)
    stray = os.path.join(table_uri, "bucket-0", "notes.txt")
    with open(stray, "w") as f:
        f.write("mine")
    ids = [s.id for s in t.snapshots()]
    result = t.expire_snapshots(retain_last=2)
    assert [s.id for s in t.snapshots()] == ids[-2:] and result.expired_snapshots == ids[:-2]
    assert result.deleted_files  # files no kept snapshot or tag uses
    assert all(not os.path.exists(p) for p in result.deleted_files)
    assert os.path.exists(stray)  # never a file the table did not write
    assert t.read(tag="first").to_pydict() == {"id": [0, 100], "v": [0, 0]}
    assert sorted(t.read().column("id").to_pylist()) == [3, 4, 100, 101, 102, 103, 104]


def test_dry_run_touches_nothing_and_tells_what_a_run_removes(table_uri: str) -> None:
    t = _table(table_uri, commits=5)
    t.compact(full=True)
    short = t.create_tag("short", snapshot_id=2, time_retained=datetime.timedelta(seconds=1))
    now = short.tag_create_time + 5000
    before = _listing(table_uri)
    ids = [s.id for s in t.snapshots()]
    dry = t.expire_snapshots(retain_last=1, dry_run=True, now_ms=now)
    assert _listing(table_uri) == before and dry.dry_run
    assert dry.expired_snapshots == ids[:-1] and dry.expired_tags == ["short"] and dry.deleted_files
    real = t.expire_snapshots(retain_last=1, now_ms=now)
    assert (real.expired_snapshots, real.expired_tags, sorted(real.deleted_files)) == (
        dry.expired_snapshots,
        dry.expired_tags,
        sorted(dry.deleted_files),
    )
    assert set(before) - set(_listing(table_uri)) >= set(real.deleted_files)


def test_defaults_follow_the_options(table_uri: str) -> None:
    t = _table(table_uri, commits=3)
    assert t.expire_snapshots().expired_snapshots == []  # snapshot.num-retained.min = 10
    assert [s.id for s in t.snapshots()] == [1, 2, 3]


def test_bad_expire_arguments(table_uri: str) -> None:
    t = _table(table_uri, commits=2)
    before = _listing(table_uri)
    for kwargs, name in [
        ({"retain_last": 0}, "retain_last"),
        ({"retain_last": "2"}, "retain_last"),
        ({"older_than": "yesterday"}, "older_than"),
        ({"older_than": [1]}, "older_than"),
    ]:
        with pytest.raises(OptionsError, match=f"'{name}'"):
            t.expire_snapshots(**kwargs)  # type: ignore[arg-type]
    assert _listing(table_uri) == before
