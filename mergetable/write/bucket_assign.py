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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from mergetable.core.buckets import Partition
from mergetable.core.dynamic_buckets import (
    HASH_FILE_DTYPE,
    HASH_INDEX,
    MAX_DYNAMIC_BUCKETS,
    distinct_inverse,
    forget_hash_files,
    hash_file_bytes,
    hash_index_file_prefix,
    key_hashes,
)
from mergetable.core.errors import OptionsError
from mergetable.core.fileio import FileIO
from mergetable.core.paths import PathFactory, new_file_name
from mergetable.core.schema import TableSchema
from mergetable.core.threads import split_searchsorted
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


_BUCKET_BITS = 16
_BUCKET_MASK = (1 << _BUCKET_BITS) - 1

Placer = Callable[["_PartitionIndex", np.ndarray], np.ndarray]
"""The buckets (int32) of distinct new hashes of a partition, given its index (a dynamic bucket assigner's rule)."""


class _PartitionIndex:
    """One partition's index as this writer sees it: the loaded one plus the hashes it placed since.

    The index is a sorted int64 array of entries, each a hash above its bucket (``hash << 16 | bucket``: bucket
    ids are shorts), 8 bytes a key, so that a lookup is one binary search and an insertion moves one array. A
    batch that brings many new hashes (1/16 of the index or more) is merged into it (``known``) at the places its
    lookup found; a small one goes to a small sorted array of its own (``new``), so that a write of many small
    batches does not copy the partition's whole index per batch."""

    def __init__(self, base: PartitionHashes, merged: np.ndarray | None = None) -> None:
        self.base = PartitionHashes(base.files)  # the hashes live on in ``known`` only
        self.known: np.ndarray = merged if merged is not None else _sorted_index(base.hashes)
        sizes = np.bincount(self.known & _BUCKET_MASK) if len(self.known) else np.zeros(0, np.int64)
        self.base_counts: dict[int, int] = {b: int(sizes[b]) if b < len(sizes) else 0 for b in base.files}
        """Each bucket's hash count in the loaded index."""
        self.counts: dict[int, int] = dict(self.base_counts)
        """Each bucket's hash count with the hashes placed since."""
        self.new: np.ndarray = np.empty(0, np.int64)
        self.added: set[int] = set()
        """The buckets this writer placed new hashes in."""
        self.written: dict[int, tuple[IndexFileMeta, tuple[IndexFileMeta, ...]]] = {}
        """Per bucket, the HASH file written for it and the files that one replaces."""

    def names_after(self) -> frozenset[str]:
        """The names of the partition's HASH files once the files written here replace theirs."""
        replaced = {f.file_name for _, old in self.written.values() for f in old}
        return (self.base.names - replaced) | {new.file_name for new, _ in self.written.values()}

    def place(self, distinct: np.ndarray, placer: Placer) -> np.ndarray:
        """The bucket (int32) of each of the distinct, sorted hashes ``distinct``; those not in the index yet are
        placed by ``placer`` and added to it.

        >>> index = _PartitionIndex(PartitionHashes())
        >>> index.place(np.array([4, 9], np.int32), lambda ix, new: np.full(len(new), 1, np.int32)).tolist()
        [1, 1]
        >>> index.place(np.array([2, 9], np.int32), lambda ix, new: np.full(len(new), 3, np.int32)).tolist()
        [3, 1]
        >>> index.bucket_hashes(1).tolist(), index.bucket_hashes(3).tolist(), sorted(index.added)
        ([4, 9], [2], [1, 3])
        """
        probe = distinct.astype(np.int64) << _BUCKET_BITS  # the first entry at or past it is the hash's, if any
        at, out = _find(self.known, probe)
        if len(self.new):
            np.maximum(out, _find(self.new, probe)[1], out=out)  # a hash is in one of the two, or in neither (-1)
        missing = out < 0
        if missing.any():
            placed = placer(self, distinct[missing])
            entries = probe[missing] | placed
            if len(entries) * 16 >= len(self.known):
                self.known = _merge_at(self.known, at[missing], entries)
            else:
                self.new = _merge_at(self.new, np.searchsorted(self.new, entries), entries)
            self.added.update(np.flatnonzero(np.bincount(placed)).tolist())
            out[missing] = placed
        return out

    def bucket_hashes(self, bucket: int, dtype: Any = np.int32) -> np.ndarray:
        """The hashes of ``bucket``, loaded and placed, sorted (as ``dtype``: a HASH file's is ``>i4``)."""
        parts = [e[(e & _BUCKET_MASK) == bucket] >> _BUCKET_BITS for e in (self.known, self.new) if len(e)]
        if not parts:
            return np.empty(0, dtype)
        hashes = parts[0] if len(parts) == 1 else np.sort(np.concatenate(parts))
        return hashes.astype(dtype)

    @property
    def nbytes(self) -> int:
        """The bytes its arrays hold."""
        return int(self.known.nbytes + self.new.nbytes)

    def merged(self) -> np.ndarray:
        """The whole index, loaded and placed entries in one sorted array (the form ``known`` takes)."""
        if not len(self.new):
            return self.known
        return _merge_at(self.known, np.searchsorted(self.known, self.new), self.new)


