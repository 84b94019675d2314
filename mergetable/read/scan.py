"""Planning a read: live files of a snapshot → pruned → per-bucket sections of sorted runs → splits.

Sections follow Paimon's IntervalPartition: files sorted by (min key, max key) are cut into sections
whose key ranges do not overlap; inside a section, files are packed greedily into the fewest sorted
runs. Only sections with more than one run need merging. A section larger than the split target is cut
into key-range splits (:mod:`mergetable.read.key_ranges`) when the planner may read row-group statistics.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

import pyarrow as pa

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.commit.manifests import ManifestIO
from mergetable.commit.schemas import SchemaManager
from mergetable.core.buckets import Partition, bucket_order
from mergetable.core.deletion_vectors import DeletionFile
from mergetable.core.fileio import FileIO
from mergetable.core.options import DEFAULT_SPLIT_SIZE
from mergetable.core.paths import PathFactory
from mergetable.core.predicates import Conjunct, candidate_buckets, comparable, may_match
from mergetable.core.schema import TableSchema
from mergetable.metadata.models import DataFileMeta, ManifestEntry, Snapshot
from mergetable.read.append import append_sections, may_hold
from mergetable.read.datafile import RowGroupSlice, row_group_stats
from mergetable.read.key_ranges import KeyRange, cut_points, ranges_of, runs_in_range
from mergetable.read.projection import FileProjection
from mergetable.read.windows import windowable

Run = list[DataFileMeta]
Section = list[Run]


@dataclass(frozen=True)
class Split:
    """A unit of reading: some sections of one (partition, bucket). Picklable."""

    snapshot_id: int
    partition: Partition
    bucket: int
    sections: tuple[tuple[tuple[DataFileMeta, ...], ...], ...]
    total_buckets: int = 1
    key_range: KeyRange | None = None
    """``[low, high)`` of the first key column this split reads (``None`` bounds: open), for a key-range
    split of a large section; ``None``: every key of its files."""
    deletion_files: tuple[tuple[str, DeletionFile], ...] = ()
    """The deletion vectors of its files that have one (data file name, where its vector lies); the reader drops
    the rows they mark (a deletion-vector table, :mod:`mergetable.read.deletion`)."""

    @property
    def vectors(self) -> dict[str, DeletionFile]:
        return dict(self.deletion_files)

    @property
    def files(self) -> list[DataFileMeta]:
        return [f for s in self.sections for r in s for f in r]

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.files)

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)


@dataclass
class KeyComparator:
    """Compares stored min/max keys (JSON stats form) as the key types order them."""

    types: Sequence[pa.DataType]
    _cache: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def key(self, values: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(comparable(v, t) for v, t in zip(values, self.types, strict=True))

    def min_key(self, f: DataFileMeta) -> tuple[Any, ...]:
        return self.key(f.min_key)

    def max_key(self, f: DataFileMeta) -> tuple[Any, ...]:
        return self.key(f.max_key)


def interval_partition(files: Sequence[DataFileMeta], cmp: KeyComparator) -> list[Section]:
    """Sections of non-overlapping key ranges, each packed into the fewest sorted runs."""
    keyed = sorted(((cmp.min_key(f), cmp.max_key(f), i, f) for i, f in enumerate(files)), key=lambda t: t[:3])
    sections: list[list[tuple[Any, Any, int, DataFileMeta]]] = []
    bound: tuple[Any, ...] | None = None
    for item in keyed:
        if bound is None or item[0] > bound:
            sections.append([item])
            bound = item[1]
        else:
            sections[-1].append(item)
            bound = max(bound, item[1])
    out: list[Section] = []
    for sec in sections:
        heap: list[tuple[tuple[Any, ...], int]] = []
        runs: list[Run] = []
        for lo, hi, _, f in sec:
            if heap and lo > heap[0][0]:
                _, r = heapq.heappop(heap)
                runs[r].append(f)
                heapq.heappush(heap, (hi, r))
            else:
                runs.append([f])
                heapq.heappush(heap, (hi, len(runs) - 1))
        out.append(runs)
    return out


def vector_sections(files: Sequence[DataFileMeta], cmp: KeyComparator) -> list[Section]:
    """Sections of a deletion-vector bucket: every file above level 0 on its own, but those whose key range overlaps
    a level-0 file's (``deletion-vectors.merge-on-read``), which are merged with the level-0 files. Above level 0 a
    key has at most one live row in the bucket (every older copy is marked), so only level 0 may hold another
    version of a key, and only within its key range."""
    level0 = [(cmp.min_key(f), cmp.max_key(f)) for f in files if f.level == 0]
    merged = [f.level == 0 or any(lo <= cmp.max_key(f) and cmp.min_key(f) <= hi for lo, hi in level0) for f in files]
    alone: list[Section] = [[[f]] for f, m in zip(files, merged, strict=True) if not m]
    sections = interval_partition([f for f, m in zip(files, merged, strict=True) if m], cmp) + alone
    return sorted(sections, key=lambda sec: min(cmp.min_key(f) for run in sec for f in run))


Sections = Literal["all", "raw", "merged", "vectored", "merging"]
"""Which sections a plan holds: every one, the raw-convertible ones (:func:`raw_convertible`), or the others
(``merged``); these are the ``vectored`` ones of a deletion-vector table (one run of files above level 0, each read
on its own minus the rows its vector marks: :func:`vector_readable`) and those that need a merge (``merging``)."""


def vector_readable(section: Section, same_columns: Callable[[int], bool], append: bool = False) -> bool:
    """Whether the files of ``section`` (of a deletion-vector table) are each read on their own minus the rows their
    vectors mark: one sorted run of files above level 0 (any level: an ``append`` table's, whose files all stay at
    level 0) with no retract, no partial write and the reading schema's columns (``same_columns(schema_id)``)."""
    upper = append or all(f.level > 0 for f in section[0])
    return len(section) == 1 and upper and raw_convertible(section, same_columns)


