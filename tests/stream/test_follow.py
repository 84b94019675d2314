"""The plain-Python follower: every scan mode, admission limits, consumers, expiration, bad input."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.consumers import ConsumerManager
from mergetable.core.errors import SnapshotExpiredError
from mergetable.metadata.models import CommitKind
from mergetable.read.stream import Position

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def create(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2", "write-only": "true", **options})


def put(t: mt.Table, rows: dict[int, int]) -> None:
    t.write(pa.table({"k": list(rows), "v": list(rows.values())}, schema=SCHEMA))


def drain(t: mt.Table, **options: Any) -> list[list[tuple[str, int, Any]]]:
    """Every batch a follower delivers until it is idle, as sorted (kind, k, v) rows."""
    consumer = options.pop("consumer_id", None)
    batches = t.follow(options, consumer_id=consumer, stop_when_idle=True)
    return [sorted((r["_row_kind"], r["k"], r["v"]) for r in b.data.to_pylist()) for b in batches]


@pytest.fixture
def three(table_uri: str) -> mt.Table:
    """Snapshots: 1 = {1:10, 2:20}, 2 = {1:11}, 3 = delete 2."""
    t = create(table_uri)
    put(t, {1: 10, 2: 20})
    put(t, {1: 11})
    t.delete_keys(pa.table({"k": [2]}))
    return t


def test_latest_full_reads_the_snapshot_then_follows(three: mt.Table) -> None:
    assert drain(three) == [[("+I", 1, 11)]]
    assert drain(three, **{"scan.mode": "latest-full"}) == [[("+I", 1, 11)]]
    follower = three.follow(stop_when_idle=True)
    assert [b.end.next_snapshot for b in follower] == [4]
    put(three, {9: 90})
    assert drain(three, **{"scan.mode": "latest"}) == []


def test_from_snapshot_modes(three: mt.Table) -> None:
    assert drain(three, **{"scan.snapshot-id": "2"}) == [[("+I", 1, 11), ("-D", 2, None)]]  # default → from-snapshot
    assert drain(three, **{"scan.mode": "from-snapshot", "startingVersion": "3"}) == [[("-D", 2, None)]]
    full = drain(three, **{"scan.mode": "from-snapshot-full", "scan.snapshot-id": "2"})
    assert full == [[("+I", 1, 11), ("+I", 2, 20)], [("-D", 2, None)]]
    three.create_tag("t1", snapshot_id=1)
    assert drain(three, **{"scan.mode": "from-snapshot-full", "scan.tag-name": "t1"})[0] == [
        ("+I", 1, 10),
        ("+I", 2, 20),
    ]


def test_from_timestamp_starts_at_the_first_snapshot_committed_then(three: mt.Table) -> None:
    s2 = three.snapshot(2)
    got = drain(three, **{"scan.timestamp-millis": str(s2.time_millis)})
    assert got == [[("+I", 1, 11), ("-D", 2, None)]]
    assert drain(three, **{"scan.mode": "from-timestamp", "scan.timestamp-millis": "0"})[0][0] == ("+I", 1, 10)


def test_compacted_full_starts_at_the_latest_compaction(table_uri: str) -> None:
    t = create(table_uri)
    put(t, {1: 10})
    t.compact(full=True)
    put(t, {2: 20})
    assert drain(t, **{"scan.mode": "compacted-full"}) == [[("+I", 1, 10)], [("+I", 2, 20)]]


def test_max_snapshots_per_trigger_never_splits_a_snapshot(three: mt.Table) -> None:
    got = drain(three, **{"scan.mode": "from-snapshot", "scan.snapshot-id": "1", "max-snapshots-per-trigger": "1"})
    assert got == [[("+I", 1, 10), ("+I", 2, 20)], [("+I", 1, 11)], [("-D", 2, None)]]
    by_files = drain(three, **{"scan.snapshot-id": "1", "read.stream.maxFilesPerTrigger": "1"})
    assert len(by_files) == 3  # snapshot 1 has two files: still one batch


def test_drop_update_before(table_uri: str) -> None:
    t = create(table_uri, **{"changelog-producer": "input"})
    t.write(pa.table({"k": [1, 1], "v": [1, 2]}, schema=SCHEMA), row_kind=["-U", "+U"])
    assert drain(t, **{"scan.snapshot-id": "1"}) == [[("+U", 1, 2), ("-U", 1, 1)]]
    assert drain(t, **{"scan.snapshot-id": "1", "changelog.drop-update-before": "true"}) == [[("+U", 1, 2)]]


def test_consumers_resume_protect_and_expire(three: mt.Table) -> None:
    t = mt.open_table(three.uri)
    follower = t.follow({"scan.snapshot-id": "1", "max-snapshots-per-trigger": "1"}, consumer_id="etl")
    next(follower)
    next(follower)  # asking for the second batch records that the first one was handled
    assert t.consumers() == {"etl": 2}
    follower.close()
    assert drain(t, consumer_id="etl") == [[("+I", 1, 11), ("-D", 2, None)]]  # resumes at snapshot 2
    assert t.consumers() == {"etl": 4}
    t.reset_consumer("etl", 2)
    assert drain(t, consumer_id="etl", **{"max-snapshots-per-trigger": "5"}) == [[("+I", 1, 11), ("-D", 2, None)]]
    # expiration keeps what a consumer still needs
    t.reset_consumer("etl", 2)
    aggressive = {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"}
    t2 = mt.open_table(t.uri)
    t2.table_schema = t2.table_schema.with_options(aggressive)
    time.sleep(0.01)
    result = t2.expire_snapshots()
    assert result.expired_snapshots == [1] and t2.snapshots()[0].id == 2
    with pytest.raises(mt.MergeTableError, match=r"snapshots 2\.\.4"):
        t.reset_consumer("etl", 1)
    # an idle consumer is retired, then nothing protects snapshot 2 any more
    idle = t2.table_schema.with_options({**aggressive, "consumer.expiration-time": "1 ms"})
    t2.table_schema = idle
    result = t2.expire_snapshots()
    assert result.expired_consumers == ["etl"] and t2.consumers() == {}
    assert t2.snapshots()[0].id == 3
    t.reset_consumer("again", 3)
    t.delete_consumer("again")
    with pytest.raises(mt.SnapshotNotFoundError, match="consumer 'again'"):
        t.delete_consumer("again")


def test_a_consumer_protects_its_full_first_batch_from_the_moment_it_plans(three: mt.Table) -> None:
    t = mt.open_table(three.uri)
    follower = t.follow({"scan.mode": "latest-full"}, consumer_id="etl", poll_interval_ms=1)
    first = next(follower)  # batch 0 (the full read of snapshot 3) is delivered, not yet handled
    assert sorted(first.data.column("k").to_pylist()) == [1]
    assert t.consumers() == {"etl": 3}  # recorded when the stream planned, before any batch completed
    stored = ConsumerManager(t.fileio).get("etl")
    assert stored is not None and stored.full_scan is True
    put(t, {5: 50})
    put(t, {6: 60})
    aggressive = mt.open_table(t.uri)
    aggressive.table_schema = t.table_schema.with_options(
        {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"}
    )
    time.sleep(0.01)
    assert aggressive.expire_snapshots().expired_snapshots == [1, 2]  # snapshot 3 and after are kept
    follower.close()  # batch 0 never completed: a restart without a checkpoint reads snapshot 3 in full again
    assert drain(t, consumer_id="etl") == [[("+I", 1, 11)], [("+I", 5, 50), ("+I", 6, 60)]]
    assert t.consumers() == {"etl": 6}
    assert ConsumerManager(t.fileio).get("etl").full_scan is None  # type: ignore[union-attr]


def test_an_expired_position_is_a_typed_error(three: mt.Table) -> None:
    t = mt.open_table(three.uri)
    t.table_schema = t.table_schema.with_options({"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    time.sleep(0.01)
    t.expire_snapshots()
    assert t.snapshots()[0].id == 3
    # a start before the earliest snapshot starts at the earliest, as in Paimon ...
    assert drain(t, **{"scan.snapshot-id": "1"}) == [[("-D", 2, None)]]
    # ... but a stream that must continue from an expired snapshot fails, naming it and how to resume
    with pytest.raises(SnapshotExpiredError, match="snapshot 2 was expired") as info:
        t.stream({}).latest(Position(2))
    assert info.value.snapshot_id == 2 and "scan.mode 'latest-full'" in str(info.value)
    ConsumerManager(t.fileio).record("slow", 1)  # a consumer left behind (e.g. retired, then recreated)
    with pytest.raises(SnapshotExpiredError, match="--reset slow --snapshot 3"):
        drain(t, consumer_id="slow")
    assert t.consumers() == {"slow": 1}  # the failed start changed nothing


@pytest.mark.parametrize(
    ("options", "option"),
    [
        ({"scan.mode": "earliest"}, "scan.mode"),
        ({"scan.snapshot-id": "1", "scan.timestamp-millis": "5"}, "scan.timestamp-millis"),
        ({"startingVersion": "1", "scan.snapshot-id": "2"}, "startingversion"),
        ({"scan.mode": "from-snapshot"}, "scan.mode"),
        ({"scan.mode": "latest", "scan.snapshot-id": "1"}, "scan.snapshot-id"),
        ({"scan.mode": "from-timestamp", "scan.timestamp": "yesterday"}, "scan.timestamp"),
        ({"max-snapshots-per-trigger": "0"}, "max-snapshots-per-trigger"),
        ({"consumer-id": "a/b"}, "consumer-id"),
    ],
)
def test_bad_stream_options_name_the_option(three: mt.Table, options: dict[str, str], option: str) -> None:
    before = [s.id for s in three.snapshots()]
    with pytest.raises(mt.OptionsError) as info:
        three.stream(options)
    assert info.value.option == option
    assert [s.id for s in three.snapshots()] == before and three.consumers() == {}


def test_a_missing_tag_is_a_typed_error(three: mt.Table) -> None:
    with pytest.raises(mt.SnapshotNotFoundError, match="tag 'nope'"):
        drain(three, **{"scan.tag-name": "nope"})
    with pytest.raises(mt.SnapshotNotFoundError, match="tag 'nope'"):
        three.changelog("nope", 3)


def test_overwrite_snapshots_are_skipped_unless_streaming_read_overwrite(table_uri: str) -> None:
    t = create(table_uri)
    put(t, {1: 10, 2: 20})
    t.write(pa.table({"k": [2, 3], "v": [21, 30]}, schema=SCHEMA), overwrite=True)
    assert t.snapshot(2).commit_kind is CommitKind.OVERWRITE
    assert drain(t, **{"scan.snapshot-id": "2"}) == [[]]  # the snapshot passes, nothing in it is read
    got = drain(t, **{"scan.snapshot-id": "2", "streaming-read-overwrite": "true"})
    assert got == [[("+I", 3, 30), ("+U", 2, 21), ("-D", 1, 10), ("-U", 2, 20)]]


def test_rows_per_trigger_limits_a_batch_to_whole_snapshots(three: mt.Table) -> None:
    got = drain(three, **{"scan.snapshot-id": "1", "read.stream.maxRowsPerTrigger": "2"})
    assert got == [[("+I", 1, 10), ("+I", 2, 20)], [("+I", 1, 11), ("-D", 2, None)]]  # 2 rows, then 1 + 1
    assert len(drain(three, **{"scan.snapshot-id": "1", "maxRowsPerTrigger": "1"})) == 3


@pytest.mark.parametrize("full", [False, True])
def test_a_snapshot_expired_while_its_batch_is_read_is_a_snapshot_expired_error(
    table_uri: str, monkeypatch: pytest.MonkeyPatch, full: bool
) -> None:
    """A follower without a consumer protects nothing: an expiration that runs between planning a batch and reading
    its files deletes them. That is an expired snapshot (resume as it says), not a damaged data file."""
    t = create(table_uri, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    put(t, {1: 10, 2: 20})
    put(t, {1: 11})
    stream = t.stream({"scan.mode": "from-snapshot-full" if full else "from-snapshot", "scan.snapshot-id": "1"})
    start = stream.initial()
    end = stream.latest(start)
    planned = stream.plan

    def plan_then_expire(*args: Any, **kwargs: Any) -> Any:
        splits = planned(*args, **kwargs)
        t.compact(full=True)  # the files of snapshots 1 and 2 are rewritten ...
        time.sleep(0.01)
        t.expire_snapshots()  # ... and deleted with them
        return splits

    monkeypatch.setattr(stream, "plan", plan_then_expire)
    with pytest.raises(SnapshotExpiredError, match="snapshot 1 was expired") as info:
        stream.read(start, end, stream.reader())
    assert info.value.snapshot_id == 1 and info.value.earliest == 3
