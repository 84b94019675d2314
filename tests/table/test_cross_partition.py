"""Cross-partition upsert tables (a primary key without a partition key): each merge engine's rule for a key that
lives in another partition, rows of one key in one write, reads, DML, compaction, changelog, time travel."""

from __future__ import annotations

import datetime
import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import mergetable as mt
from mergetable.core.errors import OptionsError, UnsupportedError
from mergetable.read.key_index import read_key_rows

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
DAY = datetime.date(2024, 1, 1)


def make(tmp_path: Path, **options: str) -> mt.Table:
    return mt.create_table(str(tmp_path / "t"), SCHEMA, ["id"], ["dt"], options=dict(options))


def rows(t: mt.Table, **read: Any) -> list[tuple[Any, ...]]:
    got = t.read(**read).to_pydict()
    return sorted(zip(got["id"], got["dt"], got["v"], strict=True))


def data(ids: list[int], dts: list[str], vs: list[int | None]) -> pa.Table:
    return pa.table({"id": ids, "dt": dts, "v": vs}, schema=SCHEMA)


def live_partitions(t: mt.Table) -> dict[int, set[str]]:
    """Per key, the partitions whose files hold a live (merged) row of it: each partition read on its own."""
    out: dict[int, set[str]] = {}
    for dt in ("a", "b", "c", "z"):
        for k in t.read(filter=[("dt", "=", dt)]).column("id").to_pylist():
            out.setdefault(k, set()).add(dt)
    return out


@pytest.mark.parametrize("bucket", ["3", "-2"])
def test_only_dynamic_bucket_mode_holds_a_cross_partition_table(tmp_path: Path, bucket: str) -> None:
    with pytest.raises(OptionsError, match=r"'bucket'.*dynamic bucket mode"):
        make(tmp_path, bucket=bucket)
    t = make(tmp_path)
    assert t.table_schema.is_cross_partition and t.table_schema.table_options.bucket == -1
    assert not mt.create_table(str(tmp_path / "u"), SCHEMA, ["id", "dt"], ["dt"]).table_schema.is_cross_partition


def test_deduplicate_deletes_the_key_in_its_old_partition(tmp_path: Path) -> None:
    t = make(tmp_path, **{"changelog-producer": "input"})
    t.write(data([1, 2, 3], ["a", "a", "b"], [1, 2, 3]))
    t.write(data([1, 3], ["b", "b"], [10, 30]))
    assert rows(t) == [(1, "b", 10), (2, "a", 2), (3, "b", 30)]
    assert rows(t, filter=[("dt", "=", "a")]) == [(2, "a", 2)]
    assert t.count() == 3 and t.count([("dt", "=", "b")]) == 2
    assert live_partitions(t) == {1: {"b"}, 2: {"a"}, 3: {"b"}}
    changes = t.changelog(1, 2).to_pydict()
    assert sorted(zip(changes["_row_kind"], changes["id"], changes["dt"], strict=True)) == [
        ("+I", 1, "b"),
        ("+I", 3, "b"),
        ("-D", 1, "a"),
    ]
    assert rows(t, snapshot_id=1) == [(1, "a", 1), (2, "a", 2), (3, "b", 3)]


def test_partial_update_and_aggregation_update_the_old_partition(tmp_path: Path) -> None:
    t = make(tmp_path / "p", **{"merge-engine": "partial-update"})
    t.write(data([1, 2], ["a", "a"], [1, 2]))
    t.write(data([1, 3, 3], ["b", "c", "a"], [None, 30, 31]))
    assert rows(t) == [(1, "a", 1), (2, "a", 2), (3, "c", 31)]
    agg = make(tmp_path / "g", **{"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"})
    agg.write(data([1, 2], ["a", "a"], [1, 2]))
    agg.write(data([1, 1, 4, 4], ["b", "c", "c", "b"], [10, 100, 4, 40]))
    assert rows(agg) == [(1, "a", 111), (2, "a", 2), (4, "c", 44)]
    assert live_partitions(agg) == {1: {"a"}, 2: {"a"}, 4: {"c"}}


