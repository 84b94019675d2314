"""The bucket assigner of dynamic bucket mode: each row's bucket from its partition's HASH index.

A writer of a dynamic-bucket table (:mod:`mergetable.core.dynamic_buckets`) loads the HASH index of each
partition it writes, once, through a :class:`HashIndexLoader` (the commit tier reads the latest snapshot's
index manifest) and then, per batch, vectorised:

* a key whose hash is in the index keeps its bucket (an update, a delete: a deleted key stays listed, as in
  Paimon, so a key never moves);
* the distinct new hashes fill the buckets that have room (fewer than ``dynamic-bucket.target-row-num``
  hashes), lowest bucket first, then new buckets, lowest free id first, ``target-row-num`` hashes each;
* with ``dynamic-bucket.initial-buckets`` = N, a new hash is placed by the assigner ``hash mod N`` among the
  buckets ``b`` with ``b mod N`` equal to it (Paimon's N assigners), so N buckets fill at once;
* once ``dynamic-bucket.max-buckets`` buckets exist, further new hashes go to one of the assigner's buckets
  chosen by the hash (Paimon picks one at random).

Every row of one key has one hash, so it goes to one bucket. :meth:`DynamicBucketAssigner.index_files`
writes a touched bucket's HASH index file (its hashes before the write plus the new ones) for the commit
message, which names the files it replaces; the commit checks them against concurrent writers
(:mod:`mergetable.commit.bucket_index`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from mergetable.core.buckets import Partition
from mergetable.core.dynamic_buckets import (
    HASH_INDEX,
    MAX_DYNAMIC_BUCKETS,
    forget_hash_files,
    hash_file_bytes,
    hash_index_file_prefix,
    key_hashes,
)
from mergetable.core.errors import OptionsError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory, new_file_name
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import IndexFileMeta


@dataclass(frozen=True)
class PartitionHashes:
    """A partition's HASH index in one snapshot: per bucket its index files and their hashes (sorted int32)."""

    files: Mapping[int, tuple[IndexFileMeta, ...]] = field(default_factory=dict)
    hashes: Mapping[int, np.ndarray] = field(default_factory=dict)

    @property
    def names(self) -> frozenset[str]:
        """The names of its index files."""
        return frozenset(f.file_name for fs in self.files.values() for f in fs)


class HashIndexLoader(Protocol):
    """Loads a partition's HASH index (the commit tier's ``bucket_index.latest_partition_hashes``)."""

    def __call__(self, partition: Partition) -> PartitionHashes: ...


