"""Spark writes into dynamic-bucket tables (``bucket`` = -1): which task places which new key, and against what.

A new key of a dynamic-bucket table goes to a bucket with room (:mod:`mergetable.write.bucket_assign`); if two
tasks of one job placed the same new key, each against what it alone saw, the key could land in two buckets.
As in Paimon, the job's rows are split into **channels** by key hash, and channel ``c`` owns, for new keys, the
buckets ``b`` with ``b % channels == c``:

* :func:`mergetable.spark.write` shuffles the rows by (partition, channel) (:func:`shuffle_by_channel`; a
  cross-partition table's by channel alone: :mod:`mergetable.spark.cross_partition`), so
  every key of a partition reaches exactly one task, which fills its channels' buckets to
  ``dynamic-bucket.target-row-num`` as the Python writer does (the exact assigner). The channel count is
  ``dynamic-bucket.initial-buckets`` if set, else the number of write tasks (``num_partitions``, else
  Spark's default parallelism), at most ``dynamic-bucket.max-buckets``; the write passes it to its tasks
  as the write option :data:`CHANNELS_OPTION`.
* ``df.write.format("mergetable")`` and the streaming sink get the rows wherever they are: one key may reach
  several tasks. A task then places a new key by its hash and the base index alone (:class:`OpenBucketAssigner`):
  every new key of channel ``c`` goes to the lowest bucket of ``c`` that had room in the base snapshot (or the
  lowest unused bucket of ``c``), whichever task sees it. One key gets one bucket; a bucket may pass the target
  row count within one write, and the next write opens the next bucket. The channel count is
  ``dynamic-bucket.initial-buckets`` (default 1).

Every task assigns against the HASH index of the snapshot the driver pinned when it planned the write (a
streaming micro-batch: the latest one), and an overwrite against an empty one, so a retried or speculative
attempt places the same keys in the same buckets. Each attempt's message carries its index deltas; the driver
commits one attempt per task, unions the index files of buckets that several tasks touched, and refuses the
commit (:class:`~mergetable.core.errors.BucketAssignmentConflictError`) if a key would be live in two buckets
(:mod:`mergetable.commit.bucket_index`).

>>> open_buckets(np.array([0, 1, 2, 3], np.int32), {0: 5, 1: 1}, target=5, channels=2, max_buckets=-1).tolist()
[2, 1, 2, 1]
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from mergetable.commit.bucket_index import partition_hashes
from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import Partition
from mergetable.core.dynamic_buckets import MAX_DYNAMIC_BUCKETS
from mergetable.core.errors import OptionsError, SnapshotNotFoundError
from mergetable.core.fileio import FileIO
from mergetable.core.option_map import OptionMap
from mergetable.core.paths import INDEX_FILE_PREFIX
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import Snapshot
from mergetable.spark.bucketing import unused_name, with_channel
from mergetable.write.bucket_assign import DynamicBucketAssigner, HashIndexLoader, PartitionHashes, _PartitionIndex

CHANNELS_OPTION = "dynamic-bucket.assigner-channels"
"""Write option (lower case, as Spark passes keys) set by :func:`mergetable.spark.write`: the rows arrive shuffled
by (partition, key hash mod this many channels), so each task may place its new keys exactly."""
CHANNEL_COLUMN = "_mergetable_channel"
"""The channel column :func:`shuffle_by_channel` adds for its shuffle (and drops before the write); a suffix is added
when the DataFrame already has a column of that name."""
log = logging.getLogger(__name__)


def take_channels(options: Mapping[str, str]) -> tuple[dict[str, str], int | None]:
    """``options`` without :data:`CHANNELS_OPTION`, and its value (None when absent).

    >>> take_channels({"dynamic-bucket.assigner-channels": "4", "bucket": "-1"})
    ({'bucket': '-1'}, 4)

    Raises:
        OptionsError: the value is not a positive integer.
    """
    opts = OptionMap.of(options)
    if CHANNELS_OPTION not in opts:
        return dict(options), None
    value = opts[CHANNELS_OPTION]
    try:
        channels = int(value)
    except ValueError:
        channels = 0
    if channels < 1:
        raise OptionsError(CHANNELS_OPTION, f"must be a positive integer, got '{value}'")
    return dict(opts.without(CHANNELS_OPTION)), channels


def channel_count(schema: TableSchema, tasks: int) -> int:
    """How many assigner channels a shuffled write of ``tasks`` tasks uses (see the module docstring).

    >>> import pyarrow as pa
    >>> s = TableSchema.create(pa.schema([("id", pa.int64())]), ["id"], options={"dynamic-bucket.max-buckets": "3"})
    >>> channel_count(s, 8)
    3
    """
    opts = schema.table_options
    channels = opts.dynamic_bucket_initial_buckets or tasks
    if opts.dynamic_bucket_max_buckets != -1:
        channels = min(channels, opts.dynamic_bucket_max_buckets)
    return max(1, min(channels, MAX_DYNAMIC_BUCKETS))


def shuffle_by_channel(
    df: DataFrame,
    schema: TableSchema,
    num_partitions: int | None,
    task_key: Callable[[Column, int, int], Column],
) -> tuple[DataFrame, int]:
    """``df`` repartitioned so that every (partition, channel) group is in one task, and the channel count.

    Without partition columns channel ``c`` goes to task ``c % tasks`` (``task_key``, as
    :func:`mergetable.spark.bucketing.bucket_task_key`); with them, (partition, channel) groups are hashed to tasks.
    A cross-partition table's rows are shuffled by channel alone, as if it had no partition columns, so every
    row of a key reaches one task whatever partition it names (:mod:`mergetable.spark.cross_partition`).
    """
    spark = df.sparkSession
    shuffle_tasks = int(str(spark.conf.get("spark.sql.shuffle.partitions")))
    channels = channel_count(schema, num_partitions or spark.sparkContext.defaultParallelism)
    name = unused_name(CHANNEL_COLUMN, df.columns)
    channel = F.col(name)
    if schema.partition_keys and not schema.is_cross_partition:
        by = [*(F.col(p) for p in schema.partition_keys), channel]
    else:
        by = [task_key(channel, channels, num_partitions or shuffle_tasks)]
    with_channels = with_channel(df, schema, name, channels)
    shuffled = with_channels.repartition(num_partitions, *by) if num_partitions else with_channels.repartition(*by)
    return shuffled.drop(name), channels


# -- tasks --------------------------------------------------------------------------------------------------
def open_buckets(
    new: np.ndarray, counts: Mapping[int, int], target: int, channels: int, max_buckets: int
) -> np.ndarray:
    """The buckets of distinct new hashes ``new`` (int32) by their hash and the base index's bucket sizes
    ``counts`` alone: channel ``hash % channels``'s lowest bucket with room, else its lowest unused one, else
    (``max_buckets`` reached) one of its buckets chosen by the hash.

    >>> open_buckets(np.array([4, 5], np.int32), {0: 1, 1: 1}, target=1, channels=1, max_buckets=2).tolist()
    [0, 1]
    """
    limit = MAX_DYNAMIC_BUCKETS if max_buckets == -1 else max_buckets
    unsigned = new.view(np.uint32)
    group = unsigned % np.uint32(channels)
    out = np.empty(len(new), dtype=np.int32)
    for g in np.unique(group).tolist():
        sel = group == g
        owned = sorted(b for b in counts if b % channels == g)
        room = [b for b in owned if counts[b] < target]
        free = room[0] if room else next((b for b in range(g, limit, channels) if b not in counts), None)
        if free is not None:
            out[sel] = free
        elif owned:
            pool = np.asarray(owned, dtype=np.int32)
            out[sel] = pool[(unsigned[sel] // np.uint32(channels)) % np.uint32(len(pool))]
        else:
            raise OptionsError("dynamic-bucket.max-buckets", f"no bucket below {limit} for channel {g}")
    return out


class OpenBucketAssigner(DynamicBucketAssigner):
    """The assigner of a task whose rows are not shuffled by channel: new keys by :func:`open_buckets`, so
    every task of the job places a key in the same bucket."""

    def _place(self, index: _PartitionIndex, new: np.ndarray) -> np.ndarray:
        return open_buckets(new, dict(index.base_counts), self.target, self.assigners, self.max_buckets)


class SnapshotHashIndex:
    """A task's :class:`~mergetable.write.bucket_assign.HashIndexLoader`: a partition's HASH index in the
    snapshot ``snapshot_id`` (the latest one when None, or when that snapshot has expired meanwhile: the
    commit then checks the placement against what was committed since)."""

    def __init__(self, fileio: FileIO, snapshot_id: int | None, latest: bool = False) -> None:
        self.indexes = IndexManifestIO(fileio)
        snapshots = SnapshotManager(fileio)
        if latest:
            self.snapshot = snapshots.latest()
        elif snapshot_id is None:
            self.snapshot = None
        else:
            try:
                self.snapshot = snapshots.load(snapshot_id)
            except SnapshotNotFoundError:
                log.warning("snapshot %s of the write's plan is gone: placing keys against the latest", snapshot_id)
                self.snapshot = snapshots.latest()

    def __call__(self, partition: Partition) -> PartitionHashes:
        return partition_hashes(self.indexes, self.snapshot, partition)


def task_assigner(
    fileio: FileIO,
    schema: TableSchema,
    *,
    base_snapshot_id: int | None,
    overwrite: bool,
    channels: int | None,
    latest: bool = False,
    tag: str = "",
) -> DynamicBucketAssigner:
    """The assigner of one task attempt of a write into a dynamic-bucket table (see the module docstring).

    ``channels``: the rows are shuffled by that many channels (exact placement); None: they are not.
    ``latest``: assign against the latest snapshot instead of ``base_snapshot_id`` (streaming micro-batches).
    ``tag``: the job's file tag, in the names of the HASH index files the attempt writes (:func:`index_prefix`),
    so the driver finds those of attempts that lost as it finds their data files.
    """
    loader: HashIndexLoader
    if overwrite:
        loader = _empty
    else:
        loader = SnapshotHashIndex(fileio, base_snapshot_id, latest)
    if channels is None:
        assigner: DynamicBucketAssigner = OpenBucketAssigner(fileio, schema, loader)
    else:
        assigner = DynamicBucketAssigner(fileio, schema, loader)
        most = assigner.max_buckets
        assigner.assigners = channels if most == -1 else min(channels, most)  # every channel owns a bucket
    if tag:
        assigner.index_prefix = index_prefix(tag)
    return assigner


def index_prefix(tag: str) -> str:
    """The name prefix of the HASH index files a job's tasks write (``tag``: the job's file tag).

    >>> index_prefix("0123456789abcdef-")
    'index-0123456789abcdef-'
    """
    return INDEX_FILE_PREFIX + tag


def live_index_files(fileio: FileIO, snapshot: Snapshot | None) -> set[str]:
    """The names of the index files ``snapshot`` references (a job's tagged HASH files among them)."""
    return {e.index_file.file_name for e in IndexManifestIO(fileio).entries(snapshot)}


def _empty(partition: Partition) -> PartitionHashes:
    return PartitionHashes()


__all__ = [
    "CHANNELS_OPTION",
    "OpenBucketAssigner",
    "SnapshotHashIndex",
    "channel_count",
    "index_prefix",
    "live_index_files",
    "open_buckets",
    "shuffle_by_channel",
    "take_channels",
    "task_assigner",
]
