"""The mergetable data source in a real local SparkSession: registration, types, save modes, table creation,
time travel, pushdown on/off, failures and schema errors."""

from __future__ import annotations

import contextlib
import datetime
import decimal
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

import mergetable as mt
import mergetable.spark as mts
from mergetable.core.options import MergeEngine
from mergetable.merge.base import _REGISTRY
from mergetable.metadata.models import CommitKind
from mergetable.spark.bucketing import bucket_task_key
from mergetable.spark.options import ReadOptions, pushdown_scoped_per_scan
from mergetable.spark.types import as_nullable
from mergetable.spark.writer import STAGING_DIR

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def _sorted(rows: list[Row], key: str = "id") -> list[Row]:
    return sorted(rows, key=lambda r: r[key])


def _read(spark: SparkSession, uri: str, **options: str) -> DataFrame:
    return spark.read.format("mergetable").options(**options).load(uri)


def _parquet_names(root: str) -> set[str]:
    return {p.name for p in Path(root).rglob("*.parquet")}


def _data_snapshots(uri: str) -> list[mt.Snapshot]:
    """Snapshots made by writes (compaction may add COMPACT snapshots after a write)."""
    return [s for s in mt.open_table(uri).snapshots() if s.commit_kind is not CommitKind.COMPACT]


# -- registration -----------------------------------------------------------------------------------------


