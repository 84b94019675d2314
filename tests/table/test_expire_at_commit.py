"""Every commit expires snapshots by the table's options, as Paimon's writers do: ``snapshot.num-retained.*``,
``snapshot.time-retained``, ``snapshot.expire.limit``, ``snapshot.expire.execution-mode``; consumers and tags
protect what they use; a ``write-only`` writer leaves it to the compaction job; a failed expiration never
fails the committed write."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def make(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["k"], options={"bucket": "1", **options})


def put(t: mt.Table, k: int) -> None:
    t.write(pa.table({"k": pa.array([k], pa.int64()), "v": pa.array([k], pa.int64())}))


def ids(t: mt.Table) -> list[int]:
    return [s.id for s in t.snapshots()]


def data_files(uri: str) -> set[str]:
    return {p.name for p in Path(uri).rglob("data-*.parquet")}


def test_defaults_keep_young_snapshots(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "false", "num-sorted-run.compaction-trigger": "50"})
    for k in range(12):
        put(t, k)
    assert ids(t) == list(range(1, 13))  # younger than snapshot.time-retained (1 h)


def test_num_retained_max_expires_at_each_commit_and_deletes_unused_files(table_uri: str) -> None:
    t = make(table_uri, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3"})
    for k in range(6):
        put(t, k)
    assert len(ids(t)) == 3 and ids(t)[-1] == t.latest_snapshot_id()
    assert t.read().num_rows == 6
    live = {f.file_name for _, _, f in t.files()}
    kept = set().union(*({f.file_name for _, _, f in t.files(snapshot_id=sid)} for sid in ids(t)))
    assert live <= data_files(table_uri) and data_files(table_uri) <= kept


def test_time_retained_and_min(table_uri: str) -> None:
    t = make(table_uri, **{"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 ms"})
    for k in range(5):
        put(t, k)
        time.sleep(0.005)
    assert len(ids(t)) == 2


def test_expire_limit_bounds_one_commit(table_uri: str) -> None:
    t = make(table_uri, **{"num-sorted-run.compaction-trigger": "50"})
    for k in range(6):
        put(t, k)
    t.alter.set_options(
        {"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1", "snapshot.expire.limit": "2"}
    )
    put(t, 6)
    assert ids(t)[0] == 3  # two expired by this commit
    put(t, 7)
    assert ids(t)[0] == 5


def test_consumers_and_tags_are_respected(table_uri: str) -> None:
    t = make(table_uri, **{"num-sorted-run.compaction-trigger": "50"})
    for k in range(3):
        put(t, k)
    t.create_tag("first", snapshot_id=1)
    t.reset_consumer("reader", 2)
    t.alter.set_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    put(t, 3)
    assert ids(t) == [2, 3, 4]  # the consumer reads snapshot 2 next
    t.delete_consumer("reader")
    put(t, 4)
    assert ids(t) == [5]
    assert t.read(tag="first").to_pylist() == [{"k": 0, "v": 0}]


def test_write_only_writers_leave_expiration_to_the_compaction_job(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "true", "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    for k in range(4):
        put(t, k)
    assert ids(t) == [1, 2, 3, 4]
    t.compact(full=True)
    assert ids(t) == [4, 5] and t.read().num_rows == 4


def test_async_mode_expires_in_the_background(table_uri: str) -> None:
    opts = {
        "snapshot.num-retained.min": "1",
        "snapshot.num-retained.max": "2",
        "snapshot.expire.execution-mode": "async",
    }
    t = make(table_uri, **opts)
    for k in range(5):
        put(t, k)
    deadline = time.monotonic() + 20
    while len(ids(t)) > 2 and time.monotonic() < deadline:
        put(t, 100)  # a commit starts another run once the previous one finished
        time.sleep(0.05)
    assert len(ids(t)) <= 2 and t.read().num_rows == 6
    with pytest.raises(mt.OptionsError, match=r"snapshot\.expire\.execution-mode"):
        make(table_uri + "2", **{"snapshot.expire.execution-mode": "later"})


def test_a_failed_expiration_never_fails_the_write(table_uri: str, caplog: pytest.LogCaptureFixture) -> None:
    t = make(table_uri, **{"num-sorted-run.compaction-trigger": "50"})
    for k in range(3):
        put(t, k)
    Path(table_uri, "snapshot", "snapshot-1").write_text("{ not json")
    t.alter.set_options({"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "1"})
    with caplog.at_level(logging.WARNING, logger="mergetable.commit.maintenance"):
        put(t, 3)
    assert t.latest_snapshot_id() == 4 and t.read().num_rows == 4
    assert "snapshot expiration after a commit failed" in caplog.text


def test_changelog_retention_options(table_uri: str) -> None:
    t = make(table_uri, **{"changelog.num-retained.min": "5", "changelog.time-retained": "30 min"})
    assert t.options["changelog.num-retained.min"] == "5"
    with pytest.raises(mt.OptionsError, match=r"changelog\.num-retained\.min"):
        make(table_uri + "2", **{"changelog.num-retained.min": "20"})
    with pytest.raises(mt.OptionsError, match=r"changelog\.time-retained"):
        make(table_uri + "3", **{"changelog.time-retained": "2 h"})


def test_a_tag_past_its_retention_expires_at_the_next_commit(table_uri: str) -> None:
    t = make(table_uri, **{"num-sorted-run.compaction-trigger": "50"})
    put(t, 1)
    t.create_tag("short", time_retained_ms=1)
    t.create_tag("kept")
    time.sleep(0.05)
    assert sorted(t.tags()) == ["kept", "short"]
    put(t, 2)
    assert sorted(t.tags()) == ["kept"]
    assert t.read(tag="kept").column("k").to_pylist() == [1]


def test_a_write_only_writer_leaves_tags_to_the_job(table_uri: str) -> None:
    t = make(table_uri, **{"write-only": "true"})
    put(t, 1)
    t.create_tag("short", time_retained_ms=1)
    time.sleep(0.05)
    put(t, 2)
    assert sorted(t.tags()) == ["short"]
