"""Spark Structured Streaming reads of mergetable tables, and change data in Spark batch reads."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession

import mergetable as mt
from mergetable.metadata.models import CommitKind

pytestmark = pytest.mark.spark
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64())])
Rows = list[tuple[str, int, Any]]


def create(uri: str, **options: str) -> mt.Table:
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2", **options})


def put(t: mt.Table, rows: dict[int, int]) -> None:
    t.write(pa.table({"k": list(rows), "v": list(rows.values())}, schema=SCHEMA))


def as_rows(rows: list[Any]) -> Rows:
    return sorted((r["_row_kind"], r["k"], r["v"]) for r in rows)


def stream(spark: SparkSession, uri: str, checkpoint: Path, **options: str) -> list[tuple[int, Rows]]:
    """Run an availableNow query; the (batch id, rows) of every micro-batch."""
    got: list[tuple[int, Rows]] = []

    def collect(df: DataFrame, batch_id: int) -> None:
        got.append((batch_id, as_rows([r.asDict() for r in df.collect()])))

    reader = spark.readStream.format("mergetable").option("read.changelog", "true").options(**options)
    query = (
        reader.load(uri)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    return got


def follower(t: mt.Table, **options: str) -> list[Rows]:
    return [as_rows(b.data.to_pylist()) for b in t.follow(options, stop_when_idle=True)]


@pytest.fixture
def history(tmp_path: Path) -> mt.Table:
    """1 = {1:10, 2:20}; 2 = {1:11}; 3 = compaction; 4 = delete 2; 5 = {3:30}."""
    t = create(str(tmp_path / "t"), **{"write-only": "true"})
    put(t, {1: 10, 2: 20})
    put(t, {1: 11})
    t.compact(full=True)
    t.delete_keys(pa.table({"k": [2]}))
    put(t, {3: 30})
    return t


# each query costs seconds: the modes themselves are covered by the follower tests (same planning code)
MODES = [
    {},
    {"scan.mode": "from-snapshot-full", "startingVersion": "2", "max-snapshots-per-trigger": "1"},
    {"scan.snapshot-id": "1", "read.stream.maxFilesPerTrigger": "1"},
]


def test_every_scan_mode_matches_the_python_follower(spark: SparkSession, history: mt.Table, tmp_path: Path) -> None:
    for i, options in enumerate(MODES):
        expected = [b for b in follower(history, **options) if b]
        got = [rows for _, rows in stream(spark, history.uri, tmp_path / f"ck{i}", **options) if rows]
        assert got == expected, options
    s4 = history.snapshot(4)
    by_time = stream(spark, history.uri, tmp_path / "ts", **{"scan.timestamp-millis": str(s4.time_millis)})
    assert [rows for _, rows in by_time] == [[("+I", 3, 30), ("-D", 2, None)]]


def test_lookup_stream_replays_every_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    source = create(str(tmp_path / "src"), **{"changelog-producer": "lookup"})
    put(source, {1: 1, 2: 2})
    put(source, {1: 10, 3: 3})
    source.delete_keys(pa.table({"k": [2]}))
    put(source, {2: 22})
    batches = stream(spark, source.uri, tmp_path / "ck", **{"scan.snapshot-id": "1", "max-snapshots-per-trigger": "1"})
    assert [b for b, _ in batches] == list(range(len(source.snapshots())))  # one batch per snapshot
    target = create(str(tmp_path / "dst"))
    for batch_id, rows in batches:
        if rows:
            data = pa.table({"k": [r[1] for r in rows], "v": [r[2] for r in rows]}, schema=SCHEMA)
            order = sorted(range(len(rows)), key=lambda i: rows[i][0] != "-U")  # retract before upsert
            target.write(data.take(order), row_kind=[rows[i][0] for i in order])
        snap = source.snapshot(batch_id + 1)
        if all(f.level > 0 for _, _, f in source.files(snap.id)):
            assert target.read().sort_by("k") == source.read(snapshot_id=snap.id).sort_by("k")
    assert target.read().sort_by("k") == source.read().sort_by("k")


def test_processing_time_stream_with_concurrent_writers_and_a_compactor(spark: SparkSession, tmp_path: Path) -> None:
    source = create(str(tmp_path / "src"), **{"changelog-producer": "input", "write-only": "true"})
    put(source, {0: 0})
    got: list[tuple[int, list[dict[str, Any]]]] = []
    reader = spark.readStream.format("mergetable").options(**{"consumer-id": "mirror", "scan.mode": "latest-full"})
    query = (
        reader.load(source.uri)
        .writeStream.foreachBatch(lambda df, b: got.append((b, [r.asDict() for r in df.collect()])))
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="300 milliseconds")
        .start()
    )
    stop = threading.Event()
    errors: list[BaseException] = []

    def compactor() -> None:
        while not stop.is_set():
            try:
                mt.open_table(source.uri).compact()
            except mt.CommitConflictError:
                pass
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)
            time.sleep(0.05)

    def writer() -> None:
        t = mt.open_table(source.uri)
        for i in range(12):
            put(t, {i % 5: i, 10 + i: i})
            if i % 4 == 3:
                t.delete_keys(pa.table({"k": [10 + i - 1]}))

    threads = [threading.Thread(target=compactor), threading.Thread(target=writer)]
    for th in threads:
        th.start()
    threads[1].join()
    stop.set()
    threads[0].join()
    query.processAllAvailable()
    query.stop()
    assert not errors
    target = create(str(tmp_path / "dst"))
    for _, rows in sorted(got, key=lambda b: b[0]):
        if rows:
            data = pa.table({"k": [r["k"] for r in rows], "v": [r["v"] for r in rows]}, schema=SCHEMA)
            target.write(data, row_kind=[r["_row_kind"] for r in rows])
    assert target.read().sort_by("k") == source.read().sort_by("k")
    latest = source.latest_snapshot()
    assert latest is not None and source.consumers() == {"mirror": latest.id + 1}  # recorded as batches finish
    assert any(s.commit_kind is CommitKind.COMPACT for s in source.snapshots())


def test_a_consumer_resumes_a_query_without_its_checkpoint(
    spark: SparkSession, history: mt.Table, tmp_path: Path
) -> None:
    first = stream(spark, history.uri, tmp_path / "a", **{"consumer-id": "job", "scan.snapshot-id": "5"})
    assert [rows for _, rows in first] == [[("+I", 3, 30)]]
    assert history.consumers() == {"job": 6}
    put(history, {4: 40})
    second = stream(spark, history.uri, tmp_path / "b", **{"consumer-id": "job", "scan.snapshot-id": "1"})
    assert [rows for _, rows in second] == [[("+I", 4, 40)]]  # the consumer's progress wins over scan options


def test_a_consumer_protects_the_stream_from_its_first_batch_on(
    spark: SparkSession, history: mt.Table, tmp_path: Path
) -> None:
    """An expiration that runs while batch 0 (a full read) is in flight keeps what the stream reads next."""
    seen: list[dict[str, int]] = []

    def expire_during_batch_0(df: DataFrame, batch_id: int) -> None:
        df.collect()
        if batch_id == 0:
            seen.append(history.consumers())
            put(history, {6: 60})
            put(history, {7: 70})
            aggressive = mt.open_table(history.uri)
            aggressive.table_schema = history.table_schema.with_options(
                {"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"}
            )
            time.sleep(0.01)
            aggressive.expire_snapshots()

    def run(on_batch: Any) -> None:
        reader = spark.readStream.format("mergetable").options(
            **{"read.changelog": "true", "consumer-id": "job", "scan.mode": "latest-full"}
        )
        query = (
            reader.load(history.uri)
            .writeStream.foreachBatch(on_batch)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    run(expire_during_batch_0)
    assert seen == [{"job": 5}]  # held from the moment the stream planned batch 0
    assert history.snapshots()[0].id == 5 and history.consumers() == {"job": 6}
    got: list[Rows] = []
    run(lambda df, _: got.append(as_rows([r.asDict() for r in df.collect()])))  # the restart reads 6 and 7
    assert got == [[("+I", 6, 60), ("+I", 7, 70)]]


def test_a_checkpoint_of_a_table_recreated_at_its_path_fails_the_query(
    spark: SparkSession, history: mt.Table, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "ck"
    first = stream(spark, history.uri, checkpoint, **{"scan.mode": "latest-full"})
    assert [rows for _, rows in first] == [[("+I", 1, 11), ("+I", 3, 30)]]
    shutil.rmtree(history.uri)  # another table at the same path, with as many snapshots and more
    again = create(history.uri)
    for i in range(7):
        put(again, {100 + i: i})
    with pytest.raises(StreamingQueryException, match="re-created since the checkpoint") as err:
        stream(spark, history.uri, checkpoint, **{"scan.mode": "latest-full"})
    assert "TableRecreatedError" in str(err.value) and "new checkpoint location" in str(err.value)
    fresh = stream(spark, history.uri, tmp_path / "new-ck", **{"scan.mode": "latest-full"})
    assert [rows for _, rows in fresh] == [[("+I", 100 + i, i) for i in range(7)]]  # how to start over


def test_bad_stream_options_fail_naming_the_option(spark: SparkSession, history: mt.Table, tmp_path: Path) -> None:
    before = [s.id for s in history.snapshots()]
    bad = [
        ({"scan.mode": "earliest"}, "scan.mode"),
    ]
    for i, (options, name) in enumerate(bad):
        with pytest.raises(Exception, match=name):
            stream(spark, history.uri, tmp_path / f"bad{i}", **options)
    assert [s.id for s in history.snapshots()] == before and history.consumers() == {}


def after_images(spark: SparkSession, uri: str, checkpoint: Path, **options: str) -> list[list[tuple[int, Any]]]:
    """The rows of every non-empty micro-batch of an availableNow query in the table's own schema."""
    got: list[list[tuple[int, Any]]] = []
    columns: list[list[str]] = []

    def collect(df: DataFrame, _: int) -> None:
        columns.append(df.columns)
        if rows := sorted((r.k, r.v) for r in df.collect()):
            got.append(rows)

    reader = spark.readStream.format("mergetable").options(**options).load(uri)
    assert reader.schema == spark.read.format("mergetable").load(uri).schema  # the batch schema
    query = reader.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    query.trigger(availableNow=True).start().awaitTermination(120)
    assert all(c == ["k", "v"] for c in columns)
    return got


