"""A reader that resolves the latest snapshot each time a query runs (``resolve-snapshot=per-query``).

PySpark (4.x) plans a Python data source's partitions once per loaded relation and keeps them for every
later query of it when nothing is pushed down, so a temporary view made from a loaded DataFrame keeps
reading the snapshot its partitions were planned on. This reader's partitions name no snapshot: they are
``slots``; each task resolves the latest snapshot when it runs, plans it, and reads the buckets that hash to
its slot. Every bucket is read whole from one snapshot by one task, so no key is lost or read twice; a query
that runs while a commit lands may read some buckets before that commit and some after it (a loaded
DataFrame, which reads one pinned snapshot, gives snapshot isolation).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from mergetable.spark.reader import MergeTableReader, SplitPartition
from mergetable.table import open_table

MAX_SLOTS = 128


class SlotPartition(InputPartition):
    def __init__(self, slot: int, slots: int) -> None:
        super().__init__((slot, slots))
        self.slot, self.slots = slot, slots


def slot_of(partition: tuple[str | None, ...], bucket: int, slots: int) -> int:
    """A stable slot for a bucket (the same in every Python worker)."""
    return zlib.crc32(repr((partition, bucket)).encode()) % slots


class LatestPerQueryReader(MergeTableReader):
    """Reads the latest snapshot as of each task's start; see the module docstring for the isolation."""

    def partitions(self) -> Sequence[InputPartition]:
        buckets = {(p, b) for p, b, _ in self.table.files()}
        slots = max(1, min(MAX_SLOTS, len(buckets)))
        return [SlotPartition(i, slots) for i in range(slots)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        slot = getattr(partition, "slot", None)
        if not isinstance(partition, SlotPartition) or slot is None:
            return
        table = open_table(self.table.uri, self.table.fileio.storage_options)
        latest = table.latest_snapshot_id()
        if latest is None:
            return
        self.table = table
        for split in self._plan_snapshot(table, latest):
            if slot_of(split.partition, split.bucket, partition.slots) == slot:
                yield from super().read(SplitPartition(split))


__all__ = ["MAX_SLOTS", "LatestPerQueryReader", "SlotPartition", "slot_of"]
