"""Spark data source logic that needs pyspark but no SparkSession: options, filters, types, exactly-once."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.datasource import (
    EqualNullSafe,
    EqualTo,
    GreaterThan,
    In,
    IsNotNull,
    LessThanOrEqual,
    Not,
    StringStartsWith,
)

import mergetable as mt
from mergetable.core.errors import OptionsError, SchemaError, UnsupportedError
from mergetable.metadata.models import CommitKind
from mergetable.spark.filters import and_dnf, split_filters, to_predicate
from mergetable.spark.options import ReadOptions, WriteOptions, parse_filter, restore_field_case, storage_options
from mergetable.spark.reader import MergeTableReader, PushdownMergeTableReader, created_for_pushdown
from mergetable.spark.source import pushdown_scoped_per_scan, reader_class
from mergetable.spark.types import (
    arrow_schema_of,
    check_write_schema,
    conform_for_spark,
    spark_arrow_schema,
    spark_schema,
)
from mergetable.spark.views import LatestPerQueryReader
from mergetable.spark.writer import STAGING_DIR, MergeTableWriter, TaskCommit, plan_write

# -- options ----------------------------------------------------------------------------------------------


def test_read_options_time_travel_spellings() -> None:
    assert ReadOptions.parse({"path": "/t", "scan.snapshot-id": "3"}).time_travel == {"snapshot-id": "3"}
    assert ReadOptions.parse({"path": "/t", "versionAsOf".lower(): "7"}).time_travel == {"version": "7"}
    assert ReadOptions.parse({"path": "/t", "scan.tag-name": "t1"}).time_travel == {"tag": "t1"}
    with pytest.raises(OptionsError, match="only one time-travel option"):
        ReadOptions.parse({"path": "/t", "snapshot-id": "1", "tag": "x"})
    with pytest.raises(OptionsError, match="snapshot-id"):
        ReadOptions.parse({"path": "/t", "snapshot-id": "1", "scan.snapshot-id": "2"})


def test_read_options_errors_name_the_option() -> None:
    with pytest.raises(OptionsError, match=r"'colums': unknown read option \(did you mean 'columns'\?\)"):
        ReadOptions.parse({"path": "/t", "colums": "a"})
    with pytest.raises(OptionsError, match="'path'"):
        ReadOptions.parse({})
    with pytest.raises(OptionsError, match="'pushdown'"):
        ReadOptions.parse({"path": "/t", "pushdown": "maybe"})
    if pushdown_scoped_per_scan():
        assert ReadOptions.parse({"path": "/t", "pushdown": "true"}).pushdown == "true"
    else:  # one pushed plan per loaded DataFrame: 'true' would answer later scans with its rows
        with pytest.raises(OptionsError, match=r"option 'pushdown'.*use 'auto'"):
            ReadOptions.parse({"path": "/t", "pushdown": "TRUE"})
    with pytest.raises(OptionsError, match=r"split\.target-size"):
        ReadOptions.parse({"path": "/t", "split.target-size": "0"})
    opts = ReadOptions.parse({"path": "/t", "columns": "a, b", "source.split.target-size": "1mb"})
    assert opts.columns == ("a", "b") and opts.split_size == 1 << 20


def test_storage_options_prefix_and_json() -> None:
    opts = {"path": "s3://b/t", "storage.key": "k", "storage.anon": "false", "storage-options": '{"client_kwargs": {}}'}
    assert storage_options(opts) == {"key": "k", "anon": False, "client_kwargs": {}}
    assert storage_options({"path": "/t"}) is None
    with pytest.raises(OptionsError, match="storage-options"):
        storage_options({"storage-options": "[1"})


def test_filter_option_parses_and_or() -> None:
    assert parse_filter('[["id", ">", 3]]') == [[("id", ">", 3)]]
    assert parse_filter('[[["id", "=", 1]], [["id", "=", 2]]]') == [[("id", "=", 1)], [("id", "=", 2)]]
    with pytest.raises(OptionsError, match="filter"):
        parse_filter('["id", ">"]')


def test_write_options_restore_field_case_and_split_layout() -> None:
    cols = ["orderId", "Total", "user.name"]
    assert restore_field_case("fields.total.aggregate-function", cols) == "fields.Total.aggregate-function"
    assert restore_field_case("fields.user.name.ignore-retract", cols) == "fields.user.name.ignore-retract"
    assert restore_field_case("fields.default-aggregate-function", cols) == "fields.default-aggregate-function"
    wo = WriteOptions.parse(
        {"path": "/t", "primary-key": "orderId", "bucket": "2", "fields.total.aggregate-function": "sum"}, cols
    )
    assert wo.primary_key == ("orderId",)
    assert wo.table_options == {"bucket": "2", "fields.Total.aggregate-function": "sum"}
    with pytest.raises(OptionsError, match="'bukket'"):
        WriteOptions.parse({"path": "/t", "bukket": "2"}, cols)
    with pytest.raises(OptionsError, match="read option"):
        WriteOptions.parse({"path": "/t", "snapshot-id": "2"}, cols)


def test_write_options_conflicts_with_existing_table() -> None:
    existing = mt.TableOptions.from_map({"bucket": "4", "merge-engine": "deduplicate"})
    same = WriteOptions.parse({"path": "/t", "bucket": "4", "target-file-size": "1mb"}, ["id"])
    assert same.check_against(existing, ("id",), ()) == {"target-file-size": "1mb"}
    with pytest.raises(OptionsError, match=r"'bucket'.*bucket=4"):
        WriteOptions.parse({"path": "/t", "bucket": "2"}, ["id"]).check_against(existing, ("id",), ())
    with pytest.raises(OptionsError, match="'merge-engine'"):
        WriteOptions.parse({"path": "/t", "merge-engine": "first-row"}, ["id"]).check_against(existing, ("id",), ())
    with pytest.raises(OptionsError, match="'primary-key'"):
        WriteOptions.parse({"path": "/t", "primary-key": "x"}, ["id", "x"]).check_against(existing, ("id",), ())


# -- filters ----------------------------------------------------------------------------------------------
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("s", pa.string()),
        pa.field("f", pa.float64()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("dec", pa.decimal128(10, 2)),
        pa.field("n", pa.int32()),
    ]
)


def test_filters_accepted_exactly() -> None:
    assert to_predicate(EqualTo(("id",), 5), SCHEMA) == ("id", "=", 5)
    assert to_predicate(EqualNullSafe(("s",), "x"), SCHEMA) == ("s", "=", "x")
    assert to_predicate(Not(EqualTo(("s",), "x")), SCHEMA) == ("s", "!=", "x")
    assert to_predicate(Not(GreaterThan(("id",), 5)), SCHEMA) == ("id", "<=", 5)
    assert to_predicate(In(("id",), [1, None, 3]), SCHEMA) == ("id", "in", [1, 3])
    assert to_predicate(Not(In(("id",), [1, 3])), SCHEMA) == ("id", "not in", [1, 3])
    assert to_predicate(LessThanOrEqual(("d",), datetime.date(2024, 1, 1)), SCHEMA) == (
        "d",
        "<=",
        datetime.date(2024, 1, 1),
    )
    ts = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    assert to_predicate(GreaterThan(("ts",), ts), SCHEMA) == ("ts", ">", ts)
    assert to_predicate(EqualTo(("dec",), decimal.Decimal("1.50")), SCHEMA) == ("dec", "=", decimal.Decimal("1.50"))


def test_filters_returned_to_spark() -> None:
    assert to_predicate(GreaterThan(("f",), 1.0), SCHEMA) is None  # NaN ordering differs
    assert to_predicate(IsNotNull(("s",)), SCHEMA) is None
    assert to_predicate(StringStartsWith(("s",), "a"), SCHEMA) is None
    assert to_predicate(Not(In(("s",), ["a"])), SCHEMA) is None  # nullable column: NULL NOT IN (…) is NULL
    assert to_predicate(Not(EqualNullSafe(("s",), "a")), SCHEMA) is None
    assert to_predicate(EqualTo(("n",), 1 << 40), SCHEMA) is None  # literal does not fit INT
    assert to_predicate(EqualTo(("a", "b"), 1), SCHEMA) is None  # nested path
    assert to_predicate(EqualTo(("missing",), 1), SCHEMA) is None
    accepted, rejected = split_filters([EqualTo(("id",), 1), IsNotNull(("s",))], SCHEMA)
    assert accepted == [("id", "=", 1)] and len(rejected) == 1


def test_and_dnf() -> None:
    assert and_dnf(None, []) is None
    assert and_dnf(None, [("a", "=", 1)]) == [[("a", "=", 1)]]
    assert and_dnf([[("b", "=", 1)], [("b", "=", 2)]], [("a", "=", 1)]) == [
        [("b", "=", 1), ("a", "=", 1)],
        [("b", "=", 2), ("a", "=", 1)],
    ]


def test_pushdown_detection_is_by_caller() -> None:
    assert created_for_pushdown() is False
    code = compile("result = created_for_pushdown()", "/x/pyspark/sql/worker/data_source_pushdown_filters.py", "exec")
    scope = {"created_for_pushdown": created_for_pushdown}
    exec(code, scope)
    assert scope["result"] is True


def test_reader_is_chosen_by_the_parsed_options() -> None:
    def chosen(per_query: bool = False, in_pushdown_worker: bool = False, **options: str) -> type:
        pushdown = options.pop("pushdown", "auto")  # 'true' is refused by parse where plans are shared
        opts = dataclasses.replace(ReadOptions.parse({"path": "/t", **options}), pushdown=pushdown)
        if not in_pushdown_worker:
            return reader_class(opts, per_query)
        worker = "/x/pyspark/sql/worker/data_source_pushdown_filters.py"
        scope = {"reader_class": reader_class, "opts": opts, "per_query": per_query}
        exec(compile("result = reader_class(opts, per_query)", worker, "exec"), scope)
        return scope["result"]  # type: ignore[no-any-return]

    assert chosen() is MergeTableReader
    assert chosen(pushdown="true") is MergeTableReader  # not offered filters: the reader any conf accepts
    assert chosen(in_pushdown_worker=True, pushdown="true") is PushdownMergeTableReader
    assert chosen(in_pushdown_worker=True, pushdown="false") is MergeTableReader
    auto = PushdownMergeTableReader if pushdown_scoped_per_scan() else MergeTableReader
    assert chosen(in_pushdown_worker=True) is auto
    assert chosen(per_query=True) is LatestPerQueryReader
    assert chosen(per_query=True, in_pushdown_worker=True, pushdown="true") is PushdownMergeTableReader
    assert chosen(per_query=True, **{"snapshot-id": "1"}) is MergeTableReader  # a pinned view
    assert chosen(per_query=True, **{"incremental-between": "1,2"}) is MergeTableReader


# -- types ------------------------------------------------------------------------------------------------


def test_table_types_map_to_spark_and_back() -> None:
    arrow = pa.schema(
        [
            pa.field("k", pa.int64(), False),
            pa.field("t8", pa.int8()),
            pa.field("fsb", pa.binary(4)),
            pa.field("ms", pa.timestamp("ms")),
            pa.field("ltz", pa.timestamp("us", tz="UTC")),
            pa.field("tm", pa.time32("ms")),
            pa.field("l", pa.list_(pa.field("item", pa.int32(), False))),
            pa.field("m", pa.map_(pa.string(), pa.float64())),
            pa.field("st", pa.struct([pa.field("a", pa.int32(), False)])),
        ]
    )
    ss = spark_schema(arrow)
    assert ss["k"].nullable is False
    assert isinstance(ss["fsb"].dataType, T.BinaryType)
    assert isinstance(ss["ms"].dataType, T.TimestampNTZType)
    assert isinstance(ss["ltz"].dataType, T.TimestampType)
    assert ss["l"].dataType == T.ArrayType(T.IntegerType(), False)
    target = spark_arrow_schema(ss)
    data = pa.table(
        {
            "k": pa.array([1], pa.int64()),
            "t8": pa.array([1], pa.int8()),
            "fsb": pa.array([b"abcd"], pa.binary(4)),
            "ms": pa.array([1], pa.timestamp("ms")),
            "ltz": pa.array([1], pa.timestamp("us", tz="UTC")),
            "tm": pa.array([1], pa.time32("ms")),
            "l": pa.array([[1]], arrow.field("l").type),
            "m": pa.array([[("a", 1.0)]], arrow.field("m").type),
            "st": pa.array([{"a": 1}], arrow.field("st").type),
        },
        schema=arrow,
    )
    out = conform_for_spark(data, target)
    assert out.schema.equals(target)
    with pytest.raises(SchemaError, match="'nope'"):
        spark_schema(arrow, ["k", "nope"])


def test_spark_schema_to_new_table_and_checks() -> None:
    st = T.StructType(
        [
            T.StructField("id", T.LongType()),
            T.StructField("ts", T.TimestampType()),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("tags", T.ArrayType(T.StringType())),
        ]
    )
    arrow = arrow_schema_of(st)
    assert arrow.field("ts").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("ntz").type == pa.timestamp("us")
    with pytest.raises(UnsupportedError, match="'iv'"):
        arrow_schema_of(T.StructType([T.StructField("iv", T.DayTimeIntervalType())]))
    table = pa.schema(
        [pa.field("id", pa.int64(), False), pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("v", pa.int64())]
    )
    ok = T.StructType([T.StructField("id", T.IntegerType()), T.StructField("ts", T.TimestampType())])
    assert check_write_schema(ok, table, ["id"], allow_missing=True) == ["id", "ts"]
    with pytest.raises(SchemaError, match=r"'v'.*missing"):
        check_write_schema(ok, table, ["id"], allow_missing=False)
    bad_type = T.StructType([T.StructField("id", T.LongType()), T.StructField("ts", T.StringType())])
    with pytest.raises(SchemaError, match=r"'ts'.*string"):
        check_write_schema(bad_type, table, ["id"], allow_missing=True)
    extra = T.StructType([T.StructField("id", T.LongType()), T.StructField("zzz", T.LongType())])
    with pytest.raises(SchemaError, match="'zzz'"):
        check_write_schema(extra, table, ["id"], allow_missing=True)
    ntz = T.StructType([T.StructField("id", T.LongType()), T.StructField("ts", T.TimestampNTZType())])
    with pytest.raises(SchemaError, match="'ts'"):
        check_write_schema(ntz, table, ["id"], allow_missing=True)


# -- exactly-once: the writer protocol driven by hand -------------------------------------------------------
DF_SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("v", T.StringType())])


def _batches(ids: range, tag: str) -> list[pa.RecordBatch]:
    return [pa.record_batch({"id": pa.array(list(ids), pa.int64()), "v": [f"{tag}{i}" for i in ids]})]


def _job_files(root: Path) -> list[str]:
    return sorted(p.name for p in root.rglob("*.parquet"))


def test_one_snapshot_and_no_duplicates_with_retried_and_speculative_attempts(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    writer = MergeTableWriter(plan_write({"path": uri, "primary-key": "id", "bucket": "2"}, DF_SCHEMA, False))
    m0 = writer.write_task(_batches(range(10), "a"), 0, 0, 100)
    first = writer.write_task(_batches(range(10, 20), "b"), 1, 0, 101)  # lost to a speculative copy
    spec = writer.write_task(_batches(range(10, 20), "b"), 1, 1, 102)
    writer.write_task(_batches(range(20, 30), "c"), 2, 0, 103)  # "killed": its message never reaches the driver
    retry = writer.write_task(_batches(range(20, 30), "c"), 2, 1, 104)

    def failing() -> list[pa.RecordBatch]:
        yield from _batches(range(30, 40), "d")
        raise RuntimeError("task died")

    with pytest.raises(RuntimeError):
        writer.write_task(failing(), 3, 0, 105)
    last = writer.write_task(_batches(range(30, 40), "d"), 3, 1, 106)

    writer.commit([m0, spec, first, retry, last])
    table = mt.open_table(uri)
    assert len(table.snapshots()) == 1
    rows = table.read().sort_by("id")
    assert rows.column("id").to_pylist() == list(range(40))
    live = {f.file_name for _, _, f in table.files()}
    assert set(_job_files(tmp_path / "t")) == live  # losers', killed and failed attempts' files are gone
    assert not (tmp_path / "t" / STAGING_DIR).exists()

    writer.commit([m0, spec, retry, last])  # a repeated job commit is a no-op
    assert len(table.snapshots()) == 1
    writer.abort([m0, spec, retry, last])  # abort after the commit published keeps the committed files
    assert table.read().num_rows == 40


def test_abort_deletes_every_file_of_the_job(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())]), ["id"])
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["old"]}))
    before = _job_files(tmp_path / "t")
    writer = MergeTableWriter(plan_write({"path": uri}, DF_SCHEMA, True))
    ok = writer.write_task(_batches(range(5), "n"), 0, 0, 1)
    writer.write_task(_batches(range(5, 9), "n"), 1, 0, 2)  # failed after writing: Spark passes None
    writer.abort([ok, None])
    assert _job_files(tmp_path / "t") == before
    assert mt.open_table(uri).read().column("v").to_pylist() == ["old"]
    assert not (tmp_path / "t" / STAGING_DIR).exists()


def test_failed_first_write_leaves_no_table(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    writer = MergeTableWriter(plan_write({"path": uri, "primary-key": "id"}, DF_SCHEMA, False))
    writer.write_task(_batches(range(5), "n"), 0, 0, 1)
    writer.abort([None])
    assert not mt.table_exists(uri)
    assert not (tmp_path / "t").exists() or not any((tmp_path / "t").iterdir())


def test_commit_of_overwrite_with_no_rows_truncates(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    t = mt.create_table(uri, pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())]), ["id"])
    t.write(pa.table({"id": pa.array([1], pa.int64()), "v": ["old"]}))
    writer = MergeTableWriter(plan_write({"path": uri}, DF_SCHEMA, True))
    writer.commit([writer.write_task([], 0, 0, 1)])
    assert mt.open_table(uri).read().num_rows == 0


def test_a_job_planned_for_a_table_recreated_before_its_commit_commits_nothing(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
    mt.create_table(uri, schema, ["id"]).write(pa.table({"id": pa.array([1], pa.int64()), "v": ["old"]}))
    writer = MergeTableWriter(plan_write({"path": uri}, DF_SCHEMA, False))
    done = writer.write_task(_batches(range(3), "n"), 0, 0, 1)
    shutil.rmtree(uri)
    again = mt.create_table(uri, schema, ["id"])
    with pytest.raises(mt.TableRecreatedError, match="re-created since the write was planned"):
        writer.commit([done])
    assert again.snapshots() == [] and mt.open_table(uri).read().num_rows == 0


def test_write_task_messages_are_picklable(tmp_path: Path) -> None:
    import pickle

    writer = MergeTableWriter(plan_write({"path": str(tmp_path / "t"), "primary-key": "id"}, DF_SCHEMA, False))
    msg = writer.write_task(_batches(range(3), "x"), 0, 0, 1)
    again = pickle.loads(pickle.dumps(msg))
    assert isinstance(again, TaskCommit) and again.file_names == msg.file_names
    assert pickle.loads(pickle.dumps(writer)).job == writer.job


def test_compaction_triggered_by_the_commit_survives_the_sweep(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    opts = {"path": uri, "primary-key": "id", "num-sorted-run.compaction-trigger": "2"}
    writer = MergeTableWriter(plan_write(opts, DF_SCHEMA, False))
    tasks = [writer.write_task(_batches(range(i * 10, i * 10 + 10), "a"), i, 0, i) for i in range(3)]
    writer.write_task(_batches(range(10), "x"), 0, 1, 99)  # a losing attempt: the commit sweeps the job's files
    writer.commit(tasks)
    table = mt.open_table(uri)
    assert any(s.commit_kind is CommitKind.COMPACT for s in table.snapshots())
    assert table.read().sort_by("id").column("id").to_pylist() == list(range(30))
    prefix = writer.job.file_prefixes[0]
    assert not any(f.file_name.startswith(prefix) for _, _, f in table.files())  # compaction output: plain names
    writer.abort(tasks)  # even after a late abort
    assert mt.open_table(uri).read().num_rows == 30