def test_first_row_keeps_the_old_row(tmp_path: Path) -> None:
    t = make(tmp_path, **{"merge-engine": "first-row"})
    t.write(data([1], ["a"], [1]))
    t.write(data([1, 2, 2, 2], ["b", "c", "b", "c"], [10, 20, 21, 22]))
    assert rows(t) == [(1, "a", 1), (2, "c", 20)]


def test_rows_of_one_key_in_one_write_are_routed_in_order(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(data([1], ["a"], [0]))
    # a -> b -> a -> c -> b, then a retract named in a partition the key is not in, then back to a
    t.write(data([1, 1, 1, 1], ["b", "a", "c", "b"], [1, 2, 3, 4]))
    assert rows(t) == [(1, "b", 4)] and live_partitions(t) == {1: {"b"}}
    t.write(pa.table({"id": [1, 1], "dt": ["z", "a"], "v": [None, 5]}, schema=SCHEMA), row_kind=["-D", "+I"])
    assert rows(t) == [(1, "a", 5)] and live_partitions(t) == {1: {"a"}}
    t.write(data([1], ["c"], [None]), row_kind="-D")  # a delete goes to where the key lives
    assert rows(t) == [] and t.count() == 0


def test_keys_moved_by_one_batch_are_known_to_the_next(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(data([1, 2], ["a", "a"], [1, 2]))
    batches = [data([1], ["b"], [10]).to_batches()[0], data([1, 2], ["c", "b"], [11, 20]).to_batches()[0]]
    t.write(pa.RecordBatchReader.from_batches(SCHEMA, batches))
    assert rows(t) == [(1, "c", 11), (2, "b", 20)] and live_partitions(t) == {1: {"c"}, 2: {"b"}}


def test_compaction_time_travel_and_system_tables(tmp_path: Path) -> None:
    t = make(tmp_path, **{"dynamic-bucket.target-row-num": "2"})
    t.write(data(list(range(6)), ["a"] * 6, list(range(6))))
    t.write(data([0, 1, 5], ["b", "c", "b"], [10, 11, 15]))
    t.compact(full=True, progress=False)
    expected = [(0, "b", 10), (1, "c", 11), (2, "a", 2), (3, "a", 3), (4, "a", 4), (5, "b", 15)]
    assert rows(t) == expected and t.count() == 6
    assert live_partitions(t) == {k: {dt} for k, dt, _ in expected}
    assert rows(t, snapshot_id=1) == [(k, "a", k) for k in range(6)]
    buckets = t.system_table("buckets").to_pydict()
    assert sum(buckets["record_count"]) == 6
    assert t.system_table("table_indexes").num_rows > 0
    t.write(data([2], ["c"], [12]))  # after compaction, the key index still knows where 2 is
    assert (2, "c", 12) in rows(t) and t.count() == 6


def test_dml_moves_a_key_when_an_update_changes_its_partition(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(data([1, 2, 3], ["a", "a", "b"], [1, 2, 3]))
    t.update([("id", "=", 1)], new_values={"dt": "c"})
    assert rows(t) == [(1, "c", 1), (2, "a", 2), (3, "b", 3)] and live_partitions(t)[1] == {"c"}
    t.delete([("id", "=", 3)])
    t.delete_keys({"id": [2]})
    assert rows(t) == [(1, "c", 1)]
    t.merge(data([1, 4], ["a", "a"], [100, 4])).when_matched_update_all().when_not_matched_insert_all().execute()
    assert rows(t) == [(1, "a", 100), (4, "a", 4)] and live_partitions(t) == {1: {"a"}, 4: {"a"}}


def test_writers_that_cannot_route_are_refused(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(data([1], ["a"], [1]))
    with pytest.raises(UnsupportedError, match=r"Table\.write"):
        t.new_writer().write(data([1], ["b"], [2]))
    with pytest.raises(UnsupportedError, match="overwrite"):
        t.write(data([1], ["b"], [2]), overwrite=True)
    whole = make(tmp_path / "w", **{"dynamic-partition-overwrite": "false"})
    whole.write(data([1, 2], ["a", "a"], [1, 2]))
    whole.write(data([1, 1], ["b", "c"], [2, 3]), overwrite=True)
    assert rows(whole) == [(1, "c", 3)]


def test_the_key_index_is_read_once_for_consecutive_writes(tmp_path: Path) -> None:
    t = make(tmp_path)
    reads: list[int] = []
    t.write(data([1], ["a"], [1]))
    index = t.writing().key_index
    assert index is not None
    real = index.read
    index.read = lambda columns, sid: (reads.append(sid), real(columns, sid))[1]
    t.write(data([1, 2], ["b", "b"], [2, 2]))
    t.compact(full=True, progress=False)
    t.write(data([2], ["a"], [3]))
    assert reads == []  # snapshots 1 and 2 came from this table object's writes, 3 only compacted
    other = mt.open_table(str(tmp_path / "t"))
    other.write(data([1], ["c"], [4]))  # another table object: reads the keys itself
    t.write(data([1], ["a"], [5]))
    assert reads == [5] and rows(t) == [(1, "a", 5), (2, "a", 3)]


def test_a_write_routed_before_a_concurrent_commit_is_refused(tmp_path: Path) -> None:
    t = make(tmp_path)
    t.write(data([1, 2], ["b", "a"], [0, 0]))
    t.write(data([1], ["a"], [1]))  # 1 moved b -> a: partition b's HASH index still lists it
    other = mt.open_table(str(tmp_path / "t"))
    in_place = t.writing()
    in_place.write(data([1], ["a"], [2]))  # an update where the key lives: no HASH index changes
    other.write(data([1], ["b"], [3]))  # moved back to b: no HASH index changes either
    with pytest.raises(mt.BucketAssignmentConflictError, match="snapshot 3"):
        in_place.commit()
    deleting = t.writing()
    deleting.write(data([2], ["z"], [None]), row_kind="-D")  # only retracts: commits beside anything
    other.write(data([3], ["c"], [3]))
    deleting.commit()
    moving = t.writing()
    moving.write(data([3], ["a"], [4]))
    other.compact(full=True, progress=False)  # a compaction since the base does not refuse a write
    moving.commit()
    assert rows(t) == [(1, "b", 3), (3, "a", 4)] and live_partitions(t) == {1: {"b"}, 3: {"a"}}


@pytest.mark.parametrize("producer", ["lookup", "full-compaction"])
def test_a_move_is_a_delete_and_an_insert_in_the_produced_changelog(tmp_path: Path, producer: str) -> None:
    t = make(tmp_path, **{"changelog-producer": producer})
    t.write(data([1, 2], ["a", "a"], [1, 2]))
    t.compact(full=True, progress=False)
    first = t.latest_snapshot_id()
    t.write(data([1, 2], ["b", "a"], [10, 20]))
    t.compact(full=True, progress=False)
    changes = t.changelog(first, t.latest_snapshot_id()).to_pydict()
    got = sorted(zip(changes["_row_kind"], changes["id"], changes["dt"], changes["v"], strict=True))
    assert got == [("+I", 1, "b", 10), ("+U", 2, "a", 20), ("-D", 1, "a", 1), ("-U", 2, "a", 2)]


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "first-row"])
def test_composite_keys_and_null_partitions_across_table_objects(tmp_path: Path, engine: str) -> None:
    """Two key columns, two partition columns (nulls included); every other write through a freshly opened table,
    which reads the key index from the table."""
    schema = pa.schema(
        [("k1", pa.string()), ("k2", pa.int32()), ("p1", pa.int64()), ("p2", pa.date32()), ("v", pa.int64())]
    )
    options = {"merge-engine": engine, "dynamic-bucket.target-row-num": "3"}
    t = mt.create_table(str(tmp_path / "t"), schema, ["k1", "k2"], ["p1", "p2"], options=options)
    rnd = random.Random(3)
    oracle: dict[tuple[str, int], tuple[tuple[Any, Any], int]] = {}
    for step in range(12):
        rows = [
            (
                (rnd.choice("xyz"), rnd.randint(0, 4)),
                (rnd.choice([1, 2, None]), rnd.choice([DAY, None])),
                rnd.randint(0, 99),
            )
            for _ in range(rnd.randint(1, 20))
        ]
        t = mt.open_table(str(tmp_path / "t")) if step % 2 else t
        columns = {"k1": [r[0][0] for r in rows], "k2": [r[0][1] for r in rows], "p1": [r[1][0] for r in rows]}
        t.write(pa.table({**columns, "p2": [r[1][1] for r in rows], "v": [r[2] for r in rows]}, schema=schema))
        for key, part, v in rows:
            old = oracle.get(key)
            if old is None or engine == "deduplicate":
                oracle[key] = (part, v)
            elif engine == "partial-update":
                oracle[key] = (old[0], v)
        if step % 5 == 4:
            t.compact(full=True, progress=False)
        got = t.read().to_pylist()
        assert len(got) == len(oracle) == t.count()
        assert {(r["k1"], r["k2"]): ((r["p1"], r["p2"]), r["v"]) for r in got} == oracle


def test_index_ttl_treats_a_key_only_in_older_files_as_new(tmp_path: Path) -> None:
    kept = make(tmp_path / "kept", **{"cross-partition-upsert.index-ttl": "1 h"})
    short = make(tmp_path / "short", **{"cross-partition-upsert.index-ttl": "300 ms"})
    plain = make(tmp_path / "plain")
    for t in (kept, short, plain):
        t.write(data([1], ["a"], [1]))
    time.sleep(0.6)  # the files of key 1 are now older than 300 ms
    for t in (kept, short, plain):
        t.write(data([1], ["b"], [2]))
    assert live_partitions(kept) == live_partitions(plain) == {1: {"b"}}  # within the TTL (or none): it moves
    assert live_partitions(short) == {1: {"a", "b"}}  # left out of the index: written as new, so live twice
    assert rows(short) == [(1, "a", 1), (1, "b", 2)]
    time.sleep(0.6)  # a table with a TTL reads the index for each write: no index kept from the last write
    short.write(data([1], ["c"], [3]))
    assert live_partitions(short) == {1: {"a", "b", "c"}}


def test_index_ttl_leaves_out_a_bucket_only_when_all_its_files_are_older(tmp_path: Path) -> None:
    t = make(tmp_path, **{"cross-partition-upsert.index-ttl": "1 h"})
    t.write(data([1, 2], ["a", "b"], [1, 1]))
    time.sleep(0.01)
    t.write(data([3], ["a"], [1]))  # a newer file in key 1's bucket
    first = max(f.creation_time for s in t.plan(snapshot_id=1) for f in s.files)
    created = {f.creation_time for s in t.plan() for f in s.files}
    later = first + 3_600_000 + 1  # an hour after the first write: only its files are older than the TTL
    assert max(created) > first
    assert sorted(read_key_rows(t, ["id"], 2, now_ms=later)["id"].to_pylist()) == [1, 3]  # Paimon's filter, by bucket
    assert sorted(read_key_rows(t, ["id"], 2, now_ms=max(created))["id"].to_pylist()) == [1, 2, 3]
    assert read_key_rows(t, ["id"], 2, now_ms=max(created) + 3_600_001).num_rows == 0


def test_bootstrap_parallelism_reads_the_same_index(tmp_path: Path) -> None:
    t = make(tmp_path)
    parts = [chr(ord("a") + i % 9) for i in range(200)]
    t.write(data(list(range(200)), parts, list(range(200))))
    t.write(data(list(range(0, 200, 3)), ["z"] * 67, [0] * 67))  # moves a third of the keys
    got = {}
    for n in ("1", "4"):
        t.alter.set_options({"cross-partition-upsert.bootstrap-parallelism": n})
        again = mt.open_table(str(tmp_path / "t"))
        assert again.table_schema.table_options.cross_partition_upsert_bootstrap_parallelism == int(n)
        assert len(again.plan()) > 4
        got[n] = read_key_rows(again, ["id", "dt"], again.latest_snapshot_id() or 0).sort_by("id")
    assert got["1"].equals(got["4"]) and got["1"].num_rows == 200
    assert got["1"].to_pydict() == again.read(["id", "dt"]).sort_by("id").to_pydict()


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("cross-partition-upsert.bootstrap-parallelism", "0"),
        ("cross-partition-upsert.bootstrap-parallelism", "many"),
        ("cross-partition-upsert.index-ttl", "0 s"),
        ("cross-partition-upsert.index-ttl", "soon"),
    ],
)
def test_bad_cross_partition_options_name_the_option(tmp_path: Path, key: str, value: str) -> None:
    with pytest.raises(OptionsError, match=key.replace(".", r"\.")):
        make(tmp_path, **{key: value})
