"""A table's identity: written at creation, kept by schema changes, rollback and restore, and carried by
stream offsets and consumer records, so that a table deleted and re-created at the same path is refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.consumers import ConsumerManager
from mergetable.commit.schemas import table_identity
from mergetable.core.paths import PathFactory
from mergetable.read.stream import ChangeStream, Position

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def create(uri: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2"})


def put(t: mt.Table, rows: dict[int, int]) -> None:
    t.write(pa.table({"k": list(rows), "v": list(rows.values())}, schema=SCHEMA))


def recreate(uri: str, snapshots: int) -> mt.Table:
    """Delete the table at ``uri`` and create another there, with ``snapshots`` commits."""
    shutil.rmtree(uri)
    t = create(uri)
    for i in range(snapshots):
        put(t, {100 + i: i})
    return t


def test_identity_is_written_at_creation_and_kept_by_changes_rollback_and_restore(table_uri: str) -> None:
    t = create(table_uri)
    uuid = t.table_schema.table_uuid
    assert uuid is not None and len(uuid) == 32 and table_identity(t.fileio) == uuid
    put(t, {1: 1})
    put(t, {2: 2})
    t.alter.set_options({"snapshot.num-retained.max": "50"})
    t.alter.set_table_comment("kept")
    assert mt.open_table(table_uri).table_schema.table_uuid == uuid  # carried by the new schema
    t.rollback_to(1)
    t.restore(snapshot_id=1)
    assert table_identity(mt.open_table(table_uri).fileio) == uuid
    assert recreate(table_uri, 0).table_schema.table_uuid not in (None, uuid)


def test_a_table_created_before_identities_gets_a_stable_one(table_uri: str) -> None:
    t = create(table_uri)
    path = PathFactory(t.fileio.root).schema_file(0)
    stored = json.loads(Path(path).read_text())
    del stored["tableUuid"]  # as written before tables had an identity
    Path(path).write_text(json.dumps(stored))
    legacy = mt.open_table(table_uri)
    assert legacy.table_schema.table_uuid is None
    assert table_identity(legacy.fileio) == table_identity(legacy.fileio) == f"created-{stored['timeMillis']}"
    stream = ChangeStream(legacy.fileio, legacy.table_schema, legacy.stream().options)
    assert stream.position(stream.offset(Position(2))) == Position(2)
    assert stream.position({"nextSnapshot": 2, "fullScan": False}) == Position(2)  # an offset of before


def test_a_follower_refuses_a_table_recreated_under_it(table_uri: str) -> None:
    t = create(table_uri)
    put(t, {1: 10, 2: 20})
    follower = t.follow({"scan.mode": "latest-full"}, consumer_id="etl", poll_interval_ms=1)
    assert next(follower).data.num_rows == 2
    recreate(table_uri, 3)
    with pytest.raises(mt.TableRecreatedError, match="re-created since the stream was opened") as err:
        next(follower)
    assert isinstance(err.value, mt.MergeTableError) and table_uri in str(err.value)
    assert "new checkpoint location" in str(err.value) and "consumer 'etl'" in str(err.value)


def test_a_consumer_record_of_another_table_is_refused(table_uri: str, tmp_path: Path) -> None:
    t = create(table_uri)
    put(t, {1: 10})
    put(t, {2: 20})
    assert [b.data.num_rows for b in t.follow(consumer_id="etl", stop_when_idle=True)] == [2]
    record = ConsumerManager(t.fileio).get("etl")
    assert record is not None and record.table_id == t.table_schema.table_uuid and record.next_snapshot == 3
    kept = tmp_path / "consumer"
    shutil.copytree(Path(table_uri) / "consumer", kept)  # the consumer directory outlives the table
    new = recreate(table_uri, 4)
    shutil.copytree(kept, Path(table_uri) / "consumer")
    with pytest.raises(mt.TableRecreatedError, match="record of consumer 'etl'") as err:
        next(new.follow(consumer_id="etl", stop_when_idle=True))
    assert "mergetable consumers" in str(err.value) and "--delete etl" in str(err.value)
    new.delete_consumer("etl")  # how to start over
    assert [b.data.num_rows for b in new.follow(consumer_id="etl", stop_when_idle=True)] == [4]


def test_a_checkpointed_offset_of_another_table_is_refused(table_uri: str) -> None:
    t = create(table_uri)
    put(t, {1: 10})
    old = t.stream()
    offset = json.loads(json.dumps(old.offset(Position(2))))  # as a checkpoint stores it
    new = recreate(table_uri, 2)
    stream = new.stream()
    with pytest.raises(mt.TableRecreatedError, match="checkpoint") as err:
        stream.position(offset)
    assert err.value.expected == t.table_schema.table_uuid and err.value.found == new.table_schema.table_uuid
    with pytest.raises(mt.TableRecreatedError, match="no table is there now"):
        shutil.rmtree(table_uri)
        old.latest(Position(2))
