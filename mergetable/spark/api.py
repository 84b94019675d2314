"""Python helpers around the data source: :func:`register`, :func:`read` and :func:`write`.

They need a ``SparkSession``, so their examples are shown but not run as doctests; the same calls run
in ``tests/spark``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Sequence
from typing import Any

from py4j.protocol import Py4JError  # type: ignore[import-untyped]
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from mergetable.core.errors import OptionsError
from mergetable.core.option_map import OptionMap
from mergetable.core.predicates import Filters
from mergetable.core.schema import TableSchema
from mergetable.core.txn import make_txn
from mergetable.spark.bucketing import bucket_task_key, unused_name, with_bucket
from mergetable.spark.changes import split_audit_log
from mergetable.spark.dynamic import CHANNELS_OPTION, shuffle_by_channel
from mergetable.spark.native import native_read
from mergetable.spark.native_write import native_append
from mergetable.spark.options import ReadOptions, WriteOptions
from mergetable.spark.source import MergeTableDataSource
from mergetable.spark.system import RESOLVE_SNAPSHOT, without_resolve_option
from mergetable.spark.types import arrow_schema_of
from mergetable.table import open_table, table_exists


def register(spark: SparkSession) -> None:
    """Register the ``mergetable`` data source format in ``spark``, unless the session already has it.

    Only needed where the ``pyspark_mergetable`` package (which Spark discovers by itself) is not installed.
    A session that already knows the format (registered before, or found installed) is left alone: Spark
    would log that the new registration replaced the previous one. Every helper calls it, so a session of
    its own (``newSession()``) gets the format too.

    Args:
        spark: the session to register the format in.

    Example:
        >>> register(spark)  # doctest: +SKIP
        >>> spark.read.format("mergetable").load("/tmp/tables/orders").count()  # doctest: +SKIP
        2
    """
    if not has_format(spark):
        spark.dataSource.register(MergeTableDataSource)


def has_format(spark: SparkSession) -> bool:
    """Whether ``spark`` resolves ``format("mergetable")`` already (registered in it, or found installed).

    Asked of the session's data source manager in the JVM; a session that cannot be asked (Spark Connect)
    answers False, so it is registered (a repeated registration there only logs a warning).
    """
    try:
        manager = spark._jsparkSession.sessionState().dataSourceManager()
        return bool(manager.dataSourceExists(MergeTableDataSource.name()))
    except (AttributeError, Py4JError):  # no JVM session to ask: register
        return False


def register_view(
    spark: SparkSession, name: str, uri: str, options: dict[str, Any] | None = None, **kwargs: Any
) -> None:
    """Create (or replace) the temporary view ``name`` over the table at ``uri``, showing the latest snapshot
    at each query (a view made from a loaded DataFrame keeps the snapshot it was loaded on).

    Args:
        spark: the session.
        name: the view's name.
        uri: the table's location.
        options: read options as in ``spark.read.option(...)`` (a time-travel option pins the view).
        **kwargs: more read options, with ``_`` for ``-``.

    Example:
        >>> register_view(spark, "orders", "/tmp/tables/orders")  # doctest: +SKIP
        >>> spark.sql("SELECT count(*) FROM orders").collect()  # doctest: +SKIP
        [Row(count(1)=2)]
    """
    opts = {**_option_map(options, kwargs), RESOLVE_SNAPSHOT: "per-query"}
    check_read_options(uri, opts)
    register(spark)
    spark.read.format("mergetable").options(**opts).load(uri).createOrReplaceTempView(name)


def check_read_options(uri: str, options: dict[str, str]) -> None:
    """Parse a read's options here, in the caller's process, so that a bad one raises mergetable's error
    directly rather than inside Spark's ``PYTHON_DATA_SOURCE_ERROR`` (see :mod:`mergetable.spark.errors`)."""
    ReadOptions.parse({**without_resolve_option(options), "path": split_audit_log(uri)[0]})


def session_modes(spark: SparkSession, opts: dict[str, str], overwrite: bool) -> None:
    """Pass the session's ``partitionOverwriteMode`` and ``caseSensitive`` to a write unless it sets them."""
    given = OptionMap.of(opts)
    if overwrite and "partitionoverwritemode" not in given and "dynamic-partition-overwrite" not in given:
        opts["partitionOverwriteMode"] = str(spark.conf.get("spark.sql.sources.partitionOverwriteMode", "static"))
    if "casesensitive" not in given:
        opts["caseSensitive"] = str(spark.conf.get("spark.sql.caseSensitive", "false")).lower()


def _option_map(options: dict[str, Any] | None, kwargs: dict[str, Any]) -> dict[str, str]:
    out = {str(k): _text(v) for k, v in (options or {}).items()}
    for k, v in kwargs.items():
        out[k.replace("_", "-")] = _text(v)
    return out


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return str(v)


