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
    hash_file_bytes,
    hash_index_file_prefix,
    key_hashes,
    remember_hash_file,
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
    """One partition's index as this writer sees it: the loaded one plus the hashes it placed since."""

    def __init__(self, base: PartitionHashes, merged: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.base = base
        buckets = sorted(base.hashes)
        if merged is None:
            parts = [base.hashes[b] for b in buckets]
            labels = [np.full(len(base.hashes[b]), b, dtype=np.int32) for b in buckets]
            hashes = np.concatenate(parts) if parts else np.empty(0, np.int32)
            order = np.argsort(hashes, kind="stable")  # sorted runs: a merge
            merged = hashes[order], (np.concatenate(labels) if labels else np.empty(0, np.int32))[order]
        self.known: np.ndarray = merged[0]
        self.known_bucket: np.ndarray = merged[1]
        self.counts: dict[int, int] = {b: len(base.hashes[b]) for b in buckets}
        self.added: dict[int, list[np.ndarray]] = {}
        self.written: dict[int, tuple[IndexFileMeta, tuple[IndexFileMeta, ...]]] = {}
        """Per bucket, the HASH file written for it and the files that one replaces."""

    def names_after(self) -> frozenset[str]:
        """The names of the partition's HASH files once the files written here replace theirs."""
        replaced = {f.file_name for _, old in self.written.values() for f in old}
        return (self.base.names - replaced) | {new.file_name for new, _ in self.written.values()}

    def lookup(self, hashes: np.ndarray) -> np.ndarray:
        """The bucket of each hash, -1 where it is not in the index."""
        out = np.full(len(hashes), -1, dtype=np.int32)
        if len(self.known):
            idx = np.searchsorted(self.known, hashes)
            idx[idx == len(self.known)] = 0
            hit = self.known[idx] == hashes
            out[hit] = self.known_bucket[idx[hit]]
        return out

    def add(self, hashes: np.ndarray, buckets: np.ndarray) -> None:
        """Record new (distinct, sorted) hashes and their buckets."""
        merged = np.concatenate([self.known, hashes])
        order = np.argsort(merged, kind="stable")
        self.known = merged[order]
        self.known_bucket = np.concatenate([self.known_bucket, buckets])[order]
        for b in np.unique(buckets).tolist():
            self.added.setdefault(b, []).append(hashes[buckets == b])


_MERGED: OrderedDict[tuple[str, frozenset[str]], tuple[np.ndarray, np.ndarray]] = OrderedDict()
_MERGED_LOCK = threading.Lock()
_MERGED_KEPT = 2


def _merged(key: tuple[str, frozenset[str]], value: tuple[np.ndarray, np.ndarray] | None = None) -> Any:
    """A partition's merged index (sorted hashes, their buckets) by its HASH file names: the last ones a writer of
    this process loaded or left, so that the next write on the same files does not sort them again."""
    with _MERGED_LOCK:
        if value is None:
            return _MERGED.get(key)
        _MERGED[key] = value
        while len(_MERGED) > _MERGED_KEPT:
            _MERGED.popitem(last=False)
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
            base = self.loader(partition)
            key = (self.fileio.uri, base.names)
            index = self._partitions[partition] = _PartitionIndex(base, _merged(key) if base.names else None)
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
        added = index.added.get(bucket) if index is not None else None
        if index is None or not added:
            return (), ()
        hashes = index.known[index.known_bucket == bucket]  # sorted: the bucket's hashes before and now
        data = hash_file_bytes(hashes)
        name = new_file_name(self.index_prefix)
        self.fileio.write_bytes(self.paths.index_file(name), data)
        remember_hash_file(self.fileio, name, hashes)
        meta = IndexFileMeta(index_type=HASH_INDEX, file_name=name, file_size=len(data), row_count=len(data) // 4)
        replaced = tuple(index.base.files.get(bucket, ()))
        index.written[bucket] = (meta, replaced)
        return (meta,), replaced

    def take_bases(self) -> dict[Partition, frozenset[str]]:
        """The index files each loaded partition was assigned against; the assigner then starts afresh (it
        loads the index again when it next writes)."""
        bases = {p: index.base.names for p, index in self._partitions.items()}
        for index in self._partitions.values():
            if index.written and set(index.added) <= set(
                index.written
            ):  # what the partition's index is once this write commits without a concurrent one
                _merged((self.fileio.uri, index.names_after()), (index.known, index.known_bucket))
        self._partitions.clear()
        return bases


__all__ = ["DynamicBucketAssigner", "HashIndexLoader", "PartitionHashes", "place_new_hashes"]
