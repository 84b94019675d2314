"""WriteTransaction, the one writer lifecycle: commit on success, discard on failure, a precondition hook."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.commit.transaction import TxState
from mergetable.core.errors import ArgumentError
from mergetable.metadata.models import CommitMessage, Snapshot

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _rows(ids: list[int], tag: str = "") -> pa.Table:
    return pa.table({"id": ids, "v": [f"{tag}{i}" for i in ids]})


def _data_files(t: mt.Table) -> set[str]:
    return {p for p, _ in t.fileio.walk_files(t.fileio.root) if p.endswith(".parquet")}


def _table(uri: str, **options: str) -> mt.Table:
    # a one-byte write buffer: every write is flushed to files at once, so a failure has files to delete
    return mt.create_table(uri, SCHEMA, ["id"], options={"bucket": "2", "write-buffer-size": "1", **options})


def test_commits_on_success_as_one_snapshot(table_uri: str) -> None:
    t = _table(table_uri)
    with t.writing(properties={"job": "load"}) as w:
        w.write(_rows([1, 2]))
        w.write(_rows([3, 4]))
    assert w.state is TxState.COMMITTED
    assert w.snapshot is not None and w.snapshot.id == 1 and w.snapshot.properties == {"job": "load"}
    assert t.latest_snapshot_id() == 1
    assert t.read().sort_by("id").to_pydict() == _rows([1, 2, 3, 4]).to_pydict()
    assert _data_files(t) == {t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files()}


def test_an_exception_discards_every_file_and_commits_nothing(table_uri: str) -> None:
    t = _table(table_uri)
    with pytest.raises(RuntimeError, match="boom"), t.writing() as w:
        w.write(_rows([1, 2, 3]))
        prepared = w.prepare()  # flushed and prepared files
        w.write(_rows([4, 5]))  # files written but not prepared yet
        assert prepared and len(_data_files(t)) > len(prepared)
        raise RuntimeError("boom")
    assert w.state is TxState.DISCARDED and w.snapshot is None
    assert _data_files(t) == set()
    assert t.latest_snapshot() is None
    with pytest.raises(mt.SnapshotNotFoundError):
        t.snapshot(1)


def test_a_failing_precondition_leaves_the_table_unchanged(table_uri: str) -> None:
    t = _table(table_uri)
    t.write(_rows([1, 2], "a"))
    before_files, before_rows = _data_files(t), t.read().to_pydict()
    seen: list[tuple[int, int | None]] = []

    def refuse(messages: Sequence[CommitMessage], latest: Snapshot | None) -> None:
        seen.append((len(messages), None if latest is None else latest.id))
        raise mt.CommitConflictError("the rows this write read have changed")

    with pytest.raises(mt.CommitConflictError, match="have changed"), t.writing(precondition=refuse) as w:
        w.write(_rows([2, 3], "b"))
    assert seen == [(2, 1)]  # called once, with the write's messages (two buckets) and the snapshot it builds on
    assert w.state is TxState.DISCARDED
    assert t.latest_snapshot_id() == 1
    assert _data_files(t) == before_files
    assert t.read().to_pydict() == before_rows


def test_a_passing_precondition_commits(table_uri: str) -> None:
    t = _table(table_uri)
    calls: list[int] = []
    with t.writing(precondition=lambda messages, latest: calls.append(len(messages))) as w:
        w.write(_rows([1]))
    assert calls == [1] and w.state is TxState.COMMITTED
    assert t.read().to_pydict() == _rows([1]).to_pydict()


def test_a_failure_after_the_commit_never_discards_it(table_uri: str) -> None:
    t = _table(table_uri)
    with pytest.raises(RuntimeError, match="after"), t.writing() as w:
        w.write(_rows([1, 2]))
        w.commit()
        raise RuntimeError("after the commit")
    assert w.state is TxState.COMMITTED
    assert t.read().to_pydict() == _rows([1, 2]).to_pydict()
    assert _data_files(t)
    with pytest.raises(mt.MergeTableError, match="cannot write: the write transaction is committed"):
        w.write(_rows([3]))
    with pytest.raises(mt.MergeTableError, match="cannot commit: the write transaction is committed"):
        w.commit()


def test_a_failing_after_commit_hook_is_logged_not_raised(table_uri: str, caplog: pytest.LogCaptureFixture) -> None:
    t = _table(table_uri)
    w = t.writing()

    def broken(messages: Sequence[CommitMessage], snapshot: Snapshot) -> None:
        raise OSError("compaction storage down")

    w.after_commit = broken
    w.write(_rows([1]))
    snapshot = w.commit()
    assert snapshot is not None and snapshot.id == 1 and w.state is TxState.COMMITTED
    assert "compaction storage down" in caplog.text
    assert t.read().to_pydict() == _rows([1]).to_pydict()


def test_tasks_hand_off_and_a_driver_commits_or_discards_them(table_uri: str) -> None:
    t = _table(table_uri)
    handed: list[CommitMessage] = []
    for ids in ([1, 2], [3, 4]):  # two "tasks": each writes and hands its messages off
        with t.writing() as task:
            task.write(_rows(ids))
            handed += task.hand_off()
        assert task.state is TxState.HANDED_OFF
    files = _data_files(t)
    with pytest.raises(RuntimeError), t.writing() as task:  # a handed-off task that fails later keeps its files
        task.write(_rows([9]))
        handed_late = task.hand_off()
        raise RuntimeError("after the hand-off")
    assert _data_files(t) > files
    loser = t.writing()  # the driver discards what it does not commit, but the named files
    loser.adopt(handed_late)
    assert loser.discard(keep=()) and _data_files(t) == files
    driver = t.writing(commit_user="job-1", identifier=7)
    driver.adopt(handed)
    snapshot = driver.commit()
    assert snapshot is not None and t.find_commit("job-1", 7) == snapshot
    assert t.read().sort_by("id").to_pydict() == _rows([1, 2, 3, 4]).to_pydict()


def test_nothing_to_write_commits_nothing_but_an_overwrite_does(table_uri: str) -> None:
    t = _table(table_uri)
    t.write(_rows([1]))
    with t.writing() as w:
        w.write(_rows([]))
    assert w.state is TxState.COMMITTED and w.snapshot is None and t.latest_snapshot_id() == 1
    with t.writing(overwrite=True) as w:
        pass
    assert w.snapshot is not None and w.snapshot.id == 2 and t.read().num_rows == 0


def test_a_partition_spec_is_checked_before_any_file_is_written(tmp_path: Path) -> None:
    t = mt.create_table(str(tmp_path), pa.schema([("dt", pa.string()), ("id", pa.int64())]), ["dt", "id"], ["dt"])
    with pytest.raises(mt.SchemaError, match="outside the overwrite spec"), t.writing(overwrite={"dt": "a"}) as w:
        w.write(pa.table({"dt": ["b"], "id": [1]}))
    assert _data_files(t) == set() and t.latest_snapshot() is None
    with pytest.raises(ArgumentError, match="overwrite"):
        t.writing(overwrite="yes")  # type: ignore[arg-type]
