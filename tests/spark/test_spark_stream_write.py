"""Streaming writes into mergetable: exactly once across replays and driver crashes, CDC sinks, foreachBatch."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

import mergetable as mt
import mergetable.spark as mts
from mergetable.spark.sink import stream_commit_user

HERE = Path(__file__).parent
SCHEMA = "id long, v long"
SUM_OPTIONS = {"primary-key": "id", "bucket": "2", "merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}


def _batch_file(folder: Path, n: int, ids: list[int], v: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array([v] * len(ids), pa.int64())})
    pq.write_table(table, folder / f"part-{n:04d}.parquet")
    os.utime(folder / f"part-{n:04d}.parquet", (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order


def _totals(uri: str) -> dict[int, int]:
    return {r["id"]: r["v"] for r in mt.open_table(uri).read().to_pylist()}


def _expected(batches: list[tuple[list[int], int]]) -> dict[int, int]:
    out: dict[int, int] = {}
    for ids, v in batches:
        for i in ids:
            out[i] = out.get(i, 0) + v
    return out


def _stream(spark: SparkSession, source: Path, checkpoint: Path, uri: str, **trigger: Any) -> Any:
    df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
    writer = df.writeStream.format("mergetable").options(**SUM_OPTIONS).option("checkpointLocation", str(checkpoint))
    return writer.trigger(**(trigger or {"availableNow": True})).start(uri)


def _drop_commit_log(checkpoint: Path, batch: int) -> None:
    """Forget that ``batch`` was committed, as a driver crash between sink commit and commit log does."""
    (checkpoint / "commits" / str(batch)).unlink()
    crc = checkpoint / "commits" / f".{batch}.crc"
    if crc.exists():
        crc.unlink()


BATCHES = [([1, 2, 3], 1), ([2, 3, 4], 10), ([3, 4, 5], 100)]


def test_stream_sink_commits_each_batch_once_and_resumes(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    for n, (ids, v) in enumerate(BATCHES[:2]):
        _batch_file(source, n, ids, v)
    query = _stream(spark, source, checkpoint, uri)
    query.awaitTermination()
    assert query.exception() is None
    table = mt.open_table(uri)  # created from the options on the first batch
    assert table.primary_key == ("id",) and table.options["merge-engine"] == "aggregation"
    assert _totals(uri) == _expected(BATCHES[:2])
    user = stream_commit_user(str(query.id))
    appends = [s for s in table.snapshots() if s.commit_kind.value == "APPEND"]
    assert [(s.commit_user, s.commit_identifier) for s in appends] == [(user, 0), (user, 1)]
    assert table.txn_version(user) == 1

    # Spark replays batch 1 (the commit log lost it): the sink skips it; then the new file is batch 2
    _drop_commit_log(checkpoint, 1)
    _batch_file(source, 2, *BATCHES[2])
    again = _stream(spark, source, checkpoint, uri)
    again.awaitTermination()
    assert str(again.id) == str(query.id) and again.exception() is None
    assert _totals(uri) == _expected(BATCHES)
    table = mt.open_table(uri)
    assert [s.commit_identifier for s in table.snapshots() if s.commit_kind.value == "APPEND"] == [0, 1, 2]
    assert not list(Path(uri).rglob("_spark_staging/*"))
    live = {f.file_name for _, _, f in table.files()}
    assert {p.name for p in Path(uri).rglob("*.parquet")} == live  # the replay's files were deleted


def test_stream_sink_with_processing_time_trigger(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    _batch_file(source, 0, *BATCHES[0])
    query = _stream(spark, source, checkpoint, uri, processingTime="200 milliseconds")
    try:
        for n, batch in enumerate(BATCHES[1:], start=1):
            _batch_file(source, n, *batch)
        deadline = time.time() + 240
        while not (mt.table_exists(uri) and _totals(uri) == _expected(BATCHES)):
            assert query.isActive and time.time() < deadline, query.exception()
            time.sleep(0.5)
    finally:
        query.stop()
    assert _totals(uri) == _expected(BATCHES)


def test_driver_killed_after_sink_commit_restarts_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri, marker = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t"), tmp_path / "crashed"
    for n, batch in enumerate(BATCHES):
        _batch_file(source, n, *batch)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    driver = [sys.executable, str(HERE / "sink_driver.py"), str(source), str(checkpoint), uri]
    proc = subprocess.Popen([*driver, "1", str(marker)], env=env, start_new_session=True)
    try:
        deadline = time.time() + 300
        while not marker.exists():
            assert proc.poll() is None and time.time() < deadline, "the driver ended before the crash point"
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    # the crash left batch 1 in the table but not in the checkpoint's commit log
    assert _totals(uri) == _expected(BATCHES[:2])
    assert not (checkpoint / "commits" / "1").exists()

    restarted = _stream(spark, source, checkpoint, uri)  # the same query, restarted from its checkpoint
    restarted.awaitTermination()
    assert restarted.exception() is None
    assert _totals(uri) == _expected(BATCHES)  # nothing lost, nothing doubled
    assert [s.commit_identifier for s in mt.open_table(uri).snapshots() if s.commit_kind.value == "APPEND"] == [
        0,
        1,
        2,
    ]


def test_cdc_sink_deletes_and_retracts(spark: SparkSession, tmp_path: Path) -> None:
    source, uri_dedup, uri_sum = tmp_path / "in", str(tmp_path / "dedup"), str(tmp_path / "sum")
    changes = [
        [(1, 10, "+I"), (2, 20, "+I"), (3, 30, "+I")],
        [(2, 20, "-D"), (3, 30, "-U"), (3, 33, "+U"), (4, 40, "+I")],
    ]
    source.mkdir()
    for n, rows in enumerate(changes):
        ids, vs, kinds = zip(*rows, strict=True)
        pq.write_table(
            pa.table({"id": pa.array(ids, pa.int64()), "v": pa.array(vs, pa.int64()), "_row_kind": list(kinds)}),
            source / f"part-{n}.parquet",
        )
        os.utime(source / f"part-{n}.parquet", (1_700_000_000 + n, 1_700_000_000 + n))  # the file source's order
    df = (
        spark.readStream.schema("id long, v long, _row_kind string")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
    )
    for uri, extra in (
        (uri_dedup, {}),
        (uri_sum, {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}),
    ):
        query = (
            df.coalesce(1)
            .writeStream.format("mergetable")
            .option("primary-key", "id")
            .options(**extra)
            .option("checkpointLocation", str(tmp_path / f"ck-{Path(uri).name}"))
            .trigger(availableNow=True)
            .start(uri)
        )
        query.awaitTermination()
        assert query.exception() is None
        assert mt.open_table(uri).schema.names == ["id", "v"]  # _row_kind held the row kinds
    assert _totals(uri_dedup) == {1: 10, 3: 33, 4: 40}
    assert _totals(uri_sum) == {1: 10, 2: 0, 3: 33, 4: 40}  # -D retracted 20 (the row stays), -U retracted 30


def test_foreach_batch_replay_is_applied_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    for n, batch in enumerate(BATCHES[:2]):
        _batch_file(source, n, *batch)
    sink = mts.foreach_batch(uri, "orders-sum", SUM_OPTIONS)

    def run() -> None:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
        q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        q.trigger(availableNow=True).start().awaitTermination()

    run()
    assert _totals(uri) == _expected(BATCHES[:2])
    _drop_commit_log(checkpoint, 1)  # the batch is replayed by the restarted query
    run()
    assert _totals(uri) == _expected(BATCHES[:2])
    assert mt.open_table(uri).txn_version("orders-sum") == 1


def test_batch_write_txn_options(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 5), (2, 5)], SCHEMA)

    def write(version: str, app: str = "nightly") -> None:
        w = df.write.format("mergetable").mode("append").options(**SUM_OPTIONS)
        w.option("txnAppId", app).option("txnVersion", version).save(uri)

    write("3")
    write("3")  # a retried job: skipped
    write("2")  # older: skipped
    assert _totals(uri) == {1: 5, 2: 5}
    write("4")
    mts.write(df, uri, txn_app_id="nightly", txn_version=4)
    assert _totals(uri) == {1: 10, 2: 10}
    assert mt.open_table(uri).txn_version("nightly") == 4


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"txnAppId": "a", "txnVersion": "x"}, "txnVersion"),
        ({"txnAppId": "a"}, "txnVersion"),
        ({"txnVersion": "1"}, "txnAppId"),
    ],
)
def test_bad_txn_options_fail_by_name(spark: SparkSession, tmp_path: Path, options: dict[str, str], named: str) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, 5)], SCHEMA)
    df.write.format("mergetable").mode("append").options(**SUM_OPTIONS).save(uri)
    with pytest.raises(Exception, match=f"option '{named}'"):
        df.write.format("mergetable").mode("append").options(**options).save(uri)
    assert _totals(uri) == {1: 5} and len(mt.open_table(uri).snapshots()) == 1


def test_stream_sink_refuses_complete_mode_and_txn_options(spark: SparkSession, tmp_path: Path) -> None:
    source, uri = tmp_path / "in", str(tmp_path / "t")
    _batch_file(source, 0, *BATCHES[0])
    mt.create_table(uri, pa.schema([("id", pa.int64()), ("n", pa.int64())]), ["id"])
    df = spark.readStream.schema(SCHEMA).parquet(str(source))
    counts = df.groupBy("id").count().withColumnRenamed("count", "n")
    complete = counts.writeStream.format("mergetable").outputMode("complete")
    complete = complete.option("checkpointLocation", str(tmp_path / "ck1")).trigger(availableNow=True).start(uri)
    with pytest.raises(Exception, match="outputMode 'complete'"):
        complete.awaitTermination()
    txn = df.writeStream.format("mergetable").option("txnAppId", "a").option("txnVersion", "1")
    txn = txn.option("checkpointLocation", str(tmp_path / "ck2")).trigger(availableNow=True).start(uri)
    with pytest.raises(Exception, match="option 'txnappid'"):
        txn.awaitTermination()
    assert mt.open_table(uri).snapshots() == []


def test_stream_sink_stages_rows_of_a_postpone_table_until_a_compaction(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64())])
    opts = {"bucket": "-2", "postpone.default-bucket-num": "2", "write-only": "true", "merge-engine": "aggregation"}
    t = mt.create_table(uri, schema, ["id"], options={**opts, "fields.v.aggregate-function": "sum"})
    for n, batch in enumerate(BATCHES[:2]):
        _batch_file(source, n, *batch)

    def run() -> None:
        df = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(str(source))
        query = df.writeStream.format("mergetable").option("checkpointLocation", str(checkpoint))
        started = query.trigger(availableNow=True).start(uri)
        started.awaitTermination()
        assert started.exception() is None

    def staged_rows() -> int:
        return sum(f.row_count for _, bucket, f in mt.open_table(uri).files() if bucket == -2)

    run()
    t = mt.open_table(uri)
    assert t.read().num_rows == 0 and t.count() == 0  # a stream's rows are postponed ...
    assert {bucket for _, bucket, _ in t.files()} == {-2} and staged_rows() == 6
    assert spark.read.format("mergetable").load(uri).count() == 0 and mts.read(spark, uri).count() == 0
    t.compact()  # ... until a compaction gives them buckets
    assert _totals(uri) == _expected(BATCHES[:2])
    spark_rows = {r.id: r.v for r in spark.read.format("mergetable").load(uri).collect()}
    assert spark_rows == {r.id: r.v for r in mts.read(spark, uri).collect()} == _expected(BATCHES[:2])
    assert {bucket for _, bucket, _ in t.files()} == {0, 1} and staged_rows() == 0

    _drop_commit_log(checkpoint, 1)  # batch 1 replayed by the restarted query: skipped
    _batch_file(source, 2, *BATCHES[2])
    run()
    assert _totals(uri) == _expected(BATCHES[:2]) and staged_rows() == 3  # only batch 2 staged
    assert {r.id: r.v for r in mts.read(spark, uri).collect()} == _expected(BATCHES[:2])  # not the staged rows
    mt.open_table(uri).compact()
    assert _totals(uri) == _expected(BATCHES)  # each batch exactly once
    appends = [s.commit_identifier for s in mt.open_table(uri).snapshots() if s.commit_kind.value == "APPEND"]
    assert appends == [0, 1, 2]