def raw_convertible(section: Section, same_columns: Callable[[int], bool]) -> bool:
    """Whether ``section``'s rows are its files' rows as stored (Paimon's raw-convertible splits): one sorted run
    (a key at most once) whose files hold no retract, no partial write, and the reading schema's columns
    (``same_columns(schema_id)``). Such files read as plain Parquet, with no merge."""
    return len(section) == 1 and all(
        f.delete_row_count == 0 and f.write_cols is None and same_columns(f.schema_id) for f in section[0]
    )


class Planner:
    """Plans reads; with ``fileio``, sections above the split target become key-range splits."""

    def __init__(self, manifests: ManifestIO, schema: TableSchema, fileio: FileIO | None = None) -> None:
        self.manifests = manifests
        self.schema = schema
        self.arrow = schema.arrow_schema
        self.key_types = [self.arrow.field(k).type for k in schema.trimmed_primary_keys]
        keys = schema.trimmed_primary_keys
        self.fileio = fileio if keys and windowable(schema.file_schema.field(keys[0]).type) else None
        self._same: dict[int, bool] = {}

    @cached_property
    def comparator(self) -> KeyComparator:
        return KeyComparator(self.key_types)

    def partition_values(self, partition: Partition) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for k, v in zip(self.schema.partition_keys, partition, strict=True):
            t = self.arrow.field(k).type
            out[k] = None if v is None else comparable(pa.scalar(v).cast(t).as_py(), t)
        return out

    def prune(self, entries: list[ManifestEntry], dnf: list[Conjunct] | None) -> list[ManifestEntry]:
        """Drop files that cannot hold a matching key: partition, bucket and key-range pruning.

        Value-column statistics are never used here: a newer version of a key may live in a file whose
        values do not match while an older one does.
        """
        if dnf is None:
            return entries
        schema = self.schema
        by_total: dict[int, set[int] | None] = {}  # a partition's own bucket count (rescaled ones differ)
        part_ok: dict[Partition, bool] = {}
        keys = schema.trimmed_primary_keys
        out = []
        for e in entries:
            if e.total_buckets not in by_total:
                by_total[e.total_buckets] = candidate_buckets(dnf, schema.bucket_keys, e.total_buckets, self.arrow)
            buckets = by_total[e.total_buckets]
            if buckets is not None and e.bucket not in buckets:
                continue
            if schema.partition_keys:
                if e.partition not in part_ok:
                    part_ok[e.partition] = may_match(dnf, _point_ranges(self.partition_values(e.partition)), self.arrow)
                if not part_ok[e.partition]:
                    continue
            stats = e.file.key_stats
            ranges = {
                k: (comparable(lo, t), comparable(hi, t))
                for k, lo, hi, t in zip(keys, stats.min_values, stats.max_values, self.key_types, strict=False)
                if lo is not None and hi is not None
            }
            if not may_match(dnf, ranges.get, self.arrow):
                continue
            if schema.is_append_table and not may_hold(e, dnf, schema):
                continue
            out.append(e)
        return out

    def plan(
        self,
        snapshot: Snapshot | None,
        dnf: list[Conjunct] | None,
        target_split_size: int = DEFAULT_SPLIT_SIZE,
        min_level: int = 0,
        sections: Sections = "all",
    ) -> list[Split]:
        """Splits of ``snapshot``'s live files (only those at ``min_level`` or above; only the ``sections`` asked
        for, chosen before a large section is cut into key ranges)."""
        if snapshot is None:
            return []
        opts = self.schema.table_options
        vectors = (
            IndexManifestIO(self.manifests.fileio).deletion_files(snapshot) if opts.deletion_vectors_enabled else None
        )
        if vectors is not None and not opts.deletion_vectors_merge_on_read and not self.schema.is_append_table:
            min_level = max(min_level, 1)  # level 0 is visible once compacted (Paimon's batchScanSkipLevel0)
        # postponed rows (bucket -2, a postpone table's) are read once a compaction moved them into buckets
        live = [e for e in self.manifests.live_entries(snapshot) if e.file.level >= min_level and e.bucket >= 0]
        entries = self.prune(live, dnf)
        by_bucket: dict[tuple[Partition, int], list[ManifestEntry]] = {}
        for e in entries:
            by_bucket.setdefault((e.partition, e.bucket), []).append(e)
        splits: list[Split] = []
        for (partition, bucket), group in sorted(by_bucket.items(), key=lambda kv: bucket_order(kv[0])):
            files = [e.file for e in group]
            dv = None if vectors is None else vectors.get((partition, bucket), {})
            if self.schema.is_append_table:
                found: list[Section] = append_sections(files)
            elif dv is not None:
                found = vector_sections(files, self.comparator)
            else:
                found = interval_partition(files, self.comparator)
            if sections != "all":
                found = [s for s in found if self._wanted(self._kind(s, dv), sections)]
            total = group[0].total_buckets
            parts = [found] if dv is not None else self._by_key_range(partition, bucket, found, target_split_size)
            for part in parts:
                if isinstance(part, tuple):
                    splits.append(Split(snapshot.id, partition, bucket, (part[1],), total, part[0]))
                else:
                    packed = _pack(snapshot.id, partition, bucket, total, part, target_split_size)
                    splits.extend(packed if not dv else [_with_vectors(s, dv) for s in packed])
        return splits

    @staticmethod
    def _wanted(kind: Sections, sections: Sections) -> bool:
        return kind == sections or (sections == "merged" and kind != "raw")

    def _kind(self, section: Section, vectors: dict[str, DeletionFile] | None) -> Sections:
        """``raw``, ``vectored`` or ``merging`` (see :data:`Sections`)."""
        if self._raw(section, vectors):
            return "raw"
        readable = vector_readable(section, self.same_columns, self.schema.is_append_table)
        return "vectored" if vectors is not None and readable else "merging"

    def _raw(self, section: Section, vectors: dict[str, DeletionFile] | None) -> bool:
        """Whether ``section`` is raw-convertible and none of its files has a deletion vector."""
        if vectors and any(f.file_name in vectors for run in section for f in run):
            return False
        return raw_convertible(section, self.same_columns)

    def same_columns(self, schema_id: int) -> bool:
        """Whether files written with ``schema_id`` hold the planned schema's columns as they are."""
        if schema_id == self.schema.id:
            return True
        if schema_id not in self._same:
            written = SchemaManager(self.manifests.fileio).schema(schema_id)
            self._same[schema_id] = FileProjection(written, self.schema).identity
        return self._same[schema_id]

    def _by_key_range(
        self, partition: Partition, bucket: int, sections: list[Section], target: int
    ) -> list[list[Section] | tuple[KeyRange, tuple[tuple[DataFileMeta, ...], ...]]]:
        """Runs of small sections to pack, and the key ranges of each section above ``target``."""
        out: list[list[Section] | tuple[KeyRange, tuple[tuple[DataFileMeta, ...], ...]]] = []
        small: list[Section] = []
        fileio = self.fileio

        def row_groups(f: DataFileMeta) -> list[RowGroupSlice]:
            assert fileio is not None
            path = PathFactory.for_table(fileio.root, self.schema).data_file(partition, bucket, f.file_name)
            return row_group_stats(fileio, fileio.arrow_fs(), path, self.schema.trimmed_primary_keys[0])

        for sec in sections:
            cuts: list[Any] = []
            if fileio is not None and sum(f.file_size for r in sec for f in r) > target:
                cuts = cut_points(sec, target, row_groups)
            if not cuts:
                small.append(sec)
                continue
            if small:
                out.append(small)
                small = []
            t = self.key_types[0]
            for key_range in ranges_of(cuts):
                runs = runs_in_range(sec, key_range, t)
                if runs:
                    out.append((key_range, runs))
        if small:
            out.append(small)
        return out


