"""The order of a key's updates is the order of their commits, whichever snapshot each writer started on."""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.metadata.models import CommitMessage

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])
V1_TABLE = Path(__file__).parent / "data" / "v1-table"


def rows(keys: list[int], v: str) -> pa.Table:
    return pa.table({"k": keys, "v": [v] * len(keys)}, schema=SCHEMA)


def state(t: mt.Table, snapshot_id: int | None = None) -> dict[int, str]:
    return {r["k"]: r["v"] for r in t.read(snapshot_id=snapshot_id).to_pylist()}


def make(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2", **options})


def written(t: mt.Table, data: pa.Table) -> list[CommitMessage]:
    w = t.new_writer()
    w.write(data)
    return w.prepare_commit()


def test_two_writers_from_one_base_snapshot_apply_in_commit_order(tmp_path: Path) -> None:
    rnd = random.Random(5)
    for trial in range(40):
        t = make(str(tmp_path / f"t{trial}"))
        t.write(rows(list(range(10)), "base"))
        keys_a = rnd.sample(range(10), 6)
        keys_b = rnd.sample(range(10), 6)
        a = written(t, rows(keys_a, "a"))
        b = written(t, rows(keys_b, "b"))
        first, second = (a, b) if rnd.random() < 0.5 else (b, a)
        t.commit(first)
        t.commit(second)
        expected = dict.fromkeys(range(10), "base")
        for _msgs, keys, v in sorted([(a, keys_a, "a"), (b, keys_b, "b")], key=lambda x: x[0] is second):
            expected.update(dict.fromkeys(keys, v))
        assert state(t) == expected, f"trial {trial}"
        t.compact(full=True)
        assert state(t) == expected, f"trial {trial} after compaction"


def test_a_stale_writer_that_commits_last_wins(table_uri: str) -> None:
    t = make(table_uri)
    t.write(rows([1, 2, 3], "base"))
    stale = t.new_writer()  # opened before everything below
    stale.write(rows([1, 2], "stale"))
    for n in range(5):
        t.write(rows([1, 2, 3], f"fresh{n}"))
        t.compact(full=n % 2 == 0)
    t.commit(stale.prepare_commit())
    assert state(t) == {1: "stale", 2: "stale", 3: "fresh4"}
    t.compact(full=True)
    assert state(t) == {1: "stale", 2: "stale", 3: "fresh4"}


def test_one_writer_keeps_input_order_across_flushes(table_uri: str) -> None:
    t = make(table_uri, **{"write-buffer-size": "1kb"})
    w = t.new_writer()
    for n in range(30):  # the tiny buffer flushes many level-0 files within one commit
        w.write(rows(list(range(20)), f"v{n}"))
    t.commit(w.prepare_commit())
    assert state(t) == dict.fromkeys(range(20), "v29")


def test_messages_of_one_bucket_in_one_commit_get_disjoint_ranges(table_uri: str) -> None:
    t = make(table_uri, bucket="1")
    t.write(rows([1], "base"))
    parts = [written(t, rows([1, 2], f"task{i}")) for i in range(3)]  # like three Spark tasks
    snap = t.commit([m for p in parts for m in p])
    assert snap is not None
    files = sorted((f for _, _, f in t.files() if f.level == 0), key=lambda f: f.min_sequence_number)
    ranges = [(f.min_sequence_number, f.max_sequence_number) for f in files]
    assert all(a[1] < b[0] for a, b in itertools.pairwise(ranges)), ranges
    assert state(t) == {1: "task2", 2: "task2"}  # message order within the commit
    assert snap.next_sequence_number == ranges[-1][1] + 1


def test_sequence_numbers_in_manifests_are_the_committed_ones(table_uri: str) -> None:
    t = make(table_uri, bucket="1")
    a, b = written(t, rows([1, 2], "a")), written(t, rows([3], "b"))
    assert [f.min_sequence_number for m in (*a, *b) for f in m.new_files] == [0, 0]  # writer-local
    t.commit(b)
    t.commit(a)
    files = {f.min_key[0]: f for _, _, f in t.files()}
    assert (files[3].min_sequence_number, files[3].max_sequence_number, files[3].sequence_offset) == (0, 0, None)
    # a writer's file stores one number for all its records (one per key): keys 1 and 2 share 1
    assert (files[1].min_sequence_number, files[1].max_sequence_number, files[1].sequence_offset) == (1, 1, 1)
    t.compact(full=True)  # compaction writes the effective numbers
    [(_, _, top)] = t.files()
    assert (top.min_sequence_number, top.max_sequence_number, top.sequence_offset) == (0, 1, None)
    stored = pq.read_table(t.path_factory.data_file((), 0, top.file_name), columns=["k", "_SEQUENCE_NUMBER"])
    assert stored.to_pydict() == {"k": [1, 2, 3], "_SEQUENCE_NUMBER": [1, 1, 0]}


def test_next_sequence_number_never_decreases(table_uri: str) -> None:
    t = make(table_uri, bucket="1")
    t.write(rows([1, 2], "a"))
    t.delete_keys(pa.table({"k": [1, 2]}))  # the newest numbers belong to retracts that a full compaction drops
    before = t.latest_snapshot()
    t.compact(full=True)
    after = t.latest_snapshot()
    assert before is not None and after is not None and after.id == before.id + 1
    assert t.files() == []
    assert after.next_sequence_number == before.next_sequence_number == 2  # one number per commit's file
    t.write(rows([1], "b"))
    [(_, _, f)] = t.files()
    assert f.min_sequence_number == 2
    assert state(t, before.id - 1) == {1: "a", 2: "a"}
    assert t.read().to_pylist() == [{"k": 1, "v": "b"}]
    # an incremental read is every APPEND commit's records unmerged (retracts and COMPACT commits left out)
    latest = t.latest_snapshot().id  # type: ignore[union-attr]
    assert t.read(incremental_between=(before.id - 1, latest)).to_pylist() == [{"k": 1, "v": "b"}]


def test_tables_of_format_version_1_read_the_same_and_continue(tmp_path: Path) -> None:
    uri = str(tmp_path / "v1")
    shutil.copytree(V1_TABLE, uri)
    t = mt.open_table(uri)
    latest = t.latest_snapshot()
    assert latest is not None and latest.version == 1 and latest.next_sequence_number is None
    # three writers started from one snapshot: ties that only file age breaks, identically for every read
    expected = {1: "b", 2: "a", 3: "c", 4: "c"}
    assert state(t) == expected
    t.compact()
    assert state(t) == expected
    t.write(rows([2, 5], "new"))  # numbered above every live number of the old table
    snap = t.latest_snapshot()
    assert snap is not None and snap.version == 2 and snap.next_sequence_number == 8  # 7 for both rows' file
    t.compact(full=True)
    assert state(t) == {**expected, 2: "new", 5: "new"}
    assert state(t, 4) == expected


def test_documents_of_a_newer_format_version_are_refused(table_uri: str) -> None:
    t = make(table_uri)
    t.write(rows([1], "a"))
    path = Path(table_uri) / "snapshot" / "snapshot-1"
    doc = json.loads(path.read_text())
    path.write_text(json.dumps({**doc, "version": 3}))
    with pytest.raises(mt.UnsupportedError, match="format version 3"):
        mt.open_table(table_uri).read()
    schema = Path(table_uri) / "schema" / "schema-0"
    schema.write_text(json.dumps({**json.loads(schema.read_text()), "version": 3}))
    with pytest.raises(mt.UnsupportedError, match="schema-0: format version 3"):
        mt.open_table(table_uri)
