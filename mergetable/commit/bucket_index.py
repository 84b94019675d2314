"""The HASH index of dynamic-bucket tables on the commit side: loading it for writers, folding writes into it.

A writer assigns its rows against the HASH index of the latest snapshot (:func:`latest_partition_hashes`)
and hands in, per touched bucket, a new HASH index file (the bucket's hashes then) and the files it replaces
(:mod:`mergetable.write.bucket_assign`). The commit (:func:`fold_hash_files`) publishes them in the same
snapshot as the data, on top of whatever was committed since:

* nothing changed in the partition's index since the writer loaded it: the new file replaces the old one;
* a concurrent writer changed the same bucket (or several messages of one commit touch it, Spark tasks): the
  bucket's file becomes the union of both, written by the commit attempt;
* a new key of this write was committed in *another* bucket of the partition since: both would be live,
  so the commit is refused with :class:`~mergetable.core.errors.BucketAssignmentConflictError`
  (``docs/concurrency.md``). Without knowing what the writer loaded (messages adopted from elsewhere)
  every other bucket of the partition is checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.snapshots import SnapshotManager
from mergetable.core.buckets import Partition
from mergetable.core.dynamic_buckets import HASH_INDEX, distinct_hashes, hash_file_bytes, load_hash_file
from mergetable.core.errors import BucketAssignmentConflictError
from mergetable.core.fileio import FileIO
from mergetable.metadata.models import (
    CommitMessage,
    FileKind,
    IndexFileMeta,
    IndexManifestEntry,
    Snapshot,
)
from mergetable.write.bucket_assign import PartitionHashes

IndexBases = Mapping[Partition, frozenset[str]]
"""Per partition, the names of the HASH index files a writer assigned its rows against."""


def hash_files(files: Sequence[IndexFileMeta]) -> list[IndexFileMeta]:
    """The HASH index files among ``files``."""
    return [f for f in files if f.index_type == HASH_INDEX]


def load_hashes(indexes: IndexManifestIO, files: Iterable[IndexFileMeta]) -> np.ndarray:
    """The hashes of HASH index files, sorted and distinct."""
    arrays = [load_hash_file(indexes.fileio, indexes.paths.index_file(f.file_name), f.file_name) for f in files]
    if not arrays:
        return np.empty(0, np.int32)
    return arrays[0] if len(arrays) == 1 else distinct_hashes(np.concatenate(arrays))


class _LazyHashes(Mapping[int, np.ndarray]):
    """Each bucket's hashes, read from its files when first asked for (a writer that keeps the partition's merged
    index reads none)."""

    def __init__(self, indexes: IndexManifestIO, files: Mapping[int, tuple[IndexFileMeta, ...]]) -> None:
        self._indexes, self._files = indexes, files
        self._loaded: dict[int, np.ndarray] = {}

    def __getitem__(self, bucket: int) -> np.ndarray:
        if bucket not in self._loaded:
            self._loaded[bucket] = load_hashes(self._indexes, self._files[bucket])
        return self._loaded[bucket]

    def __iter__(self) -> Iterator[int]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)


def partition_hashes(indexes: IndexManifestIO, snapshot: Snapshot | None, partition: Partition) -> PartitionHashes:
    """The HASH index of ``partition`` in ``snapshot`` (each bucket's hashes read when first looked at)."""
    files: dict[int, tuple[IndexFileMeta, ...]] = {}
    for e in indexes.entries(snapshot):
        if e.partition == partition and e.index_file.index_type == HASH_INDEX:
            files[e.bucket] = (*files.get(e.bucket, ()), e.index_file)
    return PartitionHashes(files, _LazyHashes(indexes, files))


class LatestHashIndex:
    """A writer's :class:`~mergetable.write.bucket_assign.HashIndexLoader`: a partition's HASH index in the
    latest snapshot when it is first asked for."""

    def __init__(self, fileio: FileIO) -> None:
        self.indexes = IndexManifestIO(fileio)
        self.snapshots = SnapshotManager(fileio)

    def __call__(self, partition: Partition) -> PartitionHashes:
        return partition_hashes(self.indexes, self.snapshots.latest(), partition)


@dataclass
class HashFold:
    """What :func:`fold_hash_files` did: the index entries after it, the files it wrote (merged buckets) and the
    messages' files it superseded (unreferenced once the commit is published)."""

    entries: list[IndexManifestEntry]
    written: list[IndexFileMeta] = field(default_factory=list)
    superseded: list[IndexFileMeta] = field(default_factory=list)


def fold_hash_files(
    indexes: IndexManifestIO,
    live: Sequence[IndexManifestEntry],
    entries: Sequence[IndexManifestEntry],
    messages: Sequence[CommitMessage],
    bases: IndexBases | None,
    dropped: Iterable[Partition] = (),
) -> HashFold | None:
    """Fold the messages' HASH index files into ``entries`` (the index after the rest of the commit; ``live``:
    the latest snapshot's), see the module docstring; None when no message has one.

    Raises:
        BucketAssignmentConflictError: a hash would be live in two buckets of a partition.
    """
    mine: dict[tuple[Partition, int], list[CommitMessage]] = {}
    for m in messages:
        if hash_files(m.new_index_files):  # (an append table's row-level operation adds vectors instead)
            mine.setdefault((m.partition, m.bucket), []).append(m)
    if not mine:
        return None
    gone = set(dropped)
    theirs: dict[tuple[Partition, int], list[IndexFileMeta]] = {}
    for e in live:
        if e.index_file.index_type == HASH_INDEX and e.partition not in gone:
            theirs.setdefault((e.partition, e.bucket), []).append(e.index_file)
    out = HashFold([])
    removed: set[str] = set()
    added: list[IndexManifestEntry] = []
    try:
        for partition in sorted({p for p, _ in mine}, key=str):
            buckets = sorted(b for p, b in mine if p == partition)
            live_names = {f.file_name for (p, _), fs in theirs.items() if p == partition for f in fs}
            base = None if bases is None else bases.get(partition)
            quiet = base is not None and live_names == base and all(len(mine[(partition, b)]) == 1 for b in buckets)
            contents: dict[int, np.ndarray] = {}
            for b in buckets:
                msgs = mine[(partition, b)]
                current = theirs.get((partition, b), [])
                replaced = {f.file_name for m in msgs for f in hash_files(m.deleted_index_files)}
                own = [f for m in msgs for f in hash_files(m.new_index_files)]
                removed.update(f.file_name for f in current)
                if len(msgs) == 1 and (not current or {f.file_name for f in current} == replaced):
                    kept = own
                    if not quiet:
                        contents[b] = load_hashes(indexes, own)
                else:  # a concurrent writer (or another task of this commit) changed the bucket too: the union
                    hashes = load_hashes(indexes, [*current, *own])
                    kept = [_write(indexes, hashes)]
                    out.written += kept
                    out.superseded += own
                    contents[b] = hashes
                added += [
                    IndexManifestEntry(kind=FileKind.ADD, partition=partition, bucket=b, index_file=f) for f in kept
                ]
            if not quiet:
                others = {
                    b: [f for f in fs if base is None or f.file_name not in base]
                    for (p, b), fs in theirs.items()
                    if p == partition and b not in contents
                }
                for b, fs in others.items():
                    if fs:
                        contents[b] = load_hashes(indexes, fs)
                _check_disjoint(partition, contents)
    except BaseException:
        indexes.delete_files(out.written)
        raise
    out.entries = [*(e for e in entries if e.index_file.file_name not in removed), *added]
    return out


def _write(indexes: IndexManifestIO, hashes: np.ndarray) -> IndexFileMeta:
    data = hash_file_bytes(hashes)
    name = indexes.paths.new_index_file_name()
    indexes.fileio.write_bytes(indexes.paths.index_file(name), data)
    return IndexFileMeta(index_type=HASH_INDEX, file_name=name, file_size=len(data), row_count=len(hashes))


def _check_disjoint(partition: Partition, contents: Mapping[int, np.ndarray]) -> None:
    """Raise when a hash is in two of the buckets' hash sets (each set distinct)."""
    if len(contents) < 2:
        return
    hashes = np.concatenate(list(contents.values()))
    labels = np.concatenate([np.full(len(v), b, np.int32) for b, v in contents.items()])
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    dup = np.flatnonzero(sorted_hashes[1:] == sorted_hashes[:-1])
    if len(dup):
        i = int(dup[0])
        first, second = sorted(int(labels[order[j]]) for j in (i, i + 1))
        raise BucketAssignmentConflictError(
            f"{len(dup)} new key(s) of this write were placed in a bucket of partition {list(partition)} while a "
            f"concurrent commit placed them in another (buckets {first} and {second}): write the rows again"
        )


__all__ = ["HashFold", "IndexBases", "LatestHashIndex", "fold_hash_files", "load_hashes", "partition_hashes"]
