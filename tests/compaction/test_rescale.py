"""``Table.rescale``: partitions rewritten into another bucket count in one OVERWRITE snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import mergetable as mt
from mergetable.commit.manifests import ManifestIO
from mergetable.compaction.rescale import PartitionRescale, rescale_partition
from mergetable.core.errors import (
    ArgumentError,
    CommitConflictError,
    ImmutableOptionError,
    OptionsError,
    UnsupportedError,
)
from mergetable.metadata.models import CommitKind, CommitMessage, FileKind

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
ORDER = [("dt", "ascending"), ("id", "ascending")]


def _table(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "2", **options})


def _fill(t: mt.Table, rounds: int = 4, deletes: bool = True) -> None:
    for i in range(rounds):
        ids = list(range(i * 7, i * 7 + 40))
        t.write(pa.table({"id": ids, "dt": ["a", "b"] * 20, "v": [i] * 40}, schema=SCHEMA))
    if deletes:
        t.delete_keys(pa.table({"id": [3, 4], "dt": ["b", "a"]}, schema=pa.schema(list(SCHEMA)[:2])))


def _totals(t: mt.Table) -> dict[tuple[str | None, ...], set[int]]:
    out: dict[tuple[str | None, ...], set[int]] = {}
    for e in ManifestIO(t.fileio).live_entries(t.latest_snapshot()):
        out.setdefault(e.partition, set()).add(e.total_buckets)
    return out


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"merge-engine": "partial-update"},
        {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"},
        {"merge-engine": "first-row"},
        {"deletion-vectors.enabled": "true"},
        {"changelog-producer": "lookup"},
    ],
    ids=["deduplicate", "partial-update", "aggregation", "first-row", "deletion-vectors", "lookup"],
)
def test_rescale_keeps_every_read_and_lays_out_new_buckets(tmp_path: Path, options: dict[str, str]) -> None:
    t = _table(str(tmp_path / "t"), **{"write-only": "true", **options})
    _fill(t, deletes="merge-engine" not in options)
    # a deletion-vector table reads level 0 once compacted: the rewrite holds it, as a compaction would
    merged_view = mt.Table(
        t.fileio, t.table_schema.with_options({**t.options, "deletion-vectors.merge-on-read": "true"})
    )
    before = merged_view.read().sort_by(ORDER)
    assert before.num_rows > 0
    old = {f.file_name for _, _, f in t.files()}

    snap = t.rescale(bucket=5)

    assert snap is not None and snap.commit_kind is CommitKind.OVERWRITE
    assert snap.properties == {"mergetable.rescale": "5"}
    assert t.options["bucket"] == "5" and mt.open_table(t.uri).options["bucket"] == "5"
    assert t.read().sort_by(ORDER).equals(before)
    files = t.files()
    assert {b for _, b, _ in files} == set(range(5)) and {f.level for _, _, f in files} == {
        t.table_options.max_levels - 1
    }
    assert not old & {f.file_name for _, _, f in files}
    assert {e.file.file_name for e in t.delta_entries(snap) if e.kind is FileKind.DELETE} == old
    assert _totals(t) == {("a",): {5}, ("b",): {5}}
    for key in (5, 11, 30):  # bucket pruning of a point read follows the new count
        assert (
            t.read(filter=[("id", "=", key)]).to_pylist()
            == before.filter(pa.compute.equal(before["id"], key)).to_pylist()
        )
    t.write(pa.table({"id": [1000], "dt": ["a"], "v": [1]}, schema=SCHEMA))  # writes go on with 5 buckets
    assert merged_view.read(filter=[("id", "=", 1000)]).num_rows == 1 and _totals(t)[("a",)] == {5}
    assert t.rescale(bucket=5) is None


def test_rescale_of_some_partitions_and_the_write_rule(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    _fill(t)
    before = t.read().sort_by(ORDER)

    snap = t.rescale(bucket=3, partitions=[{"dt": "a"}])

    assert snap is not None and t.options["bucket"] == "2"  # not every partition has 3 buckets yet
    assert _totals(t) == {("a",): {3}, ("b",): {2}}
    assert t.read().sort_by(ORDER).equals(before)
    for key in range(0, 60, 3):
        assert (
            t.read(filter=[("id", "=", key)]).sort_by(ORDER).equals(before.filter(pa.compute.equal(before["id"], key)))
        )
    # Paimon's rule: a write of the old count into the rescaled partition fails at its commit, unchanged
    with pytest.raises(CommitConflictError, match=r"new bucket num 2, but the previous bucket num is 3"):
        t.write(pa.table({"id": [1], "dt": ["a"], "v": [9]}, schema=SCHEMA))
    assert t.read().sort_by(ORDER).equals(before)
    t.write(pa.table({"id": [1], "dt": ["b"], "v": [9]}, schema=SCHEMA))  # the other partition is as it was

    snap = t.rescale(bucket=3, partitions=[{"dt": "b"}])  # now every partition has 3: so has the option
    assert snap is not None and t.options["bucket"] == "3" and _totals(t) == {("a",): {3}, ("b",): {3}}
    t.write(pa.table({"id": [1], "dt": ["a"], "v": [9]}, schema=SCHEMA))
    assert t.read(filter=[("id", "=", 1)]).sort_by(ORDER).column("v").to_pylist() == [9, 9]


def test_streams_do_not_see_a_rescale_as_changes(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    _fill(t, 2)
    seen = sum(b.data.num_rows for b in t.follow({"streaming-read-overwrite": "true"}, stop_when_idle=True))
    last = t.latest_snapshot_id()
    t.rescale(bucket=4)
    t.write(pa.table({"id": [500], "dt": ["a"], "v": [5]}, schema=SCHEMA))
    opts = {"streaming-read-overwrite": "true", "scan.snapshot-id": str(last + 1)}
    rows = [r for b in t.follow(opts, stop_when_idle=True) for r in b.data.to_pylist()]
    assert seen > 0 and rows == [{"id": 500, "dt": "a", "v": 5, "_row_kind": "+I"}]


def test_a_concurrent_commit_makes_the_rescale_fail_and_leave_nothing(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    _fill(t, 2)
    before = t.read().sort_by(ORDER)
    latest = t.latest_snapshot_id()
    names = {p.name for p in (tmp_path / "t").rglob("*.parquet")}

    def racing(units: Any) -> list[CommitMessage]:
        messages = [m for u in units for m in rescale_partition(t.fileio, t.table_schema, t.merge_function, u)]
        other = mt.open_table(t.uri)
        other.write(pa.table({"id": [777], "dt": ["a"], "v": [1]}, schema=SCHEMA))  # lands meanwhile
        return messages

    with pytest.raises(CommitConflictError, match="rescale"):
        t.rescale(bucket=4, executor=racing)
    assert t.latest_snapshot_id() == latest + 1 and t.options["bucket"] == "2"
    assert t.read().num_rows == before.num_rows + 1
    left = {p.name for p in (tmp_path / "t").rglob("*.parquet")} - names
    assert left == {f.file_name for _, _, f in t.files()} - names  # only the racing write's file is new


def test_rescale_arguments_and_tables_refused(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    for bad in (0, -1, "3", 2.0, True):
        with pytest.raises(ArgumentError, match="bucket"):
            t.rescale(bucket=bad)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="partitions"):
        t.rescale(bucket=2, partitions={"dt": "a"})  # type: ignore[arg-type]
    events = mt.create_table(str(tmp_path / "e"), SCHEMA)
    with pytest.raises(UnsupportedError, match="append table"):
        events.rescale(bucket=2)
    assert t.rescale(bucket=3) is None and t.options["bucket"] == "3"  # an empty table: only the option


def test_an_empty_partition_vanishes_and_a_unit_is_picklable(tmp_path: Path) -> None:
    import pickle

    t = _table(str(tmp_path / "t"))
    t.write(pa.table({"id": [1, 2], "dt": ["a", "b"], "v": [1, 2]}, schema=SCHEMA))
    t.delete_keys(pa.table({"id": [1], "dt": ["a"]}, schema=pa.schema(list(SCHEMA)[:2])))

    def pickled(units: Any) -> list[CommitMessage]:
        units = pickle.loads(pickle.dumps(units))
        assert all(isinstance(u, PartitionRescale) for u in units)
        return [m for u in units for m in rescale_partition(t.fileio, t.table_schema, t.merge_function, u)]

    t.rescale(bucket=3, executor=pickled)
    assert t.read().to_pylist() == [{"id": 2, "dt": "b", "v": 2}] and set(_totals(t)) == {("b",)}


def test_changing_bucket_with_alter_is_refused_and_says_how(tmp_path: Path) -> None:
    t = _table(str(tmp_path / "t"))
    t.alter.set_options({"bucket": "4"})  # no data yet: allowed
    t.write(pa.table({"id": [1], "dt": ["a"], "v": [1]}, schema=SCHEMA))
    for change in (lambda: t.alter.set_options({"bucket": "8"}), lambda: t.alter.unset_options(["bucket"])):
        with pytest.raises(ImmutableOptionError, match=r"'bucket'.*t\.rescale\(bucket=N\).*INSERT OVERWRITE") as err:
            change()
        assert isinstance(err.value, OptionsError)
    assert mt.open_table(t.uri).options["bucket"] == "4"
    with pytest.raises(ImmutableOptionError, match=r"bucket mode .* chosen when the table is created"):
        t.alter.set_options({"bucket": "-1"})  # fixed to dynamic: not a rescale


@pytest.mark.parametrize(
    ("key", "options", "refusal"),
    [
        (["id", "dt"], {"bucket": "-1"}, r"bucket=-1 \(dynamic buckets"),
        (["id", "dt"], {"bucket": "-2"}, r"bucket=-2 \(postpone buckets"),
        (None, {"bucket": "2", "bucket-key": "id"}, "an append table's buckets are not rescaled in place"),
        (None, {}, "an append table's buckets are not rescaled in place"),
    ],
)
def test_tables_without_a_rescalable_count_say_how_to_change_it(
    tmp_path: Path, key: list[str] | None, options: dict[str, str], refusal: str
) -> None:
    t = mt.create_table(str(tmp_path / "t"), SCHEMA, key, ["dt"], options=options)
    t.write(pa.table({"id": [1, 2], "dt": ["a", "a"], "v": [1, 2]}, schema=SCHEMA))
    how = "create a table with the bucket you want and write this table's rows into it"
    with pytest.raises(UnsupportedError, match=refusal) as refused:
        t.rescale(bucket=4)
    assert how in str(refused.value)
    with pytest.raises(ImmutableOptionError, match=r"'bucket'.*bucket mode") as altered:
        t.alter.set_options({"bucket": "4"})  # the hint is not t.rescale, which would refuse
    assert how in str(altered.value)
    assert mt.open_table(t.uri).options["bucket"] == t.options["bucket"]


def test_many_new_buckets_and_a_small_write_buffer(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    t = mt.create_table(str(tmp_path / "t"), schema, ["id"], options={"bucket": "1", "write-buffer-size": "64kb"})
    t.write(pa.table({"id": list(range(20000)), "v": ["x" * 20] * 20000}, schema=schema))
    t.write(pa.table({"id": list(range(0, 20000, 3)), "v": ["y"] * 6667}, schema=schema))
    before = t.read().sort_by("id")
    t.rescale(bucket=16)  # one source bucket: each new bucket's run is written at the top level directly
    assert t.read().sort_by("id").equals(before) and len({b for _, b, _ in t.files()}) == 16
    t.rescale(bucket=3)  # sixteen sources: runs merged per new bucket
    assert t.read().sort_by("id").equals(before) and {b for _, b, _ in t.files()} == {0, 1, 2}
    assert t.count() == 20000


def test_a_deletion_vector_bucket_rescales_into_sorted_files(tmp_path: Path) -> None:
    # after the first rescale, bucket 1 holds an upper file with keys 0 and 3 (0 marked) and a newer one with 0:
    # read one after the other they are not in key order, and the second rescale must still write sorted files
    t = mt.create_table(
        str(tmp_path / "t"), SCHEMA, ["id", "dt"], ["dt"], options={"bucket": "1", "deletion-vectors.enabled": "true"}
    )
    t.write(pa.table({"id": [0, 3], "dt": ["b", "b"], "v": [1, 2]}, schema=SCHEMA))
    t.rescale(bucket=2)
    t.write(pa.table({"id": [0], "dt": ["b"], "v": [5]}, schema=SCHEMA))
    t.rescale(bucket=1)
    for _, _, f in t.files():
        ids = pq.read_table(f"{tmp_path}/t/dt=b/bucket-0/{f.file_name}", columns=["id"]).column("id").to_pylist()
        assert ids == sorted(ids)
    assert t.read(filter=[("id", "=", 3), ("dt", "=", "b")]).column("v").to_pylist() == [2]
    assert t.read(filter=[("id", "=", 0), ("dt", "=", "b")]).column("v").to_pylist() == [5]
