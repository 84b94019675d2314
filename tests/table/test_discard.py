"""discard_uncommitted: the one deleter of unpublished files, as Table.abort, writers and compaction use it."""

from __future__ import annotations

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.discard import discard_uncommitted
from mergetable.metadata.models import CommitMessage

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _written(t: mt.Table, ids: list[int]) -> list[CommitMessage]:
    w = t.new_writer()
    w.write(pa.table({"id": ids, "v": [str(i) for i in ids]}))
    return w.prepare_commit()


def _exists(t: mt.Table, messages: list[CommitMessage]) -> list[bool]:
    pf = t.path_factory
    return [
        t.fileio.exists(pf.data_file(m.partition, m.bucket, f.file_name))
        for m in messages
        for f in (*m.new_files, *m.compact_after)
    ]


def test_keeps_named_files_and_deletes_the_rest(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"], options={"bucket": "2"})
    messages = _written(t, [1, 2, 3, 4])
    names = sorted(f.file_name for m in messages for f in m.new_files)
    assert len(names) == 2
    deleted = discard_uncommitted(t.fileio, t.table_schema, [None, *messages], keep={names[0]})
    assert [p.rsplit("/", 1)[-1] for p in deleted] == names[1:]
    assert sorted(_exists(t, messages)) == [False, True]


def test_protect_latest_keeps_what_was_committed(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"])
    committed = _written(t, [1])
    t.commit(committed)
    lost = _written(t, [2])
    assert discard_uncommitted(t.fileio, t.table_schema, [*committed, *lost], protect_latest=True)
    assert _exists(t, committed) == [True] and _exists(t, lost) == [False]
    assert t.read().to_pydict() == {"id": [1], "v": ["1"]}


def test_upgraded_compaction_inputs_are_never_deleted(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"])
    t.write(pa.table({"id": [1], "v": ["a"]}))
    [(partition, bucket, f)] = t.files()
    upgraded = f.model_copy(update={"level": 5})
    message = CommitMessage(
        partition=partition, bucket=bucket, total_buckets=1, compact_before=(f,), compact_after=(upgraded,)
    )
    assert discard_uncommitted(t.fileio, t.table_schema, [message]) == []
    assert t.read().to_pydict() == {"id": [1], "v": ["a"]}


def test_writer_abort_discards_through_the_commit_tier(table_uri: str) -> None:
    t = mt.create_table(table_uri, SCHEMA, ["id"], options={"write-buffer-size": "1"})
    w = t.new_writer()
    w.write(pa.table({"id": [1, 2], "v": ["a", "b"]}))  # a tiny buffer: flushed to files already
    flushed = {p for p, _ in t.fileio.walk_files(t.fileio.root) if p.endswith(".parquet")}
    assert flushed
    w.abort()
    assert not any(t.fileio.exists(p) for p in flushed)
    with pytest.raises(mt.SnapshotNotFoundError):
        t.snapshot(1)