def _find(entries: np.ndarray, probe: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each hash (``probe``: the hash << 16) goes into the sorted ``entries``, and its bucket there (int32;
    -1 where it is absent).

    >>> e = _sorted_index({2: np.array([5], np.int32)})
    >>> [a.tolist() for a in _find(e, np.array([5, 6], np.int64) << 16)]
    [[0, 1], [2, -1]]
    """
    at = split_searchsorted(entries, probe)
    if not len(entries):
        return at, np.full(len(probe), -1, dtype=np.int32)
    offset = entries.take(at, mode="clip") - probe  # the bucket where the entry is the hash's (its low 16 bits)
    buckets = offset.astype(np.int32)
    buckets[offset.view(np.uint64) > _BUCKET_MASK] = -1
    return at, buckets


def _merge_at(entries: np.ndarray, at: np.ndarray, more: np.ndarray) -> np.ndarray:
    """Sorted ``entries`` and the sorted ``more`` (none among them) in one sorted array, given where each of
    ``more`` goes into ``entries`` (``np.searchsorted(entries, more)``): each lands at its final place in one pass
    (``np.insert`` sorts the places first, twice as slow for a partition's index).

    >>> _merge_at(np.array([1, 5, 9]), np.array([0, 2]), np.array([0, 6])).tolist()
    [0, 1, 5, 6, 9]
    """
    if not len(more):
        return entries
    where = at + np.arange(len(more))
    rest = np.ones(len(entries) + len(more), dtype=bool)
    rest[where] = False
    out = np.empty(len(rest), dtype=np.int64)
    out[where] = more
    out[rest] = entries
    return out


def _sorted_index(hashes: Mapping[int, np.ndarray]) -> np.ndarray:
    """Every bucket's hashes in one sorted array of entries (the hash above its bucket).

    >>> e = _sorted_index({0: np.array([-5, 7], np.int32), 3: np.array([1], np.int32)})
    >>> (e >> 16).tolist(), (e & 0xFFFF).tolist()
    ([-5, 1, 7], [0, 3, 0])
    """
    if not hashes:
        return np.empty(0, np.int64)
    combined = np.concatenate([(h.astype(np.int64) << _BUCKET_BITS) | b for b, h in hashes.items()])
    combined.sort()
    return combined


_MERGED: OrderedDict[tuple[str, frozenset[str]], np.ndarray] = OrderedDict()
_MERGED_LOCK = threading.Lock()
_MERGED_MAX_HASHES = 24 * 1024 * 1024
"""The most hashes the merged indexes kept hold together (8 bytes each: 192 MB); the most recent one is kept
whatever its size."""


def _merged(key: tuple[str, frozenset[str]], value: np.ndarray | None = None) -> Any:
    """A partition's merged index (its sorted entries) by its HASH file names: those a writer of this
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
        total = sum(len(h) for h in _MERGED.values())
        while total > _MERGED_MAX_HASHES and len(_MERGED) > 1:
            _, dropped = _MERGED.popitem(last=False)
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
    group_of = unsigned % np.uint32(assigners) if assigners > 1 else None
    limit = MAX_DYNAMIC_BUCKETS if max_buckets == -1 else max_buckets
    for g in range(assigners):
        sel = np.flatnonzero(group_of == g) if group_of is not None else np.arange(len(new))
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
        _count(counts, placed)
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
            _count(counts, chosen)
    return out


def _count(counts: dict[int, int], buckets: np.ndarray) -> None:
    """Add the number of hashes of each bucket in ``buckets`` to ``counts``."""
    if len(buckets):
        sizes = np.bincount(buckets)
        for b in np.flatnonzero(sizes).tolist():
            counts[b] = counts.get(b, 0) + int(sizes[b])


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
        if len(parts) == 1:
            return self._assign_partition(self._partition(parts[0]), hashes)
        out = np.empty(len(hashes), dtype=np.int32)
        # a stable sort of small ints is a radix sort in numpy (of int64 a merge sort, 5x slower for 200k rows)
        small = part_ids.astype(np.int16) if len(parts) < 2**15 else part_ids
        order = np.argsort(small, kind="stable")
        bounds = np.flatnonzero(np.diff(part_ids[order])) + 1
        for rows in np.split(order, bounds):
            pid = int(part_ids[rows[0]])
            out[rows] = self._assign_partition(self._partition(parts[pid]), hashes[rows])
        return out

    def _assign_partition(self, index: _PartitionIndex, hashes: np.ndarray) -> np.ndarray:
        # distinct sorted hashes are looked up (a lookup of 2.5M hashes in input order spent 0.45 s in cache misses)
        distinct, inverse = distinct_inverse(hashes)
        return index.place(distinct, self._place)[inverse]

    def _place(self, index: _PartitionIndex, new: np.ndarray) -> np.ndarray:
        """The buckets of a partition's distinct new hashes ``new`` (:func:`place_new_hashes`)."""
        return place_new_hashes(new, index.counts, self.target, self.assigners, self.max_buckets)

    def index_files(
        self, partition: Partition, bucket: int
    ) -> tuple[tuple[IndexFileMeta, ...], tuple[IndexFileMeta, ...]]:
        """For a touched bucket: its new HASH index file (written now) and the files it replaces; ``((), ())``
        when the write added no hash to it."""
        index = self._partitions.get(partition)
        if index is None or bucket not in index.added:
            return (), ()
        # the bucket's hashes before and now, converted once: to the file's byte order
        data = hash_file_bytes(index.bucket_hashes(bucket, HASH_FILE_DTYPE))
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
                index.known = _merged((self.fileio.uri, index.names_after()), index.merged())
                index.new = index.new[:0]  # one partition's copy at a time
        self._partitions.clear()
        return bases


def known_buckets(
    assigner: DynamicBucketAssigner, buckets: np.ndarray
) -> Callable[[pa.Table, np.ndarray, Sequence[Partition]], np.ndarray]:
    """An ``assign`` for rows whose bucket is known where ``buckets`` is not -1 (rows read from their bucket: a
    key never moves, so the HASH index need not be looked up); ``assigner`` places the others.

    >>> import tempfile
    >>> from mergetable.core.fileio import FileIO
    >>> schema = TableSchema.create(pa.schema([("id", pa.int64())]), ["id"])
    >>> a = DynamicBucketAssigner(FileIO(tempfile.mkdtemp()), schema, lambda p: PartitionHashes())
    >>> known_buckets(a, np.array([2, -1]))(pa.table({"id": [1, 2]}), np.zeros(2, np.int64), [()]).tolist()
    [2, 0]
    """

    def assign(table: pa.Table, part_ids: np.ndarray, parts: Sequence[Partition]) -> np.ndarray:
        out = np.asarray(buckets, dtype=np.int32)
        unknown = np.flatnonzero(out < 0)
        if not len(unknown):
            return out
        keys = table.select(list(assigner.schema.trimmed_primary_keys)).take(pa.array(unknown))
        out = out.copy()
        out[unknown] = assigner.assign(keys, part_ids[unknown], parts)
        return out

    return assign


__all__ = ["DynamicBucketAssigner", "HashIndexLoader", "PartitionHashes", "known_buckets", "place_new_hashes"]