def test_a_bare_stream_reads_the_table_then_after_images(
    spark: SparkSession, history: mt.Table, tmp_path: Path
) -> None:
    checkpoint = tmp_path / "bare"
    assert after_images(spark, history.uri, checkpoint) == [[(1, 11), (3, 30)]]  # the latest snapshot
    history.delete_keys(pa.table({"k": [1]}))
    put(history, {3: 33, 5: 50})
    assert after_images(spark, history.uri, checkpoint) == [[(3, 33), (5, 50)]]  # no row for the delete of 1
    # from snapshot 1, without read.changelog: every commit's +I/+U rows; the delete of 2 (snapshot 4) is dropped
    one = {"scan.snapshot-id": "1", "max-snapshots-per-trigger": "1"}
    changes = after_images(spark, history.uri, tmp_path / "s1", **{"read.changelog": "false", **one})
    assert changes == [[(1, 10), (2, 20)], [(1, 11)], [(3, 30)], [(3, 33), (5, 50)]]
    kinds = stream(spark, history.uri, tmp_path / "kinds", **{**one, "scan.snapshot-id": "6"})  # read.changelog
    assert [rows for _, rows in kinds] == [[("-D", 1, None)], [("+I", 3, 33), ("+I", 5, 50)]]


def test_batch_change_data_in_spark(spark: SparkSession, history: mt.Table) -> None:
    def read(**options: str) -> Rows:
        return as_rows(
            [r.asDict() for r in spark.read.format("mergetable").options(**options).load(history.uri).collect()]
        )

    assert read(**{"incremental-between": "1,2"}) == [("+I", 1, 11)]
    assert read(**{"incremental-between": "1,4"}) == [("+I", 1, 11), ("-D", 2, None)]  # the delete is visible
    assert read(readChangeFeed="true", **{"incremental-between": "1,4"}) == read(**{"incremental-between": "1,4"})
    with pytest.raises(Exception, match="readchangefeed"):
        read(readChangeFeed="maybe", **{"incremental-between": "1,4"})
    assert read(**{"incremental-between": "1,4", "incremental-between-scan-mode": "diff"}) == [
        ("+U", 1, 11),
        ("-D", 2, 20),
        ("-U", 1, 10),
    ]
    s = history.snapshots()
    stamps = f"{s[0].time_millis},{s[3].time_millis}"
    assert read(**{"incremental-between-timestamp": stamps}) == read(**{"incremental-between": "1,4"})
    audit = spark.read.format("mergetable").load(history.uri + "$audit_log")
    assert audit.columns == ["rowkind", "k", "v"]
    assert sorted(map(tuple, audit.collect())) == [("+I", 1, 11), ("+I", 3, 30)]
    with pytest.raises(Exception, match="incremental-between-scan-mode"):
        read(**{"incremental-between": "1,4", "incremental-between-scan-mode": "all"})


