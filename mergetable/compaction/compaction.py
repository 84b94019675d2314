"""Compacting one bucket: pick a unit from its levels and run it (Paimon's ``MergeTreeCompactTask``).

The unit's files are cut into IntervalPartition sections. A section with several sorted runs is merged
through the table's merge engine (the merge-on-read code) and rewritten at the output level. A section of
a single file is rewritten only if the file is small (below ``target-file-size`` *
``compaction.small-file-ratio``), together with its small or overlapping neighbours; a large file is
upgraded, i.e. moved to the output level without rewriting, unless it goes to the max level and holds
retracts. Retracts are dropped when nothing older can remain below the output level. Rewritten output
rolls at ``target-file-size`` and keeps each key's ``_SEQUENCE_NUMBER``. The table's changelog producer
(:func:`mergetable.compaction.changelog.compaction_changelog`) is told of each upgrade and rewrite and gives the
changelog rows written at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from mergetable.commit.discard import discard_uncommitted
from mergetable.compaction.changelog import LOOKUP_CACHE, compaction_changelog
from mergetable.compaction.deletion import VectorCompaction, deletion_files, pick_with_vectors
from mergetable.compaction.lsm import (
    CompactUnit,
    Levels,
    UniversalCompaction,
    drops_deletes,
    pick_full_compaction,
    worth_running,
)
from mergetable.compaction.result import CompactResult
from mergetable.core.buckets import Partition
from mergetable.core.fileio import FileIO
from mergetable.core.options import ChangelogProducer, MergeEngine
from mergetable.core.rowkind import is_retract
from mergetable.core.schema import VALUE_KIND, TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import CommitMessage, DataFileMeta, FileSource, IndexFileMeta
from mergetable.read.lookup import FileCache
from mergetable.read.reader import SplitReader
from mergetable.read.scan import KeyComparator, Section, Split, interval_partition
from mergetable.write.files import write_kv_files
from mergetable.write.rolling import RollingKvWriter


class BucketCompactor:
    """Picks and runs compactions of single buckets of one table.

    ``lookup_cache`` keeps the files a ``lookup`` changelog producer reads decoded (default: the process's
    :data:`~mergetable.compaction.changelog.LOOKUP_CACHE`; None: none).
    """

    def __init__(
        self,
        fileio: FileIO,
        schema: TableSchema,
        merge_function: MergeFunction,
        lookup_cache: FileCache | None = LOOKUP_CACHE,
    ) -> None:
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
        self.lookup_cache = lookup_cache

    # -- picking --------------------------------------------------------------------------------------
    def levels(self, files: Sequence[DataFileMeta]) -> Levels:
        return Levels(files, self.options.max_levels, self.comparator.min_key)

    @property
    def forces_level0(self) -> bool:
        """Lookup tables keep level 0 empty so that changelog is produced at every commit; first-row tables
        need lookup too (Paimon), and ``commit.force-compact`` forces a compaction at each commit."""
        opts = self.options
        if opts.merge_engine is MergeEngine.FIRST_ROW or opts.commit_force_compact:
            return True
        return self.producer is ChangelogProducer.LOOKUP or opts.force_lookup

    def pick(
        self, levels: Levels, full: bool = False, index_files: Sequence[IndexFileMeta] = ()
    ) -> tuple[CompactUnit, bool] | None:
        """The unit to compact and whether it drops retracts, or None when nothing is worth doing
        (``index_files``: the bucket's deletion-vector index files, in a deletion-vector table)."""
        if self.options.deletion_vectors_enabled:
            unit = pick_with_vectors(self, levels, full, deletion_files(index_files))
            return None if unit is None else (unit, True)
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
        self,
        partition: Partition,
        bucket: int,
        files: Sequence[DataFileMeta],
        full: bool = False,
        index_files: Sequence[IndexFileMeta] = (),
    ) -> CompactResult | None:
        """Compact the bucket holding ``files`` (its live files; ``index_files``: its deletion-vector index
        files). None when nothing is worth doing."""
        levels = self.levels(files)
        picked = self.pick(levels, full, index_files)
        if picked is None:
            return None
        unit, drop_delete = picked
        if self.options.deletion_vectors_enabled:
            result = CompactResult()
            try:
                VectorCompaction(self, partition, bucket, levels, unit, index_files).run(result)
            except BaseException:
                self.discard(partition, bucket, result.written, result.index_after)
                raise
            return result
        task = _Task(self, partition, bucket, levels, unit, drop_delete)
        try:
            task.run()
        except BaseException:
            self.discard(partition, bucket, task.result.written)
            raise
        return task.result

    def discard(
        self,
        partition: Partition,
        bucket: int,
        files: Sequence[DataFileMeta],
        index_files: Sequence[IndexFileMeta] = (),
    ) -> None:
        """Delete files a compaction wrote and will not commit."""
        total = self.schema.table_options.bucket
        message = CommitMessage(
            partition=partition,
            bucket=bucket,
            total_buckets=total,
            compact_after=tuple(files),
            compact_index_files=tuple(index_files),
        )
        discard_uncommitted(self.fileio, self.schema, [message])


class _Task:
    """One unit of one bucket: the section-wise rewrite/upgrade loop, reporting to the changelog producer."""

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
        self.unit = unit
        self.output_level = unit.output_level
        self.max_level = levels.max_level
        self.drop_delete = drop_delete
        self.split = Split(0, partition, bucket, ())
        self.reader = SplitReader(owner.fileio, owner.schema, owner.merge_function)
        self.result = CompactResult()
        self.changelog = compaction_changelog(
            self.reader, self.split, owner.options, owner.keys, unit, levels, owner.lookup_cache
        )

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
        changelog = self.changelog.finish() if self.changelog is not None else None
        if changelog is not None:
            self.result.changelog.extend(self._write(changelog, changelog=True))

    def _upgrade(self, f: DataFileMeta) -> None:
        has_deletes = f.delete_row_count is None or f.delete_row_count > 0
        if self.output_level == self.max_level and has_deletes:
            self._rewrite_now([[[f]]])
            return
        if self.changelog is not None:
            self.changelog.upgraded(f)
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
        if self.changelog is not None and self.changelog.whole_sections:  # the producer diffs whole sections
            parts = []
            for section in sections:
                parts.append(self._without_retracts(self.changelog.merged_section(section)))
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
