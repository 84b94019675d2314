"""``mergetable.spark.write`` of an append table with Spark's own Parquet writer (:mod:`mergetable.spark.native_write`),
against the data source's write of the same rows (``native=False``)."""

from __future__ import annotations

import datetime
import decimal
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import mergetable as mt
import mergetable.spark as mts
from mergetable.core.errors import TableRecreatedError
from mergetable.metadata.stats import column_stats
from mergetable.write.input import partitions_of

pytestmark = pytest.mark.spark

TYPES = (
    "b boolean, i8 tinyint, i16 smallint, i32 int, i64 bigint, f32 float, f64 double, s string, bin binary, "
    "d date, dec decimal(10,2), wide decimal(30,5), ts timestamp"
)
LONG = "x" * 5000  # longer than what Parquet footers keep statistics of


def _rows(n: int) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for i in range(n):
        if i % 7 == 3:
            out.append((None,) * 13)
            continue
        out.append(
            (
                i % 2 == 0,
                i % 100 - 50,
                i * 3 - 200,
                i * 1000,
                i * 10**12,
                float("nan") if i == 5 else i / 4,
                -0.0 if i == 4 else (float("nan") if i == 11 else i * 1.5),
                LONG if i == 8 else f"s{i:04d}-é",
                bytes([i % 256, 255]),
                datetime.date(2024, 1, 1) + datetime.timedelta(days=i),
                decimal.Decimal(i) / 4,
                decimal.Decimal(i) * 10**15,
                datetime.datetime(2024, 5, 1, 12, 30, tzinfo=datetime.UTC) + datetime.timedelta(seconds=i),
            )
        )
    return out


def _frame(spark: SparkSession, n: int = 60) -> DataFrame:
    return spark.createDataFrame(_rows(n), TYPES).repartition(3)


def _spark_files(uri: str) -> list[str]:
    t = mt.open_table(uri)
    return [t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files()]


def _written_by_spark(uri: str) -> bool:
    files = _spark_files(uri)
    return bool(files) and all(pq.read_metadata(p).created_by.startswith("parquet-mr") for p in files)


def _checked_files(uri: str) -> dict[Any, int]:
    """Rows per partition, having checked that every file's metadata is what the Python writer records for
    its rows (row count, size, schema id, each column's statistics in the table's stats mode)."""
    t = mt.open_table(uri)
    schema = t.table_schema
    cols = list(schema.column_names)
    modes = [schema.table_options.field_stats_mode(c) for c in cols]
    out: dict[Any, int] = {}
    for partition, bucket, f in t.files():
        path = t.path_factory.data_file(partition, bucket, f.file_name)
        rows = pq.read_table(path).select(cols).cast(schema.arrow_schema)
        assert (f.row_count, f.file_size, f.schema_id, f.level) == (rows.num_rows, os.path.getsize(path), schema.id, 0)
        assert f.value_stats == column_stats(rows, cols, modes) and f.value_stats_cols == tuple(cols)
        assert partitions_of(rows, schema) == [partition] and bucket == 0
        out[partition] = out.get(partition, 0) + f.row_count
    return out


def _sorted_rows(uri: str) -> list[Any]:
    rows = mt.open_table(uri).read().to_pylist()
    return sorted((tuple(repr(v) for v in r.values()) for r in rows), key=repr)


def _stray(uri: str) -> list[str]:
    """Files under the table that no snapshot references (staging included), but metadata."""
    live: set[str] = set()
    if mt.table_exists(uri):
        t = mt.open_table(uri)
        for snap in t.snapshots():
            live |= {t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files(snap.id)}
    out = []
    for directory, _, names in os.walk(uri):
        for n in names:
            path = f"{directory}/{n}"
            if not any(part in path for part in ("/schema/", "/snapshot/", "/manifest/")) and path not in live:
                out.append(path)
    return out


@pytest.mark.parametrize("partition_keys", [None, ["b"], ["dec", "d"]])
def test_the_native_write_equals_the_data_source_write(
    spark: SparkSession, tmp_path: Path, partition_keys: list[str] | None
) -> None:
    df = _frame(spark)
    fast, slow = str(tmp_path / "fast"), str(tmp_path / "slow")
    opts = {} if partition_keys is None else {"partition-keys": ",".join(partition_keys)}
    mts.write(df, "file://" + fast, options=opts)
    mts.write(df, slow, options=opts, native=False)
    assert spark.conf.get("spark.sql.parquet.outputTimestampType", None) is None  # set for the write only
    assert _written_by_spark(fast) and not _written_by_spark(slow)
    assert mt.open_table(fast).table_schema.fields == mt.open_table(slow).table_schema.fields
    assert _sorted_rows(fast) == _sorted_rows(slow)
    assert _checked_files(fast) == _checked_files(slow)  # the same partitions and rows, the statistics of each file
    assert _stray(fast) == []
    # the files read back natively (no float statistics recorded) and through the data source alike
    assert mts.read(spark, fast).inputFiles()
    native_rows = sorted(map(repr, mts.read(spark, fast).collect()))  # repr: NaN equals NaN
    assert native_rows == sorted(map(repr, spark.read.format("mergetable").load(slow).collect()))


