"""Batch change data: incremental-between with each scan mode, timestamps, the audit log."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])


def create(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2", **options})


def put(t: mt.Table, rows: dict[int, int]) -> None:
    t.write(pa.table({"k": list(rows), "v": list(rows.values())}, schema=SCHEMA))


def changes(table: pa.Table) -> list[tuple[str, int, Any]]:
    return sorted((r["_row_kind"], r["k"], r["v"]) for r in table.to_pylist())


def test_deletes_are_visible_in_incremental_ranges(table_uri: str) -> None:
    t = create(table_uri, **{"write-only": "true"})
    put(t, {1: 10, 2: 20})
    put(t, {3: 30})
    t.delete_keys(pa.table({"k": [1]}))
    # the measured bug: (1,2] and (1,3] were the same although snapshot 3 deleted key 1
    assert changes(t.changelog(1, 2)) == [("+I", 3, 30)]
    assert changes(t.changelog(1, 3)) == [("+I", 3, 30), ("-D", 1, None)]
    assert changes(t.changelog(1, 3, mode="delta")) == changes(t.changelog(1, 3))
    assert changes(t.changelog(1, 3, mode="changelog")) == []  # no producer, no changelog files
    # diff: what turns snapshot 1 into snapshot 3, with the deleted row's last values
    assert changes(t.changelog(1, 3, mode="diff")) == [("+I", 3, 30), ("-D", 1, 10)]
    assert changes(t.changelog(0, 3, mode="diff")) == [("+I", 2, 20), ("+I", 3, 30)]
    assert t.changelog(3, 3, mode="diff").num_rows == 0
    with pytest.raises(mt.OptionsError, match="incremental-between-scan-mode"):
        t.changelog(1, 3, mode="everything")


def test_diff_mode_pairs_updates_and_skips_unchanged_buckets(table_uri: str) -> None:
    t = create(table_uri, bucket="4")
    put(t, {k: k for k in range(20)})
    put(t, {5: 500})
    t.compact(full=True)
    latest = t.latest_snapshot()
    assert latest is not None
    assert changes(t.changelog(1, latest.id, mode="diff")) == [("+U", 5, 500), ("-U", 5, 5)]
    assert t.changelog(2, latest.id, mode="diff").num_rows == 0  # compaction alone changes nothing


def test_auto_mode_reads_the_producers_changelog(table_uri: str) -> None:
    t = create(table_uri, **{"changelog-producer": "lookup"})
    put(t, {1: 10})
    put(t, {1: 11})
    latest = t.latest_snapshot()
    assert latest is not None
    assert changes(t.changelog(2, latest.id)) == [("+U", 1, 11), ("-U", 1, 10)]
    assert changes(t.changelog(2, latest.id, mode="changelog")) == changes(t.changelog(2, latest.id))
    assert changes(t.changelog(2, latest.id, mode="delta")) == [("+I", 1, 11)]  # delta: no before-image


def test_timestamps_give_the_range(table_uri: str) -> None:
    t = create(table_uri, **{"write-only": "true"})
    put(t, {1: 10})
    put(t, {2: 20})
    put(t, {3: 30})
    s1, _, s3 = t.snapshots()
    by_ts = t.changelog(timestamps=(s1.time_millis, s3.time_millis))
    assert changes(by_ts) == changes(t.changelog(1, 3))
    assert changes(t.changelog(timestamps=(0, s1.time_millis))) == [("+I", 1, 10)]
    with pytest.raises(mt.MergeTableError, match="not both"):
        t.changelog(0, 1, timestamps=(0, 1))


def test_audit_log_has_paimons_rowkind_first(table_uri: str) -> None:
    t = create(table_uri)
    put(t, {1: 10, 2: 20})
    t.delete_keys(pa.table({"k": [2]}))
    log = t.audit_log()
    assert log.column_names == ["rowkind", "k", "v"]
    assert log.to_pylist() == [{"rowkind": "+I", "k": 1, "v": 10}]
    assert t.audit_log(snapshot_id=1).num_rows == 2
    ranged = t.audit_log(incremental_between=(1, 2))
    assert ranged.to_pylist() == [{"rowkind": "-D", "k": 2, "v": None}]