def read(
    spark: SparkSession,
    uri: str,
    columns: Sequence[str] | None = None,
    filter: Filters | None = None,
    options: dict[str, Any] | None = None,
    *,
    native: bool = True,
    **kwargs: Any,
) -> DataFrame:
    """``spark.read.format("mergetable").load(uri)`` with a column list and a pruning DNF ``filter``, its
    raw-convertible sections read by Spark's own Parquet reader.

    Sections that need no merge (one sorted run without retracts: a compacted bucket, say) are read with
    ``spark.read.parquet`` and the others through the data source, pinned to the same snapshot
    (:mod:`mergetable.spark.native`): a compacted table then scans, counts and filters at the speed of Spark's
    Parquet source, with its column pruning and filter pushdown. A deletion-vector table's files are read so too,
    their marked rows dropped inside Spark (:mod:`mergetable.spark.vectors`). The rows are the data source's; the
    columns are all nullable when some files are read so. Without a ``filter``, a read that is all Parquet scans
    answers ``count()`` from the table's metadata (:mod:`mergetable.spark.counted`).

    Args:
        spark: the session.
        uri: the table's location (local path, ``file://``, ``s3://`` …).
        columns: the columns to read (all when ``None``).
        filter: a filter in the pyarrow DNF convention (``[("dt", "=", "2024-05-01"), ("id", ">", 10)]``),
            applied exactly, with partition, bucket and key-range pruning, whatever Spark's pushdown
            configuration is.
        options: read options as in ``spark.read.option(...)``.
        native: read raw-convertible sections with Spark's Parquet reader where that returns the same rows
            (local tables, plain reads; see :mod:`mergetable.spark.native`). ``False``: the data source only.
        **kwargs: more read options, with ``_`` for ``-`` (``snapshot_id=3``, ``tag="t1"``).

    Returns:
        The merged rows of the table as a ``DataFrame``.

    Raises:
        OptionsError: an empty ``filter`` or a bad option, raised here rather than when Spark plans the read.

    Example:
        >>> df = read(spark, "/tmp/tables/orders", columns=["total"], filter=[("id", ">", 1)],
        ...           snapshot_id=1)  # doctest: +SKIP
        >>> df.collect()  # doctest: +SKIP
        [Row(total=5.5)]
    """
    opts = _option_map(options, kwargs)
    if columns is not None:
        opts["columns"] = ",".join(columns)
    if filter is not None:
        opts["filter"] = json.dumps(_filter_json(filter), default=str)
    check_read_options(uri, opts)
    register(spark)
    if native and (df := native_read(spark, uri, opts)) is not None:
        return df
    return spark.read.format("mergetable").options(**opts).load(uri)


def _filter_json(filters: Filters) -> list[Any]:
    if not filters:
        raise OptionsError("filter", "is empty")
    if isinstance(filters[0], tuple):
        return [list(p) for p in filters]
    return [[list(p) for p in conj] for conj in filters]