def test_partition_values_are_the_python_writers(spark: SparkSession, tmp_path: Path) -> None:
    values = ["a/b", "", None, "x=y", "%41", "ü ä", "__DEFAULT_PARTITION__x"]
    df = spark.createDataFrame([(v, i) for i, v in enumerate(values)], "p string, n int")
    fast, python = str(tmp_path / "fast"), str(tmp_path / "python")
    mts.write(df, fast, partition_keys="p")
    t = mt.create_table(python, mt.open_table(fast).table_schema.arrow_schema, partition_keys=["p"])
    t.write(pa.table({"p": values, "n": list(range(len(values)))}, schema=t.table_schema.arrow_schema))
    assert _written_by_spark(fast)
    rel = sorted(os.path.relpath(p, fast).rsplit("/", 1)[0] for p in _spark_files(fast))
    assert rel == sorted(os.path.relpath(p, python).rsplit("/", 1)[0] for p in _spark_files(python))
    assert _checked_files(fast) == _checked_files(python)
    assert _sorted_rows(fast) == _sorted_rows(python)
    got = mt.open_table(fast).read(filter=[("p", "=", "a/b")]).column("n").to_pylist()
    assert got == [0]


def test_unsupported_types_fall_back_to_the_data_source(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, [1, 2], datetime.datetime(2024, 1, 1))], "id long, xs array<int>, t timestamp_ntz")
    mts.write(df, uri)
    assert not _written_by_spark(uri)
    assert mt.open_table(uri).read().to_pylist() == [{"id": 1, "xs": [1, 2], "t": datetime.datetime(2024, 1, 1)}]
    narrower = spark.createDataFrame([(2, [3], None)], "id int, xs array<int>, t timestamp_ntz")  # a cast: data source
    mts.write(narrower, uri)
    assert sorted(mt.open_table(uri).read().column("id").to_pylist()) == [1, 2]


def test_overwrite_and_dynamic_partition_overwrite(spark: SparkSession, tmp_path: Path) -> None:
    first = spark.createDataFrame([(1, "a"), (2, "b"), (3, "c")], "n long, p string")
    second = spark.createDataFrame([(10, "a"), (20, "z")], "n long, p string")
    results = []
    for native in (True, False):
        uri = str(tmp_path / f"t{native}")
        mts.write(first, uri, partition_keys="p", native=native)
        mts.write(second, uri, "overwrite", partitionOverwriteMode="dynamic", native=native)
        dynamic = sorted(mt.open_table(uri).read().column("n").to_pylist())
        mts.write(first, uri, "overwrite", native=native)
        results.append((dynamic, sorted(mt.open_table(uri).read().column("n").to_pylist())))
        assert _written_by_spark(uri) is native
        assert _stray(uri) == []
    assert results[0] == results[1] == ([2, 3, 10, 20], [1, 2, 3])

    empty = first.limit(0)
    for native in (True, False):  # an empty overwrite empties the table; an empty first write creates one
        uri = str(tmp_path / f"t{native}")
        mts.write(empty, uri, "overwrite", native=native)
        assert mt.open_table(uri).count() == 0 and _stray(uri) == []
        fresh = str(tmp_path / f"fresh{native}")
        mts.write(empty, fresh, native=native)
        assert mt.open_table(fresh).count() == 0 and mt.open_table(fresh).table_schema.is_append_table


def test_a_write_that_fails_leaves_the_table_as_it_was(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(i, f"v{i}") for i in range(20)], "n long, s string")
    mts.write(df, uri)
    before = (mt.open_table(uri).latest_snapshot_id(), _spark_files(uri))

    def boom(n: int) -> int:
        if n == 13:
            raise ValueError("injected")
        return n

    with pytest.raises(Exception, match="injected"):
        mts.write(df.withColumn("n", F.udf(boom, "long", useArrow=False)("n")), uri)
    assert (mt.open_table(uri).latest_snapshot_id(), _spark_files(uri)) == before
    assert _stray(uri) == []


