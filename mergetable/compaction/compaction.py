"""Compacting one bucket: pick a unit from its levels and run it (Paimon's ``MergeTreeCompactTask``).

The unit's files are cut into IntervalPartition sections. A section with several sorted runs is merged
through the table's merge engine (the merge-on-read code) and rewritten at the output level. A section of
a single file is rewritten only if the file is small (below ``target-file-size`` *
``compaction.small-file-ratio``), together with its small or overlapping neighbours; a large file is
upgraded, i.e. moved to the output level without rewriting, unless it goes to the max level and holds
retracts. Retracts are dropped when nothing older can remain below the output level. Rewritten output
rolls at ``target-file-size`` and keeps each key's ``_SEQUENCE_NUMBER``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.discard import discard_uncommitted
from mergetable.compaction.changelog import diff_changelog, key_set, only_keys
from mergetable.compaction.lsm import (
    CompactUnit,
    Levels,
    UniversalCompaction,
    drops_deletes,
    pick_full_compaction,
    worth_running,
)
from mergetable.core.fileio import FileIO
from mergetable.core.options import MIB, ChangelogProducer, MergeEngine
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import CommitMessage, DataFileMeta, FileSource
from mergetable.read.reader import SplitReader
from mergetable.read.scan import KeyComparator, Section, Split, interval_partition
from mergetable.write.files import write_kv_files
from mergetable.write.rolling import RollingKvWriter

Partition = tuple[str | None, ...]


@dataclass
class CompactResult:
    """What compacting one bucket changed: files removed, files added, changelog produced."""

    before: list[DataFileMeta] = field(default_factory=list)
    after: list[DataFileMeta] = field(default_factory=list)
    changelog: list[DataFileMeta] = field(default_factory=list)

    @property
    def written(self) -> list[DataFileMeta]:
        """Files this compaction created (upgraded files are not new: they keep their name)."""
        kept = {f.file_name for f in self.before}
        return [f for f in (*self.after, *self.changelog) if f.file_name not in kept]


class _FileCache:
    """Decoded files shared by the lookup compactions of this process, least recently used out first.

    A lookup compaction reads the records of the new keys from every level above 0, at each commit; those
    files rarely change between commits and never change in place (names are unique), so a long-running
    writer keeps them decoded. Bounded by ``budget`` bytes (Paimon's ``lookup.cache-max-memory-size``).
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.tables: OrderedDict[tuple[str, str], pa.Table] = OrderedDict()
        self.size = 0
        self.lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> pa.Table | None:
        with self.lock:
            table = self.tables.get(key)
            if table is not None:
                self.tables.move_to_end(key)
            return table

    def put(self, key: tuple[str, str], table: pa.Table) -> None:
        if table.nbytes > self.budget:
            return
        with self.lock:
            if key in self.tables:
                return
            self.tables[key] = table
            self.size += table.nbytes
            while self.size > self.budget:
                _, old = self.tables.popitem(last=False)
                self.size -= old.nbytes


#: Bytes of decoded files the lookup compactions of a process keep (Paimon's lookup.cache-max-memory-size default).
LOOKUP_CACHE_BYTES = 256 * MIB
LOOKUP_CACHE = _FileCache(LOOKUP_CACHE_BYTES)


class _CachingReader(SplitReader):
    """Reads the files of one compaction, keeping those ``keep`` selects so each is read once.

    With ``keys`` set, only the records of those keys are returned (files not kept are taken from, or
    decoded into, the process-wide :data:`LOOKUP_CACHE`).
    """

    def __init__(self, fileio: FileIO, schema: TableSchema, merge_function: MergeFunction) -> None:
        super().__init__(fileio, schema, merge_function)
        self.tables: dict[str, pa.Table] = {}
        self.keep: Callable[[DataFileMeta], bool] = lambda f: False
        self.keys: pa.Table | None = None

    def read_file(
        self, split: Split, f: DataFileMeta, filter_expr: pc.Expression | None, *args: Any, **kwargs: Any
    ) -> pa.Table:
        if args or kwargs:  # a special read (e.g. without system columns): not what is cached
            return super().read_file(split, f, filter_expr, *args, **kwargs)
        table = self.tables.get(f.file_name)
        if table is None:
            if self.keys is not None:  # a level above 0, looked up: decoded once per process
                key = (self.fileio.uri, f.file_name)
                table = LOOKUP_CACHE.get(key)
                if table is None:
                    table = super().read_file(split, f, None)
                    LOOKUP_CACHE.put(key, table)
            else:
                table = super().read_file(split, f, filter_expr)
                if self.keep(f):
                    self.tables[f.file_name] = table
        if self.keys is not None:
            table = only_keys(table, self.keys)
        return table


class BucketCompactor:
    """Picks and runs compactions of single buckets of one table."""

    def __init__(self, fileio: FileIO, schema: TableSchema, merge_function: MergeFunction) -> None:
        self.fileio = fileio
        self.schema = schema
        self.options = schema.table_options
        self.merge_function = merge_function
        self.keys = list(schema.trimmed_primary_keys)
        arrow = schema.arrow_schema
        self.comparator = KeyComparator([arrow.field(k).type for k in self.keys])
        opts = self.options
        self.strategy = UniversalCompaction(
            opts.compaction_max_size_amplification_percent,
            opts.compaction_size_ratio,
            opts.num_sorted_run_compaction_trigger,
        )
        self.min_file_size = int(opts.target_file_size * opts.compaction_small_file_ratio)
        self.producer = opts.changelog_producer

    # -- picking --------------------------------------------------------------------------------------
    def levels(self, files: Sequence[DataFileMeta]) -> Levels:
        return Levels(files, self.options.max_levels, self.comparator.min_key)

    @property
    def forces_level0(self) -> bool:
        """Lookup tables keep level 0 empty so that changelog is produced at every commit."""
        return self.producer is ChangelogProducer.LOOKUP or self.options.force_lookup

    def pick(self, levels: Levels, full: bool = False) -> tuple[CompactUnit, bool] | None:
        """The unit to compact and whether it drops retracts, or None when nothing is worth doing."""
        runs = levels.level_sorted_runs()
        n = levels.number_of_levels
        unit = pick_full_compaction(n, runs) if full else self.strategy.pick(n, runs)
        if unit is None and not full and self.forces_level0:
            unit = self.strategy.force_pick_level0(n, runs)
        unit = worth_running(unit)
        if unit is None:
            return None
        drop = drops_deletes(unit, levels)
        if not drop and any(f.write_cols is not None for f in unit.files):
            # A partial-write record merged alone would lose the fact that it is partial; only at the
            # bottom of the tree (nothing older below) is it equal to a full row with nulls.
            unit = worth_running(pick_full_compaction(n, runs))
            if unit is None:
                return None
            drop = True
        return unit, drop

    # -- running --------------------------------------------------------------------------------------
    def compact(
        self, partition: Partition, bucket: int, files: Sequence[DataFileMeta], full: bool = False
    ) -> CompactResult | None:
        """Compact the bucket holding ``files`` (its live files). None when nothing is worth doing."""
        levels = self.levels(files)
        picked = self.pick(levels, full)
        if picked is None:
            return None
        unit, drop_delete = picked
        task = _Task(self, partition, bucket, levels, unit, drop_delete)
        try:
            task.run()
        except BaseException:
            self.discard(partition, bucket, task.result.written)
            raise
        return task.result

    def discard(self, partition: Partition, bucket: int, files: Sequence[DataFileMeta]) -> None:
        """Delete files a compaction wrote and will not commit."""
        total = self.schema.table_options.bucket
        message = CommitMessage(partition=partition, bucket=bucket, total_buckets=total, compact_after=tuple(files))
        discard_uncommitted(self.fileio, self.schema, [message])


_KEEPS_EXISTING_ROW = (MergeEngine.FIRST_ROW, MergeEngine.VERSIONED)
"""Engines whose changelog is silent when a key's stored row survives a merge unchanged (Paimon's
first-row wrapper; Fluss's versioned merger). The others, as Paimon's lookup and full-compaction
wrappers, emit ``-U``/``+U`` of the stored row when records merged into it did not change it (e.g.
records with an older ``sequence.field`` value), unless ``changelog-producer.row-deduplicate``."""


class _Task:
    """One unit of one bucket: the section-wise rewrite/upgrade loop plus changelog."""

    def __init__(
        self,
        owner: BucketCompactor,
        partition: Partition,
        bucket: int,
        levels: Levels,
        unit: CompactUnit,
        drop_delete: bool,
    ) -> None:
        self.owner = owner
        self.partition = partition
        self.bucket = bucket
        self.levels = levels
        self.unit = unit
        self.output_level = unit.output_level
        self.max_level = levels.max_level
        self.drop_delete = drop_delete
        self.split = Split(0, partition, bucket, ())
        self.reader = _CachingReader(owner.fileio, owner.schema, owner.merge_function)
        self.result = CompactResult()
        producer = owner.producer
        has_level0 = any(f.level == 0 for f in unit.files)
        self.lookup_changelog = producer is ChangelogProducer.LOOKUP and has_level0 and self.output_level > 0
        self.full_changelog = producer is ChangelogProducer.FULL_COMPACTION and self.output_level == self.max_level
        if self.lookup_changelog:
            self.reader.keep = lambda f: f.level == 0
        elif self.full_changelog:  # kept per section: the top file is the "before" of the section's keys
            self.reader.keep = lambda f: True
        self._changelog_parts: list[pa.Table] = []

    def run(self) -> None:
        candidate: list[Section] = []
        for section in interval_partition(self.unit.files, self.owner.comparator):
            if len(section) > 1:
                candidate.append(section)
                continue
            f = section[0][0]  # a single-run section always holds exactly one file
            if f.file_size < self.owner.min_file_size:
                candidate.append(section)
            else:
                self._rewrite(candidate)
                self._upgrade(f)
        self._rewrite(candidate)
        if self.lookup_changelog:
            self._lookup_changelog()
        self._write_changelog()

    # -- data files -------------------------------------------------------------------------------------
    def _upgrade(self, f: DataFileMeta) -> None:
        has_deletes = f.delete_row_count is None or f.delete_row_count > 0
        if self.output_level == self.max_level and has_deletes:
            self._rewrite_now([[[f]]])
            return
        if self.full_changelog and f.level != self.max_level:  # its records are new to the top level
            self._diff(None, self.reader.read_file(self.split, f, None))
            self.reader.tables.clear()
        if f.level != self.output_level:
            self.result.before.append(f)
            self.result.after.append(f.upgrade(self.output_level))

    def _rewrite(self, candidate: list[Section]) -> None:
        if not candidate:
            return
        if len(candidate) == 1 and len(candidate[0]) == 1:
            for f in candidate[0][0]:
                self._upgrade(f)
        else:
            self._rewrite_now(candidate)
        candidate.clear()

    def _rewrite_now(self, sections: list[Section]) -> None:
        if self.full_changelog:  # the changelog diffs each merged section as a whole
            parts = []
            for section in sections:
                rows = self.reader.merged_section(self.split, section)
                self._full_changelog(section, rows)
                parts.append(self._without_retracts(rows))
                self.result.before.extend(f for run in section for f in run)
            self.result.after.extend(self._write(pa.concat_tables(parts) if len(parts) > 1 else parts[0]))
            return
        # Streamed: a few row groups of each run in memory, output rolled at target-file-size.
        owner = self.owner
        with RollingKvWriter(
            owner.fileio, owner.schema, self.partition, self.bucket, self.output_level, FileSource.COMPACT
        ) as writer:
            for section in sections:
                for rows in self.reader.merged_windows(self.split, section):
                    writer.write(self._without_retracts(rows))
                self.result.before.extend(f for run in section for f in run)
            self.result.after.extend(writer.close())

    def _without_retracts(self, rows: pa.Table) -> pa.Table:
        if self.drop_delete and rows.num_rows:
            retract = is_retract(np.asarray(rows.column(VALUE_KIND).to_numpy()))
            if retract.any():
                return rows.filter(pa.array(~retract))
        return rows

    def _write(self, rows: pa.Table, changelog: bool = False) -> list[DataFileMeta]:
        owner = self.owner
        return write_kv_files(
            owner.fileio,
            owner.schema,
            self.partition,
            self.bucket,
            rows,
            self.output_level,
            file_source=FileSource.COMPACT,
            changelog=changelog,
        )

    # -- changelog --------------------------------------------------------------------------------------
    def _diff(self, before: pa.Table | None, after: pa.Table) -> None:
        opts = self.owner.options
        rows = diff_changelog(
            before if before is not None else after.schema.empty_table(),
            after,
            self.owner.keys,
            dedupe=opts.changelog_row_deduplicate,
            ignore_fields=opts.changelog_row_deduplicate_ignore_fields,
            identical_is_update=opts.merge_engine not in _KEEPS_EXISTING_ROW,
        )
        if rows.num_rows:
            self._changelog_parts.append(rows)

    def _full_changelog(self, section: Section, merged: pa.Table) -> None:
        """The top level before vs the merged section after (a full compaction holds every record)."""
        files = [f for run in section for f in run]
        top = [self.reader.read_file(self.split, f, None) for f in files if f.level == self.max_level]
        if len(files) == len(top):
            self.reader.tables.clear()
            return
        before = pa.concat_tables(top) if top else None
        if before is not None:  # keys only the top level holds were not merged: no change (as in Paimon)
            lower = [self.reader.read_file(self.split, f, None) for f in files if f.level != self.max_level]
            touched = key_set(lower, self.owner.keys)
            before, merged = only_keys(before, touched), only_keys(merged, touched)
        self.reader.tables.clear()
        self._diff(before, merged)

    def _lookup_changelog(self) -> None:
        """Merged higher levels (the value before) vs everything (after), for the keys in level 0."""
        reader = self.reader
        level0 = [f for f in self.unit.files if f.level == 0]
        keys = key_set([reader.read_file(self.split, f, None) for f in level0], self.owner.keys)
        higher = [f for f in self.levels.all_files() if f.level > 0]
        reader.keys = keys
        try:
            for f in higher:  # each read once, restricted to the keys
                reader.tables[f.file_name] = reader.read_file(self.split, f, None)
            before = reader.merged_section(self.split, [[f] for f in higher]) if higher else None
            after = reader.merged_section(self.split, [[f] for f in (*higher, *level0)])
        finally:
            reader.keys = None
            reader.tables.clear()
        self._diff(before, after)

    def _write_changelog(self) -> None:
        if not self._changelog_parts:
            return
        self.result.changelog.extend(self._write(pa.concat_tables(self._changelog_parts), changelog=True))