class _PartitionIndex:
    """One partition's index as this writer sees it: the loaded one plus the hashes it placed since.

    The loaded hashes are one sorted array (``known``, int32) with each hash's bucket (``known_bucket``, int16:
    bucket ids are shorts), 6 bytes a key; the hashes this writer places go to a small sorted array of their
    own (``new``, ``new_bucket``), so that a write does not copy the partition's whole index per batch."""

    def __init__(self, base: PartitionHashes, merged: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.base = PartitionHashes(base.files)  # the hashes live on in ``known`` only
        self.known, self.known_bucket = merged if merged is not None else _sorted_index(base.hashes)
        sizes = np.bincount(self.known_bucket) if len(self.known_bucket) else np.zeros(0, np.int64)
        self.base_counts: dict[int, int] = {b: int(sizes[b]) if b < len(sizes) else 0 for b in base.files}
        """Each bucket's hash count in the loaded index."""
        self.counts: dict[int, int] = dict(self.base_counts)
        """Each bucket's hash count with the hashes placed since."""
        self.new: np.ndarray = np.empty(0, np.int32)
        self.new_bucket: np.ndarray = np.empty(0, np.int16)
        self.added: set[int] = set()
        """The buckets this writer placed new hashes in."""
        self.written: dict[int, tuple[IndexFileMeta, tuple[IndexFileMeta, ...]]] = {}
        """Per bucket, the HASH file written for it and the files that one replaces."""

    def names_after(self) -> frozenset[str]:
        """The names of the partition's HASH files once the files written here replace theirs."""
        replaced = {f.file_name for _, old in self.written.values() for f in old}
        return (self.base.names - replaced) | {new.file_name for new, _ in self.written.values()}

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each hash, -1 where it is not in the index."""
        out = np.full(len(hashes), -1, dtype=np.int32)
        for known, bucket in ((self.known, self.known_bucket), (self.new, self.new_bucket)):
            if len(known):
                idx = np.searchsorted(known, hashes)
                idx[idx == len(known)] = 0
                hit = known[idx] == hashes
                out[hit] = bucket[idx[hit]]
        return out

    def add(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Record new (distinct, sorted) hashes and their buckets."""
        self.new, self.new_bucket = _insert_sorted(self.new, self.new_bucket, hashes, buckets.astype(np.int16))
        self.added.update(np.unique(buckets).tolist())

    def bucket_hashes(self, bucket: int) -> np.ndarray:
        """The hashes of ``bucket``, loaded and placed, sorted."""
        loaded, placed = self.known[self.known_bucket == bucket], self.new[self.new_bucket == bucket]
        return np.sort(np.concatenate([loaded, placed])) if len(placed) else loaded

    @property
    def nbytes(self) -> int:
        """The bytes its arrays hold."""
        return sum(a.nbytes for a in (self.known, self.known_bucket, self.new, self.new_bucket))

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """The whole index, loaded and placed hashes in one sorted array (the form ``known`` takes)."""
        if not len(self.new):
            return self.known, self.known_bucket
        return _insert_sorted(self.known, self.known_bucket, self.new, self.new_bucket)


def _insert_sorted(
    hashes: np.ndarray, buckets: np.ndarray, more: np.ndarray, more_buckets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted ``hashes`` (with their ``buckets``) and sorted ``more`` not among them, merged into one sorted
    array: each array's items land at their final place in one pass (``np.insert`` sorts its positions first,
    twice as slow for a partition's index).

    >>> h, b = _insert_sorted(np.array([1, 5, 9], np.int32), np.array([0, 0, 1], np.int16),
    ...                       np.array([0, 6], np.int32), np.array([2, 2], np.int16))
    >>> h.tolist(), b.tolist()
    ([0, 1, 5, 6, 9], [2, 0, 0, 2, 1])
    """
    if not len(more):
        return hashes, buckets
    total = len(hashes) + len(more)
    at = np.searchsorted(hashes, more) + np.arange(len(more))  # where each of ``more`` goes
    rest = np.ones(total, dtype=bool)
    rest[at] = False
    out, out_buckets = np.empty(total, dtype=hashes.dtype), np.empty(total, dtype=buckets.dtype)
    out[at], out_buckets[at] = more, more_buckets
    out[rest], out_buckets[rest] = hashes, buckets
    return out, out_buckets


def _sorted_index(hashes: Mapping[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Every bucket's hashes in one sorted int32 array, and the bucket (int16) of each.

    Sorted as one int64 per hash (the hash above its bucket), which needs no index array and no gathers.

    >>> h, b = _sorted_index({0: np.array([-5, 7], np.int32), 3: np.array([1], np.int32)})
    >>> h.tolist(), b.tolist()
    ([-5, 1, 7], [0, 3, 0])
    """
    if not hashes:
        return np.empty(0, np.int32), np.empty(0, np.int16)
    combined = np.concatenate([(h.astype(np.int64) << 16) | b for b, h in hashes.items()])
    combined.sort()
    return (combined >> 16).astype(np.int32), (combined & 0xFFFF).astype(np.int16)


_MERGED: OrderedDict[tuple[str, frozenset[str]], tuple[np.ndarray, np.ndarray]] = OrderedDict()
_MERGED_LOCK = threading.Lock()
_MERGED_MAX_HASHES = 32 * 1024 * 1024
"""The most hashes the merged indexes kept hold together (6 bytes each: 192 MB); the most recent one is kept
whatever its size."""


def _merged(key: tuple[str, frozenset[str]], value: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
    """A partition's merged index (sorted hashes, their buckets) by its HASH file names: those a writer of this
    process left, most recent first, so that the next write on the same files neither reads nor sorts them
    (its loader reads a file's hashes only when asked: :func:`mergetable.commit.bucket_index.partition_hashes`).
    The writer holds the index it loaded in this form only: its files' hashes are not cached besides."""
    with _MERGED_LOCK:
        if value is None:
            hit = _MERGED.get(key)
            if hit is not None:
                _MERGED.move_to_end(key)
            return hit
        _MERGED[key] = value
        total = sum(len(h) for h, _ in _MERGED.values())
        while total > _MERGED_MAX_HASHES and len(_MERGED) > 1:
            _, (dropped, _) = _MERGED.popitem(last=False)
            total -= len(dropped)
        return value


def place_new_hashes(
    new: np.ndarray, counts: dict[int, int], target: int, assigners: int, max_buckets: int
) -> np.ndarray:
    """The buckets of distinct new hashes ``new`` (int32), given each bucket's hash count ``counts`` (updated).

    >>> counts = {0: 2}
    >>> place_new_hashes(np.array([5, 6, 7, 8], np.int32), counts, 3, 1, -1).tolist(), counts
    ([0, 1, 1, 1], {0: 3, 1: 3})
    >>> place_new_hashes(np.array([9, 10], np.int32), counts, 3, 1, 2).tolist()  # full: spread by hash
    [1, 0]
    """
    out = np.empty(len(new), dtype=np.int32)
    unsigned = new.view(np.uint32)
    group_of = unsigned % np.uint32(assigners)
    limit = MAX_DYNAMIC_BUCKETS if max_buckets == -1 else max_buckets
    for g in range(assigners):
        sel = np.flatnonzero(group_of == g) if assigners > 1 else np.arange(len(new))
        if not len(sel):
            continue
        ids = [b for b in sorted(counts) if b % assigners == g and counts[b] < target]
        caps = [target - counts[b] for b in ids]
        need = len(sel) - sum(caps)
        candidate = g
        while need > 0 and candidate < limit:
            if candidate not in counts:
                ids.append(candidate)
                caps.append(target)
                need -= target
            candidate += assigners
        pos = np.searchsorted(np.cumsum(caps), np.arange(len(sel)), side="right") if ids else np.zeros(0, np.int64)
        inside = pos < len(ids) if ids else np.zeros(len(sel), dtype=bool)
        placed = np.asarray(ids, dtype=np.int32)[pos[inside]] if ids else np.empty(0, np.int32)
        out[sel[inside]] = placed
        for b, n in zip(*np.unique(placed, return_counts=True), strict=True):
            counts[int(b)] = counts.get(int(b), 0) + int(n)
        rest = sel[~inside]
        if len(rest):
            if max_buckets == -1:
                raise OptionsError(
                    "dynamic-bucket.target-row-num",
                    f"a partition would need more than {MAX_DYNAMIC_BUCKETS} buckets of {target} keys: raise it",
                )
            pool = np.asarray(sorted(b for b in counts if b % assigners == g), dtype=np.int32)
            chosen = pool[(unsigned[rest] // np.uint32(assigners)) % np.uint32(len(pool))]
            out[rest] = chosen
            for b, n in zip(*np.unique(chosen, return_counts=True), strict=True):
                counts[int(b)] += int(n)
    return out


class DynamicBucketAssigner:
    """Assigns buckets to the rows of a dynamic-bucket table (see the module docstring).

    Example:
        >>> import tempfile, pyarrow as pa
        >>> from mergetable.core.fileio import FileIO
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64())]), ["id"],
        ...                             options={"dynamic-bucket.target-row-num": "2"})
        >>> a = DynamicBucketAssigner(FileIO(tempfile.mkdtemp()), schema, lambda p: PartitionHashes())
        >>> rows = pa.table({"id": [1, 2, 3, 1]})
        >>> a.assign(rows, np.zeros(4, np.int64), [()]).tolist()
        [0, 0, 1, 0]
    """

    def __init__(self, fileio: FileIO, schema: TableSchema, loader: HashIndexLoader) -> None:
        self.fileio = fileio
        self.schema = schema
        self.paths = PathFactory(fileio.root)
        self.loader = loader
        opts = schema.table_options
        self.target = opts.dynamic_bucket_target_row_num
        self.assigners = opts.dynamic_bucket_initial_buckets or 1
        self.max_buckets = opts.dynamic_bucket_max_buckets
        self.index_prefix = hash_index_file_prefix(opts.data_file_prefix)
        self._partitions: dict[Partition, _PartitionIndex] = {}

    def _partition(self, partition: Partition) -> _PartitionIndex:
        index = self._partitions.get(partition)
        if index is None:
            base = self.loader(partition)  # the files; their hashes are read only if no merged index is kept
            key = (self.fileio.uri, base.names)
            index = self._partitions[partition] = _PartitionIndex(base, _merged(key) if base.names else None)
            forget_hash_files(self.fileio, base.names)  # held once, merged, by this writer and then _MERGED
        return index

    def assign(self, table: pa.Table, part_ids: np.ndarray, parts: Sequence[Partition]) -> np.ndarray:
        """The bucket of each row of ``table`` (row ``i`` in partition ``parts[part_ids[i]]``), int32."""
        keys = self.schema.trimmed_primary_keys
        hashes = key_hashes([table.column(k) for k in keys], keys)
        out = np.empty(len(hashes), dtype=np.int32)
        if len(parts) == 1:
            groups = [(0, np.arange(len(hashes)))]
        else:
            order = np.argsort(part_ids, kind="stable")
            bounds = np.flatnonzero(np.diff(part_ids[order])) + 1
            groups = [(int(part_ids[rows[0]]), rows) for rows in np.split(order, bounds)]
        for pid, rows in groups:
            out[rows] = self._assign_partition(self._partition(parts[pid]), hashes[rows])
        return out

    def _assign_partition(self, index: _PartitionIndex, hashes: np.ndarray) -> np.ndarray:
        distinct, inverse = np.unique(hashes, return_inverse=True)  # sorted lookups stay in cache
        buckets = index.lookup(distinct)
        missing = buckets < 0
        if missing.any():
            new = distinct[missing]
            placed = place_new_hashes(new, index.counts, self.target, self.assigners, self.max_buckets)
            index.add(new, placed)
            buckets[missing] = placed
        return buckets[inverse.reshape(-1)]

    def index_files(
        self, partition: Partition, bucket: int
    ) -> tuple[tuple[IndexFileMeta, ...], tuple[IndexFileMeta, ...]]:
        """For a touched bucket: its new HASH index file (written now) and the files it replaces; ``((), ())``
        when the write added no hash to it."""
        index = self._partitions.get(partition)
        if index is None or bucket not in index.added:
            return (), ()
        hashes = index.bucket_hashes(bucket)  # sorted: the bucket's hashes before and now
        data = hash_file_bytes(hashes)
        name = new_file_name(self.index_prefix)
        self.fileio.write_bytes(self.paths.index_file(name), data)
        replaced = tuple(index.base.files.get(bucket, ()))
        meta = IndexFileMeta(index_type=HASH_INDEX, file_name=name, file_size=len(data), row_count=len(data) // 4)
        index.written[bucket] = (meta, replaced)
        return (meta,), replaced

    @property
    def held_bytes(self) -> int:
        """The bytes of the partitions' indexes it holds (the write buffer counts them:
        :class:`mergetable.write.writer.TableWriter`)."""
        return sum(index.nbytes for index in self._partitions.values())

    def take_bases(self) -> dict[Partition, frozenset[str]]:
        """The index files each loaded partition was assigned against; the assigner then starts afresh (it
        loads the index again when it next writes)."""
        bases = {p: index.base.names for p, index in self._partitions.items()}
        for index in self._partitions.values():
            if index.added <= set(index.written):  # the partition's index once this write commits alone
                index.known, index.known_bucket = _merged((self.fileio.uri, index.names_after()), index.merged())
                index.new, index.new_bucket = index.new[:0], index.new_bucket[:0]  # one partition's copy at a time
        self._partitions.clear()
        return bases


__all__ = ["DynamicBucketAssigner", "HashIndexLoader", "PartitionHashes", "place_new_hashes"]