def test_format_is_registered_without_a_register_call(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spark.range(3).write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    assert sorted(r.id for r in _read(spark, uri).collect()) == [0, 1, 2]


# -- types ------------------------------------------------------------------------------------------------
ALL_TYPES = T.StructType(
    [
        T.StructField("id", T.LongType(), False),
        T.StructField("b", T.BooleanType()),
        T.StructField("i8", T.ByteType()),
        T.StructField("i16", T.ShortType()),
        T.StructField("i32", T.IntegerType()),
        T.StructField("f32", T.FloatType()),
        T.StructField("f64", T.DoubleType()),
        T.StructField("dec", T.DecimalType(10, 2)),
        T.StructField("dec38", T.DecimalType(38, 18)),
        T.StructField("s", T.StringType()),
        T.StructField("bin", T.BinaryType()),
        T.StructField("d", T.DateType()),
        T.StructField("ts", T.TimestampType()),
        T.StructField("ntz", T.TimestampNTZType()),
        T.StructField("tm", T.TimeType(6)),
        T.StructField("arr", T.ArrayType(T.IntegerType())),
        T.StructField("arr_s", T.ArrayType(T.StringType(), False)),
        T.StructField("m", T.MapType(T.StringType(), T.DoubleType())),
        T.StructField("st", T.StructType([T.StructField("x", T.IntegerType()), T.StructField("y", T.StringType())])),
        T.StructField("arr_st", T.ArrayType(T.StructType([T.StructField("k", T.StringType())]))),
    ]
)


def _all_types_rows() -> list[tuple[Any, ...]]:
    utc = datetime.UTC
    full = (
        1,
        True,
        -8,
        -16,
        32,
        1.5,
        2.25,
        decimal.Decimal("12345678.91"),
        decimal.Decimal("12345678901234567890.123456789012345678"),
        "héllo",
        b"\x00\xff",
        datetime.date(2024, 2, 29),
        datetime.datetime(2024, 5, 1, 12, 30, 45, 123456, tzinfo=utc),
        datetime.datetime(2024, 5, 1, 12, 30, 45, 654321),
        datetime.time(23, 59, 58, 999999),
        [1, None, 3],
        ["a", "b"],
        {"k": 1.0, "n": None},
        (7, "seven"),
        [("p",), ("q",)],
    )
    nulls: tuple[Any, ...] = (2, *([None] * (len(full) - 1)))
    return [full, nulls]


def test_round_trip_of_every_supported_type(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "types")
    df = spark.createDataFrame(_all_types_rows(), ALL_TYPES)
    df.write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    back = _read(spark, uri)
    expected = as_nullable(ALL_TYPES)  # a new table's columns are nullable, except the primary key
    assert isinstance(expected, T.StructType)
    expected.fields[0].nullable = False
    assert back.schema == expected
    assert _sorted(back.collect()) == _sorted(df.collect())
    stored = mt.open_table(uri).schema
    assert stored.field("ts").type == pa.timestamp("us", tz="UTC")
    assert stored.field("ntz").type == pa.timestamp("us")


def test_python_written_types_read_by_spark(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "py")
    schema = pa.schema(
        [
            pa.field("id", pa.int32(), False),
            pa.field("fsb", pa.binary(3)),
            pa.field("ms", pa.timestamp("ms")),
            pa.field("ns", pa.timestamp("ns", tz="UTC")),
            pa.field("tm", pa.time64("us")),
            pa.field("ls", pa.large_string()),
        ]
    )
    t = mt.create_table(uri, schema, ["id"])
    t.write(
        pa.table(
            {
                "id": pa.array([1], pa.int32()),
                "fsb": pa.array([b"abc"], pa.binary(3)),
                "ms": pa.array([datetime.datetime(2024, 1, 1, 0, 0, 1)], pa.timestamp("ms")),
                "ns": pa.array([1_700_000_000_000_000_000], pa.timestamp("ns", tz="UTC")),
                "tm": pa.array([datetime.time(13, 14, 15, 16)], pa.time64("us")),
                "ls": pa.array(["x"], pa.large_string()),
            }
        )
    )
    row = _read(spark, uri).collect()[0]
    assert row.fsb == bytearray(b"abc") and row.ls == "x"
    assert row.ms == datetime.datetime(2024, 1, 1, 0, 0, 1)
    assert row.tm == datetime.time(13, 14, 15, 16)


# -- save modes and table creation ---------------------------------------------------------------------
ORDERS = "id bigint, dt string, amount double, note string"


def _orders(spark: SparkSession, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, ORDERS)


def test_append_upserts_and_each_job_is_one_snapshot(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    first = _orders(spark, [(i, "d1" if i % 2 else "d2", float(i), "v1") for i in range(40)]).repartition(4)
    first.write.format("mergetable").mode("append").option("primary-key", "id,dt").option(
        "partition-keys", "dt"
    ).option("bucket", "3").save(uri)
    table = mt.open_table(uri)
    assert len(_data_snapshots(uri)) == 1  # four tasks, one commit
    assert table.partition_keys == ("dt",) and table.table_options.bucket == 3
    _orders(spark, [(1, "d1", 100.0, "v2"), (100, "d1", 1.0, "new")]).write.format("mergetable").mode("append").save(
        uri
    )
    rows = {r.id: r for r in _read(spark, uri).collect()}
    assert len(rows) == 41 and rows[1].amount == 100.0 and rows[1].note == "v2"
    assert len(_data_snapshots(uri)) == 2
    assert not (Path(uri) / STAGING_DIR).exists()


def test_tasks_of_one_job_apply_in_partition_order_and_jobs_in_commit_order(
    spark: SparkSession, tmp_path: Path
) -> None:
    uri = str(tmp_path / "t")

    def job(tag: str) -> DataFrame:  # one row of key 1 in each of 4 Spark partitions
        ids = spark.range(0, 4, numPartitions=4)
        return ids.select(
            F.lit(1).cast("long").alias("id"), F.concat(F.lit(tag), F.col("id").cast("string")).alias("v")
        )

    job("a").write.format("mergetable").mode("append").option("primary-key", "id").option("bucket", "1").save(uri)
    assert [r.v for r in _read(spark, uri).collect()] == ["a3"]  # the last partition's row
    job("b").write.format("mergetable").mode("append").save(uri)
    assert [r.v for r in _read(spark, uri).collect()] == ["b3"]  # the later commit
    mt.open_table(uri).compact(full=True)
    assert [r.v for r in _read(spark, uri).collect()] == ["b3"]


def test_overwrite_whole_table_and_dynamic_partitions(spark: SparkSession, tmp_path: Path) -> None:
    plain = str(tmp_path / "plain")
    _orders(spark, [(1, "a", 1.0, "x"), (2, "b", 2.0, "x")]).write.format("mergetable").mode("overwrite").option(
        "primary-key", "id"
    ).save(plain)
    _orders(spark, [(3, "c", 3.0, "y")]).write.format("mergetable").mode("overwrite").save(plain)
    assert [r.id for r in _read(spark, plain).collect()] == [3]

    parted = str(tmp_path / "parted")
    base = _orders(spark, [(1, "a", 1.0, "x"), (2, "b", 2.0, "x"), (3, "b", 3.0, "x")])
    base.write.format("mergetable").mode("append").option("primary-key", "id,dt").option("partition-keys", "dt").save(
        parted
    )
    _orders(spark, [(9, "b", 9.0, "y")]).write.format("mergetable").mode("overwrite").option(
        "partitionOverwriteMode", "dynamic"
    ).save(parted)
    assert sorted((r.id, r.dt) for r in _read(spark, parted).collect()) == [(1, "a"), (9, "b")]
    _orders(spark, [(8, "a", 8.0, "y")]).write.format("mergetable").mode("overwrite").option(
        "dynamic-partition-overwrite",
        "true",  # Paimon's per-write spelling
    ).save(parted)
    assert sorted((r.id, r.dt) for r in _read(spark, parted).collect()) == [(8, "a"), (9, "b")]
    _orders(spark, [(7, "c", 7.0, "z")]).write.format("mergetable").mode("overwrite").option(
        "dynamic-partition-overwrite", "false"
    ).save(parted)
    assert [(r.id, r.dt) for r in _read(spark, parted).collect()] == [(7, "c")]
    _orders(spark, [(6, "d", 6.0, "z")]).write.format("mergetable").mode("overwrite").save(parted)
    assert [(r.id, r.dt) for r in _read(spark, parted).collect()] == [(6, "d")]  # Spark's default: static
    assert mt.open_table(parted).table_options.dynamic_partition_overwrite is True  # a per-write setting


def test_unsupported_save_modes_fail(spark: SparkSession, tmp_path: Path) -> None:
    for mode in ("error", "ignore"):
        with pytest.raises(PySparkException):
            spark.range(1).write.format("mergetable").mode(mode).option("primary-key", "id").save(str(tmp_path / mode))


def test_table_created_from_options(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "a", 5, 3)], "orderId bigint, userName string, Total int, ver int")
    df.write.format("mergetable").mode("append").options(
        **{
            "primary-key": "orderId",
            "bucket": "2",
            "sequence.field": "ver",
            "file.compression": "snappy",
            "fields.Total.ignore-retract": "true",
        }
    ).save(uri)
    table = mt.open_table(uri)
    opts = table.table_options
    assert table.primary_key == ("orderId",)
    assert opts.bucket == 2 and opts.sequence_field == ("ver",) and opts.file_compression == "snappy"
    assert opts.field_option("Total", "ignore-retract") == "true"  # Spark lower-cased the key; case restored
    older = spark.createDataFrame([(1, "old", 1, 1)], "orderId bigint, userName string, Total int, ver int")
    older.write.format("mergetable").mode("append").save(uri)
    assert _read(spark, uri).collect()[0].userName == "a"  # sequence.field decides, not arrival order