def write(
    df: DataFrame,
    uri: str,
    mode: str = "append",
    options: dict[str, Any] | None = None,
    num_partitions: int | None = None,
    txn_app_id: str | None = None,
    txn_version: int | None = None,
    *,
    native: bool = True,
    **kwargs: Any,
) -> None:
    """Write ``df`` to the table at ``uri`` with one Spark task per (partition, bucket) group.

    The rows are first repartitioned by the table's partition columns and mergetable's bucket (computed by
    Spark's own expressions for integer, boolean, date and timestamp keys, by an Arrow UDF for others: see
    :mod:`mergetable.spark.bucketing`), so every bucket is written by exactly one task and gets few level-0
    files (plain ``df.write`` lets every task write every bucket). Without partition columns, bucket ``b``
    goes to task ``b % num_partitions`` (:func:`~mergetable.spark.bucketing.bucket_task_key`), so the buckets
    are spread evenly over the tasks; (partition, bucket) groups are hashed to tasks. Rows of one key then all
    reach one task, but in no defined order across the input partitions: use ``sequence.field`` where the
    order of updates to a key matters.

    An append table without fixed buckets (``bucket`` -1) is written by Spark's own Parquet writer, its files
    then committed as one snapshot, at the speed of ``df.write.parquet``
    (:func:`~mergetable.spark.native_write.native_append`), where that gives the data source's result: a local
    table, columns of the table's types among those Spark's Parquet writer stores as mergetable reads them, no
    row-kind column, ``mergeSchema`` or case renaming. Other writes go through the data source.

    Args:
        df: the rows to write (with a row-kind column when ``row-kind-column`` names one).
        uri: the table's location; the table is created on the first write (without ``primary_key``: an
            append table, whose rows are written where they are, no shuffle).
        mode: ``append`` or ``overwrite``.
        options: write and table options as in ``df.write.option(...)``
            (``{"fields.total.aggregate-function": "sum"}``).
        num_partitions: the number of write tasks (Spark's default shuffle partitions when ``None``).
        txn_app_id, txn_version: make the write idempotent (Delta's ``txnAppId``/``txnVersion``): it is
            skipped when that application already committed this version or a later one.
        native: write an append table with Spark's Parquet writer where that applies (see above). ``False``:
            the data source only.
        **kwargs: more options, with ``_`` for ``-`` (``primary_key="id"``, ``bucket=4``).

    Raises:
        OptionsError: a bad ``mode`` or option.

    Example:
        >>> df = spark.createDataFrame([(1, 10.0), (2, 5.5)], "id long, total double")  # doctest: +SKIP
        >>> write(df, "/tmp/tables/orders", primary_key="id", bucket=2,
        ...       options={"merge-engine": "aggregation", "fields.total.aggregate-function": "sum"})  # doctest: +SKIP
        >>> write(df, "/tmp/tables/orders")  # doctest: +SKIP
        >>> sorted(read(spark, "/tmp/tables/orders").collect())  # doctest: +SKIP
        [Row(id=1, total=20.0), Row(id=2, total=11.0)]
    """
    if mode not in ("append", "overwrite"):
        raise OptionsError("mode", f"must be 'append' or 'overwrite', got '{mode}'")
    opts = _option_map(options, kwargs)
    if txn_app_id is not None or txn_version is not None:
        make_txn(txn_app_id, txn_version)
        opts.update(txnAppId=str(txn_app_id), txnVersion=str(txn_version))
    register(df.sparkSession)  # a session of its own (newSession, another thread's) may lack the format
    session_modes(df.sparkSession, opts, overwrite=mode == "overwrite")
    wo = WriteOptions.parse({**opts, "path": uri}, list(df.columns))
    if table_exists(uri, wo.storage):
        schema: TableSchema = open_table(uri, wo.storage).table_schema
    else:
        rk = wo.row_kind_column or ("_row_kind" if "_row_kind" in df.columns else None)
        data = df.drop(rk).schema if rk else df.schema
        schema = TableSchema.create(arrow_schema_of(data), wo.primary_key, wo.partition_keys or (), wo.table_options)
    if schema.is_dynamic_bucket:  # every key to one task, which places its new keys (mergetable.spark.dynamic)
        task_key = functools.partial(bucket_task_key, df.sparkSession)
        shuffled, channels = shuffle_by_channel(df, schema, num_partitions, task_key)
        opts[CHANNELS_OPTION] = str(channels)
        shuffled.write.format("mergetable").mode(mode).options(**opts).save(uri)
        return
    if native and schema.is_append_table and schema.table_options.bucket == -1 and native_append(df, uri, mode, opts):
        return
    if schema.table_options.bucket < 1:  # no buckets (append), or postponed ones: written where the rows are
        df.write.format("mergetable").mode(mode).options(**opts).save(uri)
        return
    name = unused_name(BUCKET_COLUMN, df.columns)
    bucketed = with_bucket(df, schema, name)
    bucket = F.col(name)
    partition_cols: list[Column] = [F.col(p) for p in schema.partition_keys]
    if partition_cols:  # (partition, bucket) groups are not known in advance: hashed to tasks
        by = [*partition_cols, bucket]
    else:
        tasks = num_partitions or int(str(df.sparkSession.conf.get("spark.sql.shuffle.partitions")))
        by = [bucket_task_key(df.sparkSession, bucket, schema.table_options.bucket, tasks)]
    shuffled = bucketed.repartition(num_partitions, *by) if num_partitions else bucketed.repartition(*by)
    shuffled.drop(name).write.format("mergetable").mode(mode).options(**opts).save(uri)


BUCKET_COLUMN = "_mergetable_bucket"
"""The bucket column :func:`write` adds for its shuffle (and drops before the write); a suffix is added when the
DataFrame already has a column of that name."""


def foreach_batch(
    uri: str, app_id: str, options: dict[str, Any] | None = None, **kwargs: Any
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function writing each micro-batch to ``uri`` exactly once, in any output mode.

    Each batch is written by :func:`write` with ``txn_app_id=app_id`` and ``txn_version=<batch id>``, so a
    batch Spark replays after a failure is skipped. ``app_id`` must stay the same across restarts of the
    query, and change when its checkpoint is deleted (the batch ids then start again at 0).

    >>> df.writeStream.outputMode("update").foreachBatch(foreach_batch(uri, "orders")).start()  # doctest: +SKIP
    """
    make_txn(app_id, 0, "app_id")

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        write(batch, uri, "append", options, txn_app_id=app_id, txn_version=batch_id, **kwargs)

    return write_batch


__all__ = [
    "check_read_options",
    "foreach_batch",
    "has_format",
    "read",
    "register",
    "register_view",
    "session_modes",
    "write",
]