def test_a_killed_driver_restarts_from_its_checkpoint_without_loss_or_duplicates(tmp_path: Path) -> None:
    source = create(str(tmp_path / "src"), **{"changelog-producer": "lookup"})
    for i in range(3):
        put(source, {i: i, i + 1: 10 * i})
    source.delete_keys(pa.table({"k": [0]}))
    latest = source.latest_snapshot()
    assert latest is not None
    out, checkpoint = tmp_path / "out", str(tmp_path / "ck")
    driver = [sys.executable, str(Path(__file__).with_name("stream_driver.py")), source.uri, checkpoint, str(out)]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.Popen([*driver, "2"], env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while len(list(out.glob("batch-*.json"))) < 2:
            assert proc.poll() is None and time.time() < deadline, "the driver stopped before the kill"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver: Python and its JVM
        proc.wait(60)
    assert not (out / "DONE").exists()
    done = subprocess.run([*driver, "0"], env=env, stderr=subprocess.DEVNULL, timeout=300)
    assert done.returncode == 0 and (out / "DONE").exists()
    ids = sorted(int(p.stem.split("-")[1]) for p in out.glob("batch-*.json"))
    assert ids == list(range(latest.id))  # one batch per snapshot, none missing
    streamed = [r for i in ids for r in json.loads((out / f"batch-{i}.json").read_text())]
    expected = source.changelog(0, latest.id).to_pylist()
    assert as_rows(streamed) == as_rows(expected)  # nothing lost, nothing doubled


def test_a_stream_of_a_postpone_table_sees_staged_rows_once_they_are_moved(spark: SparkSession, tmp_path: Path) -> None:
    t = create(str(tmp_path / "t"), bucket="-2", **{"write-only": "true", "postpone.default-bucket-num": "2"})
    put(t, {1: 10, 2: 20})  # a batch write: fixed buckets, visible at once
    checkpoint = tmp_path / "ck"
    first = [r for _, rows in stream(spark, t.uri, checkpoint) for r in rows]
    assert first == [("+I", 1, 10), ("+I", 2, 20)]
    w = t.new_writer()  # a bare writer: staged
    w.write(pa.table({"k": [2, 3], "v": [21, 30]}, schema=SCHEMA))
    t.commit(w.prepare_commit())
    assert [r for _, rows in stream(spark, t.uri, checkpoint) for r in rows] == []  # staged: nothing yet
    t.compact()
    moved = [r for _, rows in stream(spark, t.uri, checkpoint) for r in rows]
    assert sorted(moved) == [("+I", 2, 21), ("+I", 3, 30)]  # as written, once, when the compaction moves them
    assert [r for _, rows in stream(spark, t.uri, checkpoint) for r in rows] == []
    assert follower(t, **{"scan.snapshot-id": "2"}) == [sorted(moved)]