def test_creation_and_option_errors_are_clear(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    with pytest.raises(Exception, match="bucket-key"):  # no primary key: an append table, its buckets need a key
        spark.range(1).write.format("mergetable").mode("append").option("bucket", "2").save(uri)
    assert not mt.table_exists(uri)
    with pytest.raises(Exception, match="bukket"):
        spark.range(1).write.format("mergetable").mode("append").option("primary-key", "id").option("bukket", "2").save(
            uri
        )
    spark.range(1).write.format("mergetable").mode("append").option("primary-key", "id").option("bucket", "2").save(uri)
    with pytest.raises(Exception, match=r"option 'bucket'.*bucket=2"):
        spark.range(1).write.format("mergetable").mode("append").option("bucket", "4").save(uri)
    with pytest.raises(Exception, match="option 'merge-engine'"):
        spark.range(1).write.format("mergetable").mode("append").option("merge-engine", "first-row").save(uri)
    spark.range(1, 2).write.format("mergetable").mode("append").option("target-file-size", "1mb").save(uri)
    assert _read(spark, uri).count() == 2


def test_schema_mismatch_fails_clearly(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _orders(spark, [(1, "a", 1.0, "x")]).write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    wrong_type = spark.createDataFrame([(1, "a", "1.0", "x")], "id bigint, dt string, amount string, note string")
    with pytest.raises(Exception, match="column 'amount'"):
        wrong_type.write.format("mergetable").mode("append").save(uri)
    extra = _orders(spark, [(2, "a", 1.0, "x")]).withColumn("zzz", F.lit(1))
    with pytest.raises(Exception, match="column 'zzz'"):
        extra.write.format("mergetable").mode("append").save(uri)
    with pytest.raises(Exception, match="column 'note'"):
        _orders(spark, [(2, "a", 1.0, "x")]).drop("note").write.format("mergetable").mode("append").save(uri)
    null_key = spark.createDataFrame([(None, "a", 1.0, "x")], ORDERS)
    with pytest.raises(Exception, match="column 'id'"):
        null_key.write.format("mergetable").mode("append").save(uri)
    assert len(_data_snapshots(uri)) == 1


def _file_sizes(root: Path) -> set[tuple[Path, int]]:
    """Every file under ``root`` with its size (a file removed while they are listed is left out)."""
    out = set()
    for p in root.rglob("*"):
        with contextlib.suppress(FileNotFoundError):
            if p.is_file():
                out.add((p, p.stat().st_size))
    return out


def test_failed_task_leaves_the_table_unchanged(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    _orders(spark, [(i, "a", 1.0, "x") for i in range(10)]).write.format("mergetable").mode("append").option(
        "primary-key", "id"
    ).option("bucket", "2").save(uri)
    before_files = _parquet_names(uri)
    before_rows = _sorted(_read(spark, uri).collect())

    failed_at = tmp_path / "failed_at"

    def fail_late(i: int, note: str) -> str:  # defined here so that workers get it by value
        if i == 109:
            # let the other task finish first: wait until the tables' files stop changing for a second
            seen, still, deadline = None, 0.0, time.monotonic() + 60
            while still < 1.0 and time.monotonic() < deadline:
                time.sleep(0.25)
                now = {p.name for p in tmp_path.rglob("*.parquet")}
                still = still + 0.25 if now == seen else 0.0
                seen = now
            failed_at.write_text(repr(time.time()))
            raise RuntimeError("boom in the middle of the write")
        return note

    def late_files(root: str, before: set[str]) -> set[Path]:
        """The files under ``root`` once no task runs, other than ``before``. A task still writing when Spark
        aborts the job (the other one, on a loaded machine) can leave files and its marker that the abort did not
        see: orphans, never visible, that remove_orphan_files deletes (see mergetable.spark.writer). Every file
        that existed when the task failed must be gone."""
        tracker, deadline = spark.sparkContext.statusTracker(), time.monotonic() + 60
        while tracker.getActiveStageIds() and time.monotonic() < deadline:
            time.sleep(0.1)
        # a cancelled task's Python worker may still be writing: wait until the files stop changing for a second
        seen, still = None, 0.0
        while still < 1.0 and time.monotonic() < deadline:
            now = _file_sizes(Path(root))
            still = still + 0.25 if now == seen else 0.0
            seen = now
            time.sleep(0.25)
        late = {p for p in Path(root).rglob("*.parquet") if p.name not in before}
        late |= {p for p in (Path(root) / STAGING_DIR).rglob("*") if p.is_file()}  # such a task's marker
        assert all(p.stat().st_mtime > float(failed_at.read_text()) - 0.01 for p in late)
        return late

    def settled_files() -> set[str]:
        late = late_files(uri, before_files)
        if late:
            removed = mt.open_table(uri).remove_orphan_files(older_than_ms=int(time.time() * 1000) + 1000, force=True)
            assert {r.rsplit("/", 1)[-1] for r in removed} == {p.name for p in late}
        return _parquet_names(uri)

    fail = F.udf(fail_late, "string", useArrow=False)
    df = (
        _orders(spark, [(100 + i, "a", 2.0, "y") for i in range(10)])
        .repartition(2, "id")
        .sortWithinPartitions("id")
        .withColumn("note", fail("id", "note"))
    )
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
    try:  # tiny batches and write buffer: the failing task has written files before it dies
        with pytest.raises(Exception, match="boom"):
            df.write.format("mergetable").mode("append").option("write-buffer-size", "1b").save(uri)
        assert settled_files() == before_files
        assert _sorted(_read(spark, uri).collect()) == before_rows
        assert len(_data_snapshots(uri)) == 1
        assert not (Path(uri) / STAGING_DIR).exists()

        fresh = str(tmp_path / "fresh")
        with pytest.raises(Exception, match="boom"):
            df.write.format("mergetable").mode("append").option("primary-key", "id").save(fresh)
        late_files(fresh, set())  # the first write failed: no table, and only a late task's orphans if any
        assert not mt.table_exists(fresh)
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")


def test_empty_first_write_creates_the_table(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spark.createDataFrame([], ORDERS).write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    assert mt.table_exists(uri) and mt.open_table(uri).snapshots() == []
    assert _read(spark, uri).count() == 0


# -- row kinds --------------------------------------------------------------------------------------------


def test_row_kind_column_is_consumed(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame(
        [(1, 1.0, "+I"), (2, 2.0, "+I"), (3, 3.0, "+I"), (2, 2.0, "-D"), (3, 30.0, "+U")],
        "id bigint, amount double, op string",
    ).coalesce(1)
    df.write.format("mergetable").mode("append").option("primary-key", "id").option("row-kind-column", "op").save(uri)
    assert mt.open_table(uri).schema.names == ["id", "amount"]
    assert sorted((r.id, r.amount) for r in _read(spark, uri).collect()) == [(1, 1.0), (3, 30.0)]


def test_rowkind_field_table_option(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = spark.createDataFrame([(1, "+I"), (2, "+I")], "id bigint, kind string")
    df.write.format("mergetable").mode("append").option("primary-key", "id").option("rowkind.field", "kind").save(uri)
    spark.createDataFrame([(2, "-D")], "id bigint, kind string").write.format("mergetable").mode("append").save(uri)
    assert [r.id for r in _read(spark, uri).collect()] == [1]


# -- reading: columns, time travel, pushdown -------------------------------------------------------------


DELETED = [i for i in range(1, 300, 11) if i % 7]  # keys updated and deleted in one job have no defined order


@pytest.fixture(scope="module")
def history(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A partitioned, bucketed table with three snapshots (insert, update+delete, insert) and a tag."""
    uri = str(tmp_path_factory.mktemp("history") / "orders")
    rows = [(i, f"2024-05-0{1 + i % 3}", float(i), f"n{i}") for i in range(300)]
    _orders(spark, rows).write.format("mergetable").mode("append").option("primary-key", "id,dt").option(
        "partition-keys", "dt"
    ).option("bucket", "4").save(uri)
    first = mt.open_table(uri).latest_snapshot()
    assert first is not None
    time.sleep(0.02)
    changes = spark.createDataFrame(
        [(i, f"2024-05-0{1 + i % 3}", -1.0, "upd", "+U") for i in range(0, 300, 7)]
        + [(i, f"2024-05-0{1 + i % 3}", 0.0, "del", "-D") for i in DELETED],
        ORDERS + ", op string",
    )
    changes.write.format("mergetable").mode("append").option("row-kind-column", "op").save(uri)
    second = mt.open_table(uri).latest_snapshot()
    assert second is not None
    mt.open_table(uri).create_tag("after-changes", second.id)
    _orders(spark, [(1000 + i, "2024-05-04", 5.0, "late") for i in range(20)]).write.format("mergetable").mode(
        "append"
    ).save(uri)
    return {"uri": uri, "t1": first.time_millis, "first": str(first.id), "second": str(second.id)}


def test_columns_option_and_user_schema(spark: SparkSession, history: dict[str, Any]) -> None:
    uri = history["uri"]
    narrow = _read(spark, uri, columns="amount,id")
    assert narrow.columns == ["amount", "id"]
    full = {r.id: r.amount for r in _read(spark, uri).collect()}
    assert {r.id: r.amount for r in narrow.collect()} == full
    by_schema = spark.read.format("mergetable").schema("id bigint, note string").load(uri)
    assert by_schema.count() == len(full)
    with pytest.raises(Exception, match="nope"):
        _read(spark, uri, columns="id,nope").collect()


def test_time_travel_options(spark: SparkSession, history: dict[str, Any]) -> None:
    uri = history["uri"]
    latest = _read(spark, uri).count()
    assert latest == 300 - len(DELETED) + 20
    assert _read(spark, uri, **{"snapshot-id": history["first"]}).count() == 300
    assert _read(spark, uri, **{"scan.snapshot-id": history["second"]}).count() == latest - 20
    assert _read(spark, uri, **{"timestamp-millis": str(history["t1"])}).count() == 300
    iso = datetime.datetime.fromtimestamp(history["t1"] / 1000, datetime.UTC).isoformat()
    assert _read(spark, uri, timestamp=iso).count() == 300
    assert _read(spark, uri, tag="after-changes").count() == latest - 20
    assert _read(spark, uri, version="after-changes").count() == latest - 20
    assert _read(spark, uri, version=history["first"]).count() == 300
    assert _read(spark, uri, versionAsOf=history["first"]).count() == 300
    with pytest.raises(Exception, match="snapshot 99 does not exist"):
        _read(spark, uri, **{"snapshot-id": "99"}).count()
    with pytest.raises(Exception, match="only one time-travel option"):
        _read(spark, uri, **{"snapshot-id": "1", "tag": "after-changes"}).count()


def test_incremental_between(spark: SparkSession, history: dict[str, Any]) -> None:
    uri = history["uri"]
    table = mt.open_table(uri)
    latest = table.latest_snapshot()
    assert latest is not None
    expected = table.read(incremental_between=(int(history["second"]), latest.id))
    got = _read(spark, uri, **{"incremental-between": f"{history['second']},{latest.id}"})
    assert sorted(r.id for r in got.collect()) == sorted(expected.column("id").to_pylist())
    assert {r.id for r in got.collect()} == {1000 + i for i in range(20)}
    by_tag = _read(spark, uri, **{"scan.incremental-between": f"after-changes,{latest.id}"})
    assert by_tag.count() == 20
    with pytest.raises(Exception, match="incremental-between"):
        _read(spark, uri, **{"incremental-between": "1", "tag": "after-changes"}).count()


QUERIES = [
    "id = 7",
    "id in (1, 2, 3, 77, 1005) and dt = '2024-05-02'",
    "dt = '2024-05-03' and amount > 50",
    "dt >= '2024-05-02' and id < 40 or id = 1010",
    "not (id in (3, 4)) and dt != '2024-05-01' and note like 'n1%'",
    "amount is null or note = 'upd'",
]


def _answers(spark: SparkSession, uri: str, fresh: bool, queries: int = len(QUERIES), **options: str) -> list[Any]:
    shared = _read(spark, uri, **options)
    out: list[Any] = []
    for q in QUERIES[:queries]:
        df = _read(spark, uri, **options) if fresh else shared
        out.append(sorted(df.filter(q).collect()))
    out.append(shared.count())  # an unfiltered scan of a DataFrame that served filtered queries before
    return out


def test_pushdown_on_and_off_give_identical_results(spark: SparkSession, history: dict[str, Any]) -> None:
    uri = history["uri"]
    try:
        spark.conf.set(PUSHDOWN_CONF, "false")
        expected = _answers(spark, uri, fresh=False)
        two = [*expected[:2], expected[-1]]
        if pushdown_scoped_per_scan():
            assert _answers(spark, uri, fresh=False, queries=2, pushdown="true") == two  # conf off: Spark filters
        spark.conf.set(PUSHDOWN_CONF, "true")
        assert _answers(spark, uri, fresh=False) == expected  # default 'auto' is safe with DataFrame reuse
        assert _answers(spark, uri, fresh=True, pushdown="false") == expected
        if pushdown_scoped_per_scan():
            assert _answers(spark, uri, fresh=True, pushdown="true") == expected
            assert _answers(spark, uri, fresh=False, pushdown="true") == expected
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")


def test_pushdown_true_never_answers_with_another_querys_rows(spark: SparkSession, tmp_path: Path) -> None:
    """A reused DataFrame: a pushed-down ``id = 3`` must not answer the ``count()`` after it. Where PySpark
    keeps one pushed plan per loaded relation (4.3), ``pushdown=true`` is refused, naming the option."""
    uri = str(tmp_path / "reused")
    rows = pa.table({"id": pa.array(range(3000), pa.int64()), "v": pa.array(range(3000), pa.int64())})
    mt.create_table(uri, rows.schema, primary_key=["id"], options={"bucket": "2"}).write(rows)
    spark.conf.set(PUSHDOWN_CONF, "true")
    try:
        if not pushdown_scoped_per_scan():
            with pytest.raises(PySparkException, match=r"option 'pushdown'.*use 'auto'"):
                _read(spark, uri, pushdown="true")
            with pytest.raises(mt.OptionsError, match="option 'pushdown'"):
                ReadOptions.parse({"path": uri, "pushdown": "true"})
            return
        df = _read(spark, uri, pushdown="true")
        assert df.filter("id = 3").count() == 1
        assert df.count() == 3000
        assert df.unionByName(df.filter("id < 10")).count() == 3010
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")


def _only_one_day(uri: str, root: Path) -> str:
    """A copy of the table at ``uri`` whose data files of every day but 2024-05-02 are gone: a read that opens
    one fails, so a read that succeeds pruned them."""
    copy = root / "orders"
    shutil.copytree(uri, copy)
    t = mt.open_table(str(copy))
    for partition, bucket, f in t.files():
        if partition != ("2024-05-02",):
            Path(t.path_factory.data_file(partition, bucket, f.file_name)).unlink()
    return str(copy)


def test_pushdown_prunes_partitions_and_buckets(spark: SparkSession, history: dict[str, Any], tmp_path: Path) -> None:
    uri = _only_one_day(history["uri"], tmp_path)
    day = "dt = '2024-05-02'"
    expected = sorted(_read(spark, history["uri"]).filter(day).collect())
    if not pushdown_scoped_per_scan():  # nothing takes Spark's filters there: the filter option prunes
        with pytest.raises(PySparkException, match="option 'pushdown'"):
            _read(spark, uri, pushdown="true")
        return
    try:
        spark.conf.set(PUSHDOWN_CONF, "true")
        with pytest.raises(PySparkException, match="missing"):
            _read(spark, uri, pushdown="true").collect()
        assert sorted(_read(spark, uri, pushdown="true").filter(day).collect()) == expected
        one_key = _read(spark, uri, pushdown="true").filter(f"{day} and id = 7")
        assert one_key.rdd.getNumPartitions() == 1
        assert one_key.collect() == [Row(id=7, dt="2024-05-02", amount=-1.0, note="upd")]
        assert "Filter (" not in one_key._jdf.queryExecution().executedPlan().toString()
    finally:
        spark.conf.set(PUSHDOWN_CONF, "false")


def test_filter_option_and_read_helper_prune(spark: SparkSession, history: dict[str, Any], tmp_path: Path) -> None:
    one_day = _only_one_day(history["uri"], tmp_path)
    with pytest.raises(PySparkException, match="missing"):
        _read(spark, one_day).collect()
    pruned = mts.read(spark, one_day, columns=["id", "note"], filter=[("dt", "=", "2024-05-02"), ("id", "<", 20)])
    uri = history["uri"]
    expected = sorted(
        (r.id, r.note) for r in _read(spark, uri).filter("dt = '2024-05-02' and id < 20").select("id", "note").collect()
    )
    assert sorted((r.id, r.note) for r in pruned.collect()) == expected
    either = mts.read(spark, uri, filter=[[("id", "=", 7)], [("id", "=", 1001)]])
    assert sorted(r.id for r in either.collect()) == [7, 1001]


def test_dataframe_reads_the_snapshot_it_was_loaded_with(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    spark.range(3).write.format("mergetable").mode("append").option("primary-key", "id").save(uri)
    df = _read(spark, uri)
    assert df.count() == 3
    spark.range(3, 5).write.format("mergetable").mode("append").save(uri)
    assert df.count() == 3
    assert _read(spark, uri).count() == 5


# -- the write helper ------------------------------------------------------------------------------------


def test_write_helper_gives_each_bucket_one_writer(spark: SparkSession, tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    df = _orders(spark, [(i, "2024-05-0" + str(1 + i % 2), float(i), "x") for i in range(400)]).repartition(4)
    mts.write(df, uri, primary_key="id,dt", partition_keys="dt", bucket=4, options={"file.compression": "zstd"})
    files = mt.open_table(uri).files()
    per_bucket: dict[tuple[Any, int], int] = {}
    for partition, bucket, _ in files:
        per_bucket[(partition, bucket)] = per_bucket.get((partition, bucket), 0) + 1
    assert len(per_bucket) == 8 and set(per_bucket.values()) == {1}
    assert _read(spark, uri).count() == 400
    mts.write(df.limit(10), uri, mode="overwrite")
    assert _read(spark, uri).count() == 10


@pytest.mark.parametrize(("buckets", "tasks"), [(2, 2), (4, 2), (3, 4), (8, 3), (5, 200)])
def test_write_helper_spreads_buckets_over_its_tasks(spark: SparkSession, buckets: int, tasks: int) -> None:
    """Spark's hash partitioning of the bucket numbers themselves sends buckets 0 and 1 to the same of 2 tasks; the
    helper's shuffle key sends bucket ``b`` to task ``b % tasks``."""
    df = spark.range(buckets * 3).select((F.col("id") % buckets).cast("int").alias("b"))
    key = bucket_task_key(spark, F.col("b"), buckets, tasks)
    placed = df.repartition(tasks, key).select(F.spark_partition_id().alias("task"), "b").distinct().collect()
    assert sorted((r.b, r.task) for r in placed) == [(b, b % tasks) for b in range(buckets)]
    if buckets == tasks == 2:  # what hashing the bucket column itself does
        naive = df.repartition(tasks, "b").select(F.spark_partition_id().alias("task")).distinct().count()
        assert naive == 1


# -- merge engines through Spark -------------------------------------------------------------------------


def _engine(engine: MergeEngine) -> None:
    if engine not in _REGISTRY:
        pytest.skip(f"merge engine {engine.value} is not available yet")


def test_partial_update_accepts_column_subsets(spark: SparkSession, tmp_path: Path) -> None:
    _engine(MergeEngine.PARTIAL_UPDATE)
    uri = str(tmp_path / "t")
    spark.createDataFrame([(1, "ann", None)], "id bigint, name string, city string").write.format("mergetable").mode(
        "append"
    ).option("primary-key", "id").option("merge-engine", "partial-update").save(uri)
    spark.createDataFrame([(1, "Paris")], "id bigint, city string").write.format("mergetable").mode("append").save(uri)
    assert _read(spark, uri).collect() == [Row(id=1, name="ann", city="Paris")]


def test_aggregation_engine(spark: SparkSession, tmp_path: Path) -> None:
    _engine(MergeEngine.AGGREGATION)
    uri = str(tmp_path / "t")
    options = {
        "primary-key": "k",
        "merge-engine": "aggregation",
        "fields.total.aggregate-function": "sum",
        "fields.top.aggregate-function": "max",
    }
    df = spark.createDataFrame([("a", 1, 5), ("a", 2, 3), ("b", 4, 4)], "k string, total int, top int")
    df.write.format("mergetable").mode("append").options(**options).save(uri)
    df.write.format("mergetable").mode("append").save(uri)
    assert sorted(_read(spark, uri).collect()) == [Row(k="a", total=6, top=5), Row(k="b", total=8, top=4)]


def test_explicit_register_also_works(spark: SparkSession, history: dict[str, Any]) -> None:
    """Last in the module: after an explicit registration Spark's next data-source calls start cold."""
    mts.register(spark)
    assert spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("mergetable")
    assert _read(spark, history["uri"]).count() == 300 - len(DELETED) + 20
