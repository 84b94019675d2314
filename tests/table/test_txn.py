"""Idempotent writes: ``Table.write(..., txn_app_id=, txn_version=)`` commits each application version once."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.commit.txn import txn_versions
from mergetable.core.errors import AlreadyCommittedError, OptionsError
from mergetable.core.txn import make_txn

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.int64())])
SUM = {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum", "bucket": "1"}


def _sum_table(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["id"], options={**SUM, **options})


def _rows(v: int, ids: tuple[int, ...] = (1, 2)) -> pa.Table:
    return pa.table({"id": list(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _totals(t: mt.Table) -> dict[int, int]:
    rows = t.read().to_pylist()
    return {r["id"]: r["v"] for r in rows}


def _data_files(uri: str) -> set[str]:
    return {p.name for p in Path(uri).rglob("*.parquet")}


def test_replayed_version_is_applied_once(table_uri: str, caplog: pytest.LogCaptureFixture) -> None:
    t = _sum_table(table_uri)
    first = t.write(_rows(5), txn_app_id="etl", txn_version=0)
    assert first is not None and first.properties == {"txn.etl": "0"}
    files = _data_files(table_uri)
    assert t.write(_rows(5), txn_app_id="etl", txn_version=0).snapshot is None
    assert "already committed" in caplog.text and "'etl'" in caplog.text
    assert _data_files(table_uri) == files  # the skipped write's files were deleted
    assert t.write(_rows(7), txn_app_id="etl", txn_version=1).snapshot is not None
    assert t.write(_rows(100), txn_app_id="etl", txn_version=0).snapshot is None  # older than the last committed
    assert _totals(t) == {1: 12, 2: 12}
    assert t.txn_version("etl") == 1 and t.txn_version("other") is None
    assert [s.commit_kind.value for s in t.snapshots()] == ["APPEND", "APPEND"]


def test_commit_raises_typed_error_and_keeps_table(table_uri: str) -> None:
    t = _sum_table(table_uri)
    t.write(_rows(1), txn_app_id="a", txn_version=3)
    w = t.new_writer()
    w.write(_rows(9))
    messages = w.prepare_commit()
    with pytest.raises(AlreadyCommittedError) as info:
        t.commit(messages, txn=make_txn("a", 2))
    assert (info.value.app_id, info.value.version, info.value.committed) == ("a", 2, 3)
    assert len(t.snapshots()) == 1 and _totals(t) == {1: 1, 2: 1}


def test_versions_are_carried_forward_through_other_commits_and_expiration(table_uri: str) -> None:
    t = _sum_table(
        table_uri, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2", "write-only": "true"}
    )
    t.write(_rows(1), txn_app_id="a", txn_version=10)
    t.write(_rows(1), txn_app_id="b", txn_version=4)
    for i in range(4):
        t.write(_rows(1, (10 + i,)))  # writers without a transaction
    t.compact(full=True)  # the compaction job expires snapshots (a write-only writer does not), as Paimon's
    t.expire_snapshots()
    assert {1, 2}.isdisjoint(s.id for s in t.snapshots())
    assert txn_versions(t.latest_snapshot()) == {"a": 10, "b": 4}
    assert t.write(_rows(50), txn_app_id="a", txn_version=10).snapshot is None
    assert t.write(_rows(50), txn_app_id="b", txn_version=3).snapshot is None
    assert _totals(t)[1] == 2


@pytest.mark.parametrize(
    ("app", "version", "option"),
    [("a", "x", "txn_version"), ("a", -1, "txn_version"), ("a", None, "txn_version"), (None, 1, "txn_app_id")],
)
def test_bad_transaction_arguments_name_the_argument(
    table_uri: str, app: str | None, version: object, option: str
) -> None:
    t = _sum_table(table_uri)
    t.write(_rows(1))
    with pytest.raises(OptionsError) as info:
        t.write(_rows(1), txn_app_id=app, txn_version=version)  # type: ignore[arg-type]
    assert info.value.option == option
    assert len(t.snapshots()) == 1 and _totals(t) == {1: 1, 2: 1}


def _race(uri: str, version: int, barrier: object) -> None:
    t = mt.open_table(uri)
    barrier.wait()  # type: ignore[attr-defined]
    t.write(_rows(1), txn_app_id="racer", txn_version=version)


@pytest.mark.slow
def test_racing_processes_commit_a_version_once(table_uri: str) -> None:
    _sum_table(table_uri, **{"commit.max-retries": "100", "commit.max-retry-wait": "100ms"})
    ctx = mp.get_context("spawn")
    for version in range(2):
        barrier = ctx.Barrier(4)
        procs = [ctx.Process(target=_race, args=(table_uri, version, barrier)) for _ in range(4)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
    t = mt.open_table(table_uri)
    assert _totals(t) == {1: 2, 2: 2}
    assert len(t.snapshots()) == 2 and t.txn_version("racer") == 1


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 4), st.integers(1, 9)), max_size=12))
def test_transactions_match_an_oracle(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, int, int]]
) -> None:
    t = _sum_table(str(tmp_path_factory.mktemp("txn") / "t"))
    last: dict[str, int] = {}
    total = 0
    for app, version, v in ops:
        applied = t.write(_rows(v, (1,)), txn_app_id=app, txn_version=version).snapshot is not None
        assert applied == (version > last.get(app, -1))
        if applied:
            last[app] = version
            total += v
    assert txn_versions(t.latest_snapshot()) == last
    assert _totals(t) == ({1: total} if total else {})
