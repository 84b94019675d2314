"""The read request: time travel in every spelling and form, option aliases, storage options."""

from __future__ import annotations

import datetime
import time

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.read_options import ReadRequest, TimeTravel, parse_filter_text, to_epoch_millis
from mergetable.core.storage import storage_options, storage_pairs


def test_timestamps_in_every_form() -> None:
    ms = 1_714_521_600_000  # 2024-05-01T00:00:00Z
    utc = datetime.datetime(2024, 5, 1, tzinfo=datetime.UTC)
    assert to_epoch_millis(ms) == to_epoch_millis(str(ms)) == to_epoch_millis(utc) == ms
    assert to_epoch_millis("2024-05-01T00:00:00Z") == to_epoch_millis("2024-05-01 02:00:00+02:00") == ms
    naive = datetime.datetime(2024, 5, 1, 12, 30)
    assert to_epoch_millis(naive) == to_epoch_millis("2024-05-01T12:30:00") == int(naive.timestamp() * 1000)
    with pytest.raises(mt.OptionsError, match=r"'timestamp_ms'.*yesterday"):
        to_epoch_millis("yesterday", "timestamp_ms")


def test_option_aliases_map_to_one_request() -> None:
    for key in ("snapshot-id", "scan.snapshot-id"):
        assert ReadRequest.from_options({key: "3"}).travel == TimeTravel(snapshot_id=3)
    for key in ("version", "scan.version", "versionAsOf"):
        assert ReadRequest.from_options({key: "7"}).travel == TimeTravel(version="7")
    for key in ("tag", "scan.tag-name", "tag-name"):
        assert ReadRequest.from_options({key: "t1"}).travel == TimeTravel(tag="t1")
    for key, value in [
        ("timestamp-millis", "1714521600000"),
        ("scan.timestamp-millis", "2024-05-01T00:00:00Z"),
        ("timestampAsOf", "2024-05-01T00:00:00+00:00"),
        ("scan.timestamp", "1714521600000"),
    ]:
        assert ReadRequest.from_options({key: value}).travel == TimeTravel(timestamp_ms=1_714_521_600_000)
    inc = ReadRequest.from_options({"scan.incremental-between": "1, t2", "source.split.target-size": "1mb"})
    assert inc.incremental_between == (1, "t2") and inc.split_size == 1 << 20
    opts = ReadRequest.from_options({"columns": "a, b", "filter": '[["a", "not in", [1, null]]]'})
    assert opts.columns == ("a", "b") and opts.filter == [[("a", "not in", [1, None])]]


def test_request_errors_name_the_option() -> None:
    with pytest.raises(mt.OptionsError, match=r"'tag'.*only one time-travel option"):
        ReadRequest.from_options({"snapshot-id": "1", "tag": "x"})
    with pytest.raises(mt.OptionsError, match=r"'scan.snapshot-id'.*conflicts"):
        ReadRequest.from_options({"snapshot-id": "1", "scan.snapshot-id": "2"})
    with pytest.raises(mt.OptionsError, match=r"'snapshot-id'.*not an integer"):
        ReadRequest.from_options({"snapshot-id": "one"})
    with pytest.raises(mt.OptionsError, match="'timestampasof'"):
        ReadRequest.from_options({"timestampAsOf": "soon"})
    with pytest.raises(mt.OptionsError, match="'incremental-between'"):
        ReadRequest.from_options({"incremental-between": "1", "tag": "x"})
    with pytest.raises(mt.OptionsError, match="'tag'"):
        ReadRequest.of(snapshot_id=1, tag="x")
    with pytest.raises(mt.OptionsError, match="'incremental_between'"):
        ReadRequest.of(incremental_between=(1, 2), version=3)
    with pytest.raises(mt.OptionsError, match="'split_size'"):
        ReadRequest.of(split_size=0)
    with pytest.raises(mt.OptionsError, match="'filter'"):
        parse_filter_text("id ~ 3")
    assert parse_filter_text(" dt>='2024-05-01' ") == ("dt", ">=", "2024-05-01")


def test_storage_options_are_parsed_in_one_place() -> None:
    opts = {"path": "s3://b/t", "storage.key": "k", "storage.anon": "false", "storage-options": '{"client_kwargs": {}}'}
    assert storage_options(opts) == {"key": "k", "anon": False, "client_kwargs": {}}
    assert storage_options({"path": "/t"}) is None
    assert storage_pairs(["endpoint_url=http://127.0.0.1:1", "anon=TRUE", 'client_kwargs={"a": 1}']) == {
        "endpoint_url": "http://127.0.0.1:1",
        "anon": True,
        "client_kwargs": {"a": 1},
    }
    assert storage_pairs([]) is None
    with pytest.raises(mt.OptionsError, match="key=value"):
        storage_pairs(["no-equals-sign"])
    with pytest.raises(mt.OptionsError, match="storage-options"):
        storage_options({"storage-options": "[1"})


def test_python_time_travel_takes_iso_strings_datetimes_and_versions(table_uri: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False)])
    t = mt.create_table(table_uri, schema, ["id"])
    s1 = t.write(pa.table({"id": [1]}, schema=schema)).snapshot
    time.sleep(0.01)
    s2 = t.write(pa.table({"id": [2]}, schema=schema)).snapshot
    assert s1 is not None and s2 is not None
    at1 = datetime.datetime.fromtimestamp(s1.time_millis / 1000, datetime.UTC)
    for when in (s1.time_millis, at1, at1.isoformat(), at1.astimezone().replace(tzinfo=None).isoformat(" ")):
        assert t.read(timestamp_ms=when).column("id").to_pylist() == [1], when
    assert t.resolve_snapshot(timestamp_ms=at1.isoformat()) == s1
    t.create_tag("first", snapshot_id=1)
    assert t.read(version="first").column("id").to_pylist() == [1]
    assert t.read(version=1).column("id").to_pylist() == [1]
    assert sorted(t.scan(version="2").read_all().column("id").to_pylist()) == [1, 2]
    with pytest.raises(mt.SnapshotNotFoundError, match="neither a tag nor a snapshot id"):
        t.read(version="nope")
    with pytest.raises(mt.OptionsError, match="timestamp_ms"):
        t.read(timestamp_ms="not a time")