def test_a_commit_that_fails_deletes_the_written_files(spark: SparkSession, tmp_path: Path) -> None:
    """The table is deleted and created again while the Spark job runs: the commit refuses, and none of the
    job's files stays under the table."""
    uri, flag = str(tmp_path / "t"), str(tmp_path / "recreated")
    df = spark.createDataFrame([(i, f"v{i}") for i in range(20)], "n long, s string")
    mts.write(df, uri)
    arrow = mt.open_table(uri).table_schema.arrow_schema

    def recreate(n: int) -> int:
        import shutil

        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            return n
        for name in os.listdir(uri):  # all but the staging directory Spark is writing into
            if name != "_spark_staging":
                shutil.rmtree(os.path.join(uri, name))
        mt.create_table(uri, arrow).write(pa.table({"n": [-1], "s": ["new"]}, schema=arrow))
        return n

    with pytest.raises(TableRecreatedError):
        mts.write(df.withColumn("n", F.udf(recreate, "long", useArrow=False)("n")), uri)
    assert mt.open_table(uri).read().to_pylist() == [{"n": -1, "s": "new"}]
    assert _stray(uri) == []


def test_maintenance_treats_the_files_as_the_tables_own(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(i, f"v{i}") for i in range(10)], "n long, s string")
    mts.write(df, uri)
    old = _spark_files(uri)
    mts.write(df, uri, "overwrite")
    t = mt.open_table(uri)
    assert t.remove_orphan_files(older_than_ms=2**62, force=True) == []  # every file is referenced
    t.expire_snapshots(retain_last=1)
    assert not any(os.path.exists(p) for p in old)  # the overwritten files went with their snapshot
    assert _written_by_spark(uri) and sorted(mt.open_table(uri).read().column("n").to_pylist()) == list(range(10))
    staged = mt.open_table(uri).path_factory.staged_parquet_dir("0123456789abcdef")  # a driver that stopped
    df.write.partitionBy("s").parquet(staged)
    assert _stray(uri)
    removed = mt.open_table(uri).remove_orphan_files(older_than_ms=2**62, force=True)
    assert removed and _stray(uri) == [] and not os.path.exists(os.path.join(uri, "_spark_staging"))


def test_a_replayed_transaction_and_a_deletion_vector_table(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(i, f"v{i}") for i in range(10)], "n long, s string")
    mts.write(df, uri, txn_app_id="app", txn_version=0, options={"deletion-vectors.enabled": "true"})
    mts.write(df, uri, txn_app_id="app", txn_version=0)  # skipped: already committed
    t = mt.open_table(uri)
    assert t.count() == 10 and t.txn_version("app") == 0 and _stray(uri) == [] and _written_by_spark(uri)
    t.delete([("n", "<", 3)])
    mts.write(df, uri, txn_app_id="app", txn_version=1)
    assert sorted(mt.open_table(uri).read().column("n").to_pylist()) == sorted([*range(3, 10), *range(10)])
    assert sorted(r.n for r in mts.read(spark, uri).collect()) == sorted([*range(3, 10), *range(10)])


def test_foreach_batch_into_an_append_table_is_exactly_once(spark: SparkSession, tmp_path: Path) -> None:
    source, checkpoint, uri = tmp_path / "in", tmp_path / "ck", str(tmp_path / "t")
    source.mkdir()
    for n in range(2):
        pq.write_table(pa.table({"n": [n * 10 + i for i in range(3)]}), source / f"{n}.parquet")
    sink = mts.foreach_batch(uri, "events")

    def run() -> None:
        df = spark.readStream.schema("n long").option("maxFilesPerTrigger", 1).parquet(str(source))
        q = df.writeStream.foreachBatch(sink).option("checkpointLocation", str(checkpoint))
        q.trigger(availableNow=True).start().awaitTermination()

    run()
    for log in (checkpoint / "commits" / "1", checkpoint / "commits" / ".1.crc"):  # the last batch is replayed
        log.unlink(missing_ok=True)
    run()
    t = mt.open_table(uri)
    assert sorted(t.read().column("n").to_pylist()) == [0, 1, 2, 10, 11, 12]
    assert t.txn_version("events") == 1 and _written_by_spark(uri) and _stray(uri) == []


def test_timestamp_partitions_whatever_the_session_time_zone(spark: SparkSession, tmp_path: Path) -> None:
    """Two instants of the hour a New York clock repeats: a partition each."""
    first = datetime.datetime(2024, 11, 3, 5, 30, tzinfo=datetime.UTC)  # 01:30 EDT
    values = [(first, b"\xff\x00"), (first + datetime.timedelta(hours=1), b"\xfe"), (None, b"")]  # 01:30 EST
    before = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        df = spark.createDataFrame([(*v, i) for i, v in enumerate(values)], "ts timestamp, bin binary, n int")
        fast, slow = str(tmp_path / "fast"), str(tmp_path / "slow")
        mts.write(df, fast, partition_keys="ts")
        mts.write(df, slow, partition_keys="ts", native=False)
        assert _written_by_spark(fast)
        assert _checked_files(fast) == _checked_files(slow) and len(_checked_files(fast)) == 3
        assert _sorted_rows(fast) == _sorted_rows(slow)
    finally:
        spark.conf.set("spark.sql.session.timeZone", before)
