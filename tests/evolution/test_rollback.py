"""Rollback to a snapshot or tag (a new commit with the target's state), tag retention, and the rollback command
line."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.commit.maintenance import used_files
from mergetable.commit.restore import RESTORED_FROM, ROLLED_BACK_TO
from mergetable.commit.rollback import iso_duration, retained_ms
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.errors import ArgumentError, MergeTableError, OptionsError, SnapshotNotFoundError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.float64())])


def _table(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], {"bucket": "2", **options})


def _rows(t: mt.Table, **travel: object) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in t.read(**travel).to_pylist())  # type: ignore[arg-type]


def _files_on_disk(uri: str) -> set[str]:
    return {str(p) for p in Path(uri).rglob("*") if p.is_file()}


def _earliest(t: mt.Table) -> int | None:
    return SnapshotManager(t.fileio).earliest_id()


def _every_reference_exists(t: mt.Table) -> None:
    missing = [p for p in used_files(t.fileio, t.table_schema) if not os.path.exists(p)]
    assert missing == []


def _write(t: mt.Table, i: int) -> None:
    dt = "a" if i % 2 else "b"
    t.write(pa.table({"id": [i % 3, 10 + i], "dt": [dt, dt], "v": [float(i), -float(i)]}, schema=SCHEMA))


def test_rollback_to_snapshot_removes_later_snapshots_tags_and_files(table_uri: str) -> None:
    t = _table(table_uri, **{"changelog-producer": "input"})
    for i in range(5):
        _write(t, i)
    states = {s.id: _rows(t, snapshot_id=s.id) for s in t.snapshots()}
    t.create_tag("early", snapshot_id=1)
    t.create_tag("late", snapshot_id=4)
    t.compact(full=True)
    before = _files_on_disk(table_uri)
    result = t.rollback_to(snapshot_id=3)
    assert (result.snapshot_id, result.committed) == (3, 7)  # a new commit: ids only grow
    assert result.removed_snapshots == [6, 5, 4]
    assert result.removed_tags == ["late"]
    assert [s.id for s in t.snapshots()] == [1, 2, 3, 7]  # the rolled-back snapshots left the history
    assert [r["version"] for r in t.history().to_pylist()] == [7, 3, 2, 1]
    assert t.history().column("operation").to_pylist()[0] == "ROLLBACK"
    assert t.latest_snapshot_id() == 7
    assert t.snapshot(7).properties == {RESTORED_FROM: "3", ROLLED_BACK_TO: "3"}
    assert list(t.tags()) == ["early"]
    assert _rows(mt.open_table(table_uri)) == states[3]
    assert _rows(t, tag="early") == states[1]
    assert _rows(t, snapshot_id=5) == states[5]  # a reader of a rolled-back snapshot is never cut off
    assert before - _files_on_disk(table_uri) == {t.fileio.join("tag", "tag-late")}  # no data file deleted
    _every_reference_exists(t)
    _write(t, 7)  # commits continue after the rollback's snapshot
    assert t.latest_snapshot_id() == 8
    assert t.changelog(7, 8).num_rows == 2
    t.expire_snapshots(retain_last=2)  # the rolled-back snapshots' files go with expiration
    assert [s.id for s in t.snapshots()] == [7, 8]
    expected = {r[:2]: r for r in states[3]} | {(1, "a"): (1, "a", 7.0), (17, "a"): (17, "a", -7.0)}
    assert _rows(t) == sorted(expected.values())
    assert t.remove_orphan_files(older_than_ms=2**62, force=True) == []  # nothing unreferenced is left behind


def _retain(t: mt.Table, most: int) -> None:
    """Keep only the newest ``most`` snapshots from now on (set after the writes: commits expire too)."""
    t.alter.set_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": str(most)})


def test_rollback_to_tag_whose_snapshot_expired(table_uri: str) -> None:
    t = _table(table_uri)
    for i in range(5):
        _write(t, i)
    t.create_tag("keep", snapshot_id=2)
    tagged = _rows(t, tag="keep")
    _retain(t, 2)
    t.expire_snapshots()
    assert _earliest(t) == 4
    result = t.rollback_to(tag="keep")
    assert (result.snapshot_id, result.committed, result.removed_snapshots) == (2, 6, [5, 4])
    assert [s.id for s in t.snapshots()] == [6]
    assert t.latest_snapshot_id() == 6 and t.snapshot(6).properties == {RESTORED_FROM: "2", ROLLED_BACK_TO: "2"}
    assert _rows(t) == tagged and _rows(t, snapshot_id=6) == tagged
    assert list(t.tags()) == ["keep"]
    _every_reference_exists(t)


def test_rollback_by_id_to_an_expired_snapshot_held_by_a_tag(table_uri: str) -> None:
    t = _table(table_uri)
    for i in range(3):
        _write(t, i)
    t.create_tag("one", snapshot_id=1)
    tagged = _rows(t, tag="one")
    _retain(t, 1)
    t.expire_snapshots()
    assert _earliest(t) == 3
    t.rollback_to(snapshot_id=1)  # Paimon falls back to a tag on the expired snapshot
    assert [s.id for s in t.snapshots()] == [4] and _rows(t) == tagged


def test_rollback_to_an_expired_snapshot_is_refused_and_changes_nothing(table_uri: str) -> None:
    t = _table(table_uri, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    for i in range(4):
        _write(t, i)
    t.expire_snapshots()
    before, rows = _files_on_disk(table_uri), _rows(t)
    with pytest.raises(SnapshotNotFoundError, match=r"snapshot 1: it has expired \(the earliest snapshot is 3\)"):
        t.rollback_to(snapshot_id=1)
    with pytest.raises(SnapshotNotFoundError, match="snapshot 9: it does not exist"):
        t.rollback_to(snapshot_id=9)
    with pytest.raises(SnapshotNotFoundError, match="tag 'nope'"):
        t.rollback_to(tag="nope")
    with pytest.raises(ArgumentError, match="exactly one"):
        t.rollback_to()
    with pytest.raises(ArgumentError, match=r"'tag'.*exactly one"):
        t.rollback_to(snapshot_id=3, tag="x")
    with pytest.raises(OptionsError, match="snapshot_id"):  # a typed error, never "corrupt"
        t.rollback_to(snapshot_id="three")
    with pytest.raises(ArgumentError, match="exactly one"):
        t.restore()
    assert _files_on_disk(table_uri) == before and _rows(t) == rows


def test_rollback_and_restore_take_the_time_travel_arguments(table_uri: str) -> None:
    t = _table(table_uri)
    for i in range(4):
        _write(t, i)
    states = {s.id: _rows(t, snapshot_id=s.id) for s in t.snapshots()}
    t.create_tag("two", snapshot_id=2)
    restored = t.restore(version="two")
    assert restored is not None and restored.properties == {RESTORED_FROM: "2"} and _rows(t) == states[2]
    assert t.restore(snapshot_id="1") is not None and _rows(t) == states[1]
    assert t.restore(tag="two") is not None and _rows(t) == states[2]
    assert t.restore(timestamp_ms=t.snapshot(4).time_millis) is not None and _rows(t) == states[4]
    assert t.rollback_to(snapshot_id="3").committed == 9 and _rows(t) == states[3]  # a numeric string, as in reads
    assert t.rollback_to(timestamp_ms=t.snapshot(3).time_millis).snapshot_id == 3  # the latest state already
    assert t.rollback_to(version="two").snapshot_id == 2 and _rows(t) == states[2]
    assert t.rollback_to(version="1").snapshot_id == 1 and _rows(t) == states[1]
    assert list(t.tags()) == []  # "two" was on a snapshot after 1
    _every_reference_exists(t)


def test_rollback_to_the_latest_snapshot_changes_nothing(table_uri: str) -> None:
    t = _table(table_uri)
    _write(t, 1)
    result = t.rollback_to(snapshot_id=1)
    assert (result.committed, result.removed_snapshots, result.removed_tags) == (None, [], [])
    assert t.latest_snapshot_id() == 1


def test_rollback_under_concurrent_writers_leaves_a_consistent_table(table_uri: str) -> None:
    t = _table(table_uri, **{"commit.max-retries": "100", "commit.min-retry-wait": "1 ms"})
    for i in range(6):
        _write(t, i)
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(k: int) -> None:
        w = mt.open_table(table_uri)
        i = 100 * k
        while not stop.is_set():
            i += 1
            try:
                _write(w, i)
            except MergeTableError:  # a write racing with a rollback may fail (typed); it leaves no trace
                pass
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
                return

    threads = [threading.Thread(target=writer, args=(k,)) for k in (1, 2)]
    for th in threads:
        th.start()
    states = {s.id: _rows(t, snapshot_id=s.id) for s in t.snapshots()}
    outcomes = []
    try:
        for target in (3, 2, 1):
            outcomes.append(t.rollback_to(snapshot_id=target).committed)
    finally:
        stop.set()
        for th in threads:
            th.join()
    assert errors == []
    assert all(c is not None for c in outcomes)
    t.rollback_to(snapshot_id=1)  # with the writers stopped, the state is snapshot 1's exactly
    assert _rows(t) == states[1]
    assert [s.id for s in t.snapshots()] == [1, t.latest_snapshot_id()]
    _every_reference_exists(t)
    for s in SnapshotManager(t.fileio).snapshots():
        t.read(snapshot_id=s.id)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.integers(0, 5), min_size=2, max_size=7), pick=st.integers(0, 100))
def test_rollback_matches_a_dict_oracle(tmp_path_factory: pytest.TempPathFactory, ops: list[int], pick: int) -> None:
    uri = str(tmp_path_factory.mktemp("rb") / "t")
    t = _table(uri)
    oracle: dict[tuple[int, str], float] = {}
    states: dict[int, dict[tuple[int, str], float]] = {}
    for n, key in enumerate(ops):
        if key == 5 and oracle:
            k = sorted(oracle)[n % len(oracle)]
            t.delete_keys(pa.table({"id": [k[0]], "dt": [k[1]]}))
            del oracle[k]
        else:
            t.write(pa.table({"id": [key], "dt": ["a" if n % 2 else "b"], "v": [float(n)]}, schema=SCHEMA))
            oracle[(key, "a" if n % 2 else "b")] = float(n)
        latest = t.latest_snapshot_id()
        if latest is not None:
            states[latest] = dict(oracle)
    target = sorted(states)[pick % len(states)]
    t.rollback_to(snapshot_id=target)
    assert {(r["id"], r["dt"]): r["v"] for r in t.read().to_pylist()} == states[target]
    _every_reference_exists(t)


def test_tags_expire_by_their_retention(table_uri: str) -> None:
    t = _table(table_uri)
    for i in range(3):
        _write(t, i)
    _retain(t, 1)
    short = t.create_tag("short", snapshot_id=1, time_retained=datetime.timedelta(minutes=5))
    t.create_tag("ms", snapshot_id=2, time_retained=60_000)
    t.create_tag("forever", snapshot_id=2)
    assert short.tag_time_retained == 300_000
    assert t.system_table("tags").column("time_retained").to_pylist() == [None, "PT1M", "PT5M"]
    result = t.expire_snapshots(now_ms=short.tag_create_time + 120_000)  # "ms" is past its retention
    assert result.expired_tags == ["ms"]
    assert sorted(t.tags()) == ["forever", "short"]
    result = t.expire_snapshots(now_ms=short.tag_create_time + 600_000)
    assert result.expired_tags == ["short"] and list(t.tags()) == ["forever"]
    _every_reference_exists(t)
    assert t.remove_orphan_files(older_than_ms=2**62, force=True) == []  # the expired tags' own files went with them


def test_bad_retention_is_refused() -> None:
    assert retained_ms(datetime.timedelta(seconds=1.5)) == 1500
    with pytest.raises(MergeTableError, match="time_retained"):
        retained_ms(datetime.timedelta(0))
    with pytest.raises(MergeTableError, match="time_retained"):
        retained_ms("1h")  # type: ignore[arg-type]
    assert [iso_duration(x) for x in (3_600_000, 5_400_000, 1_500, 0)] == ["PT1H", "PT1H30M", "PT1.5S", "PT0S"]


def test_rollback_command(table_uri: str) -> None:
    t = _table(table_uri)
    for i in range(3):
        _write(t, i)
    t.create_tag("one", snapshot_id=1)
    root = Path(__file__).resolve().parents[2]
    run = [sys.executable, "-m", "mergetable.cli.main"]
    done = subprocess.run([*run, "rollback", table_uri, "--snapshot", "2"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "rolled back to snapshot 2" in done.stdout
    done = subprocess.run(
        [*run, "rollback", table_uri, "--tag", "one", "--json"], capture_output=True, text=True, cwd=root
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["removed_snapshots"] == [4, 2]
    assert [s.id for s in mt.open_table(table_uri).snapshots()] == [1, 5]
    done = subprocess.run([*run, "rollback", table_uri, "--snapshot", "7"], capture_output=True, text=True, cwd=root)
    assert done.returncode == 1 and "snapshot 7" in done.stderr