def _point_ranges(values: dict[str, Any]) -> Callable[[str], tuple[Any, Any] | None]:
    def lookup(column: str) -> tuple[Any, Any] | None:
        v = values.get(column)
        return None if v is None else (v, v)

    return lookup


def _with_vectors(split: Split, vectors: dict[str, DeletionFile]) -> Split:
    own = tuple((f.file_name, vectors[f.file_name]) for f in split.files if f.file_name in vectors)
    return Split(split.snapshot_id, split.partition, split.bucket, split.sections, split.total_buckets, None, own)


def _pack(
    snapshot_id: int, partition: Partition, bucket: int, total: int, sections: list[Section], target: int
) -> list[Split]:
    """Bin-pack consecutive sections of one bucket into splits of about ``target`` bytes."""
    out: list[Split] = []
    current: list[tuple[tuple[DataFileMeta, ...], ...]] = []
    size = 0
    for sec in sections:
        sec_size = sum(f.file_size for r in sec for f in r)
        if current and size + sec_size > target:
            out.append(Split(snapshot_id, partition, bucket, tuple(current), total))
            current, size = [], 0
        current.append(tuple(tuple(r) for r in sec))
        size += sec_size
    if current:
        out.append(Split(snapshot_id, partition, bucket, tuple(current), total))
    return out
