"""Compacting one bucket of a deletion-vector table (merge-on-write), as Paimon's lookup compaction does.

Picking. Level 0 is always pushed up (Paimon's ``lookup-compact`` = radical): the universal strategy's unit,
else every level-0 run on its own to the level below the next run. Unlike Paimon's forced pick, the level-0
runs are not extended by size ratio: reads of a deletion-vector table merge no runs, so the upper runs are
merged only when the universal strategy's own triggers (size amplification, size ratio and run count over
``num-sorted-run.compaction-trigger``) ask, as in a merge-on-read table, and a commit does not rewrite the
levels above at every other write. With nothing else to do, the files whose vector covers more than
``compaction.delete-ratio-threshold`` of their rows are rewritten in place; a full compaction that finds the
bucket already one top-level run rewrites the files that have a vector.

Running. The unit's files are read without the rows their vectors mark and merged with the merge engine.
The keys of its level-0 files are looked up in the files above level 0 that the unit leaves alone: each live
older row found is merged in (so partial-update and aggregation fold it into the new row) and its position
goes into that file's deletion vector. The merged rows, without retracts (no older live copy of a key remains
anywhere), are written at the output level. The bucket's vectors after the compaction (those of the files it
removed dropped, the new marks added) are written as new index files that replace every index file of the
bucket, committed with the data files in the same COMPACT snapshot. With ``changelog-producer`` = ``lookup``
the looked-up rows are the value before and the merged rows the value after.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa
from pyroaring import BitMap, BitMap64

from mergetable.commit.index_manifest import IndexManifestIO
from mergetable.compaction.changelog import ChangelogDiff
from mergetable.compaction.lsm import CompactUnit, Levels, UniversalCompaction, pick_full_compaction
from mergetable.compaction.result import CompactResult
from mergetable.core.buckets import Partition
from mergetable.core.deletion_vectors import DeletionFile, Vector, kept_mask
from mergetable.core.fileio import FileIO
from mergetable.core.options import ChangelogProducer, MergeEngine, TableOptions
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import DataFileMeta, FileSource, IndexFileMeta
from mergetable.read.datafile import read_data_file
from mergetable.read.deletion import read_masked
from mergetable.read.lookup import FileCache, key_set, only_keys
from mergetable.read.reader import SplitReader
from mergetable.read.scan import KeyComparator, Split, interval_partition
from mergetable.write.files import write_kv_files
from mergetable.write.rolling import RollingKvWriter


class Compactor(Protocol):
    """What a deletion-vector compaction needs of :class:`~mergetable.compaction.compaction.BucketCompactor`
    (which runs it)."""

    fileio: FileIO
    schema: TableSchema
    options: TableOptions
    merge_function: MergeFunction
    keys: list[str]
    comparator: KeyComparator
    strategy: UniversalCompaction
    producer: ChangelogProducer
    lookup_cache: FileCache | None


_POS = "__mt_pos"


def _keys(tables: Sequence[pa.Table], keys: Sequence[str]) -> pa.Table:
    """The keys of some key-value tables as a table of the key columns (a single integer key: as they come,
    repeated ones included; the lookup finds each stored row once anyway)."""
    parts = [t.column(keys[0]) for t in tables if t.num_rows]
    if len(keys) == 1 and parts and pa.types.is_integer(parts[0].type):
        return pa.table({keys[0]: pa.chunked_array([c for p in parts for c in p.chunks], parts[0].type)})
    return key_set(tables, keys)


def deletion_files(index_files: Sequence[IndexFileMeta]) -> dict[str, DeletionFile]:
    """Where each data file's vector lies in a bucket's index files."""
    return {
        r.data_file_name: DeletionFile(f.file_name, r.offset, r.length, r.cardinality)
        for f in index_files
        for r in f.deletion_vectors_ranges
    }


def pick_with_vectors(
    owner: Compactor, levels: Levels, full: bool, vectors: Mapping[str, DeletionFile]
) -> CompactUnit | None:
    """The unit to compact in a deletion-vector bucket (see the module docstring); None: nothing to do."""
    runs = levels.level_sorted_runs()
    n = levels.number_of_levels
    if full:
        unit = pick_full_compaction(n, runs)
        if unit is None:
            marked = tuple(f for f in levels.all_files() if f.file_name in vectors)
            unit = CompactUnit(levels.max_level, marked) if marked else None
        return unit
    unit = owner.strategy.pick(n, runs)
    if unit is not None:
        return unit
    level0 = sum(1 for r in runs if r.level == 0)
    if level0:  # level 0 alone: reads merge no runs here, so nothing above is rewritten before the triggers
        return owner.strategy.create_unit(runs, n - 1, level0)
    ratio = owner.options.compaction_delete_ratio_threshold
    heavy = [
        f
        for f in levels.all_files()
        if f.file_name in vectors and (vectors[f.file_name].cardinality or 0) > ratio * f.row_count
    ]
    if not heavy:
        return None
    per_level: dict[int, int] = {}
    for f in heavy:
        per_level[f.level] = per_level.get(f.level, 0) + (vectors[f.file_name].cardinality or 0)
    level = max(per_level, key=lambda lv: (per_level[lv], lv))  # the level with most marked rows first
    return CompactUnit(level, tuple(f for f in heavy if f.level == level))


class VectorCompaction:
    """One unit of one bucket of a deletion-vector table: merge, look up, mark, write."""

    def __init__(
        self,
        owner: Compactor,
        partition: Partition,
        bucket: int,
        levels: Levels,
        unit: CompactUnit,
        index_files: Sequence[IndexFileMeta],
    ) -> None:
        self.owner = owner
        self.partition = partition
        self.bucket = bucket
        self.levels = levels
        self.unit = unit
        self.index_files = list(index_files)
        self.deletion = deletion_files(index_files)
        self.split = Split(0, partition, bucket, (), deletion_files=tuple(self.deletion.items()))
        self.reader = SplitReader(owner.fileio, owner.schema, owner.merge_function)
        self.indexes = IndexManifestIO(owner.fileio)

    def run(self, result: CompactResult) -> None:
        """Fill ``result`` (files before and after, changelog, index files before and after)."""
        owner, unit = self.owner, self.unit
        upgrade = self._upgradable()
        vectors = self.indexes.vectors(self.deletion)
        if upgrade:  # only the keys are needed
            inputs = {f.file_name: self._key_columns(f) for f in unit.files}
        else:
            inputs = {f.file_name: self._input(f, vectors.get(f.file_name)) for f in unit.files}
        level0 = [f for f in unit.files if f.level == 0]
        names = set(inputs)
        outside = [f for f in self.levels.all_files() if f.level > 0 and f.file_name not in names]
        marks: dict[str, np.ndarray] = {}
        looked: list[tuple[DataFileMeta, pa.Table]] = []
        keys = _keys([inputs[f.file_name] for f in level0], owner.keys) if level0 else None
        if keys is not None and keys.num_rows and outside:
            for f in outside:
                positions = self._live_positions(f, vectors.get(f.file_name), keys)
                if len(positions):
                    marks[f.file_name] = positions
                    if not upgrade:
                        looked.append((f, self._decoded(f).take(pa.array(positions))))
        result.before.extend(unit.files)
        if upgrade:  # deduplicate: the level-0 rows replace the marked ones as they are
            result.after.extend(f.upgrade(unit.output_level) for f in unit.files)
        else:
            self._merge(result, inputs, looked, keys)
        removed = names & set(vectors)
        if not marks and not removed:
            return
        after: dict[str, Vector] = {name: v for name, v in vectors.items() if name not in names}
        bitmap64 = owner.options.deletion_vectors_bitmap64
        for name, positions in marks.items():
            vector = after.get(name)
            fresh: Vector = BitMap64(positions.tolist()) if bitmap64 else BitMap(positions.astype(np.uint32))
            if vector is not None:
                fresh = (BitMap64(vector) if bitmap64 else BitMap(vector)) | fresh  # type: ignore[operator]
            after[name] = fresh
        target = owner.options.deletion_vector_index_file_target_size
        result.index_before.extend(self.index_files)
        result.index_after.extend(self.indexes.write_vectors(after, bitmap64, target))

    def _input(self, f: DataFileMeta, vector: Vector | None) -> pa.Table:
        """The rows of a unit file its vector does not mark (files above level 0 through the lookup cache)."""
        if f.level == 0:
            return read_masked(self.reader, self.split, f, None)
        table = self._decoded(f)
        mask = kept_mask(vector, 0, table.num_rows)
        return table if mask is None else table.filter(pa.array(mask))

    def _upgradable(self) -> bool:
        """Whether the unit's files move up as they are: level-0 files only, with disjoint key ranges, without
        retracts or partial writes, of a ``deduplicate`` table without ``sequence.field`` and without the lookup
        producer (the newest record of a key is its value, so nothing older needs merging in)."""
        owner, files = self.owner, self.unit.files
        opts = owner.options
        if opts.merge_engine is not MergeEngine.DEDUPLICATE or opts.sequence_field or opts.ignore_delete:
            return False
        if owner.producer is ChangelogProducer.LOOKUP or self.unit.output_level == 0:
            return False
        if any(f.level != 0 or f.delete_row_count != 0 or f.write_cols is not None for f in files):
            return False
        return all(len(section) == 1 for section in interval_partition(list(files), owner.comparator))

    def _merge(
        self,
        result: CompactResult,
        inputs: dict[str, pa.Table],
        looked: list[tuple[DataFileMeta, pa.Table]],
        keys: pa.Table | None,
    ) -> None:
        """Merge the unit's rows with the looked-up older rows and write them at the output level."""
        owner, unit, reader = self.owner, self.unit, self.reader
        tables = {**inputs, **{f.file_name: t for f, t in looked}}
        files = [*unit.files, *(f for f, _ in looked)]
        merged = reader.merge_files([[f] for f in files], lambda f, _: tables[f.file_name])
        if keys is not None and owner.producer is ChangelogProducer.LOOKUP and unit.output_level > 0:
            self._changelog(result, keys, [f for f in files if f.level > 0], tables, merged)
        if merged.num_rows:
            retract = is_retract(np.asarray(merged.column(VALUE_KIND).to_numpy()))
            if retract.any():
                merged = merged.filter(pa.array(~retract))
        if merged.num_rows:
            with RollingKvWriter(
                owner.fileio, owner.schema, self.partition, self.bucket, unit.output_level, FileSource.COMPACT
            ) as writer:
                writer.write(merged)
                result.after.extend(writer.close())

    def _live_positions(self, f: DataFileMeta, vector: Vector | None, keys: pa.Table) -> np.ndarray:
        """The positions in ``f`` of the rows of ``keys`` that its vector does not mark (a file above level 0
        holds a key at most once, in key order: a single integer key is found by binary search)."""
        table = self._key_columns(f)
        names = keys.column_names
        key_type = table.schema.field(names[0]).type
        if len(names) == 1 and pa.types.is_integer(key_type) and table.num_rows:
            stored = np.asarray(table.column(names[0]).to_numpy())
            wanted = np.asarray(keys.column(0).to_numpy())
            at = np.searchsorted(stored, wanted)
            inside = at < len(stored)
            at = at[inside]
            positions = np.sort(at[stored[at] == wanted[inside]]).astype(np.int64)
            if len(positions) > 1:  # keys repeated across level-0 files find their row once
                positions = positions[np.concatenate(([True], positions[1:] != positions[:-1]))]
        else:
            probe = table.select(names).append_column(_POS, pa.array(np.arange(table.num_rows, dtype=np.int64)))
            positions = np.sort(np.asarray(only_keys(probe, keys).column(_POS).to_numpy(), dtype=np.int64))
        if vector is not None and len(vector) and len(positions):
            marked = np.asarray(vector.to_array(), dtype=np.int64)
            at = np.minimum(np.searchsorted(marked, positions), len(marked) - 1)  # both sorted, distinct
            positions = positions[marked[at] != positions]
        return positions

    def _key_columns(self, f: DataFileMeta) -> pa.Table:
        """The key columns of ``f`` in file order (all a lookup needs), through the lookup cache."""
        reader = self.reader
        if reader.projection(f.schema_id) is not None:
            return self._decoded(f)
        cache = self.owner.lookup_cache
        key = (reader.fileio.uri, reader.schema.id, f.file_name + "#keys")
        table = cache.get(key) if cache is not None else None
        if table is None:
            path = reader.paths.data_file(self.partition, self.bucket, f.file_name)
            table = read_data_file(reader.fileio, reader.afs, path, f, self.owner.keys)
            if cache is not None:
                cache.put(key, table)
        return table

    def _decoded(self, f: DataFileMeta) -> pa.Table:
        """Every row of ``f`` in file order (so a row's index is its position), shared through the lookup cache."""
        cache = self.owner.lookup_cache
        if cache is None:
            return self.reader.read_file(self.split, f, None)
        key = (self.reader.fileio.uri, self.reader.schema.id, f.file_name)
        table = cache.get(key)
        if table is None:
            table = self.reader.read_file(self.split, f, None)
            cache.put(key, table)
        return table

    def _changelog(
        self,
        result: CompactResult,
        keys: pa.Table,
        upper: Sequence[DataFileMeta],
        tables: Mapping[str, pa.Table],
        merged: pa.Table,
    ) -> None:
        """The lookup producer's rows: the level-0 keys' live values above level 0 before, merged after."""
        owner = self.owner
        parts = {f.file_name: only_keys(tables[f.file_name], keys) for f in upper}
        before = self.reader.merge_files([[f] for f in upper], lambda f, _: parts[f.file_name]) if upper else None
        diff = ChangelogDiff(owner.options, owner.keys)
        diff.diff(before, only_keys(merged, keys))
        rows = diff.rows()
        if rows is not None:
            result.changelog.extend(
                write_kv_files(
                    owner.fileio,
                    owner.schema,
                    self.partition,
                    self.bucket,
                    rows,
                    self.unit.output_level,
                    file_source=FileSource.COMPACT,
                    changelog=True,
                )
            )


__all__ = ["VectorCompaction", "deletion_files", "pick_with_vectors"]
