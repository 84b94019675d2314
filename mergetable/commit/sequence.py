"""Sequence numbers for a new writer: where each bucket's numbering continues."""

from __future__ import annotations

from mergetable.commit.manifests import ManifestIO
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import Snapshot
from mergetable.write.writer import NextSequence


def sequence_seeds(fileio: FileIO, snapshot: Snapshot | None) -> NextSequence:
    """The first sequence number of each (partition, bucket) for a writer based on ``snapshot``.

    One past the largest sequence number among the bucket's live files in ``snapshot`` (0 for a bucket
    it does not hold, and for every bucket when ``snapshot`` is None).

    Args:
        fileio: The table's storage.
        snapshot: The snapshot the writer's rows come after (usually the latest).

    Returns:
        ``next_sequence(partition, bucket)`` as :class:`mergetable.write.writer.TableWriter` takes it.
    """
    max_seq: dict[tuple[tuple[str | None, ...], int], int] = {}
    for e in ManifestIO(fileio).live_entries(snapshot):
        k = (e.partition, e.bucket)
        max_seq[k] = max(max_seq.get(k, -1), e.file.max_sequence_number)
    return lambda partition, bucket: max_seq.get((partition, bucket), -1) + 1
