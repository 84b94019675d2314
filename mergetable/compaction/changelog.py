"""Changelog producers (``changelog-producer``): what a commit or a compaction adds as changelog files.

* ``input``: the records as written, before any merge. The writer writes them next to its level-0 files
  (:meth:`mergetable.write.writer.TableWriter.flush`, in the write tier: nothing is compared).
* ``lookup`` (:class:`LookupChangelog`): before = the merge of a key's records in the levels above 0,
  after = the merge of all its records (those levels plus the level-0 files the compaction consumes).
  Emitted by compactions that include level-0 files and write to a level above 0; the records are read
  through :class:`mergetable.read.lookup.KeyLookup`.
* ``full-compaction`` (:class:`FullCompactionChangelog`): before = the key's record in the top level,
  after = the merge of all its records. Emitted by compactions that write the top level.

A compaction producer compares, per key, the value *before* with the value *after* and emits Paimon's
changelog rows (:class:`ChangelogDiff`, vectorized over Arrow by :func:`~mergetable.read.diff.diff_changelog`):

* ``+I after``            when there was no visible value before and there is one after;
* ``-D before``           when there was one before and none after (the merged result is a retract);
* ``-U before, +U after`` when both exist and differ. With ``changelog-producer.row-deduplicate`` the pair
  is skipped when the values (minus ``…row-deduplicate-ignore-fields``) are equal.

Only keys that took part in a merge are compared (lookup: keys with level-0 records; full-compaction:
keys with records below the top level). When such a key's stored record survives the merge unchanged —
e.g. every new record carried an older ``sequence.field`` value — Paimon still emits ``-U``/``+U`` of it
(unless row-deduplicate); ``first-row`` (and Fluss's ``versioned``) emit nothing then, which is what makes
a ``first-row`` changelog insert-only.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from mergetable.compaction.lsm import CompactUnit, Levels
from mergetable.core.option_values import MIB
from mergetable.core.options import ChangelogProducer, MergeEngine, TableOptions
from mergetable.metadata.models import DataFileMeta
from mergetable.read.diff import diff_changelog
from mergetable.read.lookup import FileCache, KeyLookup, key_set, only_keys
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Section, Split

LOOKUP_CACHE_BYTES = 256 * MIB
"""The budget of :data:`LOOKUP_CACHE` (Paimon's ``lookup.cache-max-memory-size`` default)."""
LOOKUP_CACHE = FileCache(LOOKUP_CACHE_BYTES)
"""The decoded files above level 0 that the ``lookup`` compactions of this process share (least recently
used out first, :data:`LOOKUP_CACHE_BYTES` at most). A writer compacts at every commit, each time with a
new :class:`~mergetable.compaction.job.CompactionJob`, and reads the same upper-level files again: they
are decoded once per process. :class:`~mergetable.compaction.compaction.BucketCompactor` uses it unless
given another cache (or None: no cache)."""

_KEEPS_EXISTING_ROW = (MergeEngine.FIRST_ROW, MergeEngine.VERSIONED)
"""Engines whose changelog is silent when a key's stored row survives a merge unchanged (Paimon's
first-row wrapper; Fluss's versioned merger). The others, as Paimon's lookup and full-compaction
wrappers, emit ``-U``/``+U`` of the stored row when records merged into it did not change it (e.g.
records with an older ``sequence.field`` value), unless ``changelog-producer.row-deduplicate``."""


class ChangelogDiff:
    """The changelog rows of one compaction, diffed key by key under the table's options, in diff order.

    Example:
        >>> def kv(k, v, seq):  # key-value rows: key, _SEQUENCE_NUMBER, _VALUE_KIND (+I), values
        ...     kind = pa.array([0] * len(k), pa.int8())
        ...     return pa.table({"k": k, "_SEQUENCE_NUMBER": seq, "_VALUE_KIND": kind, "v": v})
        >>> d = ChangelogDiff(TableOptions(), ["k"])
        >>> d.diff(kv([1, 2], ["a", "b"], [1, 2]), kv([1, 3], ["A", "c"], [3, 4]))
        >>> d.diff(None, kv([4], ["d"], [5]))
        >>> [(r["_VALUE_KIND"], r["k"], r["v"]) for r in d.rows().to_pylist()]
        [(1, 1, 'a'), (2, 1, 'A'), (3, 2, 'b'), (0, 3, 'c'), (0, 4, 'd')]
    """

    def __init__(self, options: TableOptions, keys: Sequence[str]) -> None:
        self.keys = list(keys)
        self.dedupe = options.changelog_row_deduplicate
        self.ignore_fields = options.changelog_row_deduplicate_ignore_fields
        self.identical_is_update = options.merge_engine not in _KEEPS_EXISTING_ROW
        self._parts: list[pa.Table] = []

    def diff(self, before: pa.Table | None, after: pa.Table) -> None:
        """Add the rows turning ``before`` (None: no record of any key) into ``after`` (one record per key)."""
        rows = diff_changelog(
            before if before is not None else after.schema.empty_table(),
            after,
            self.keys,
            dedupe=self.dedupe,
            ignore_fields=self.ignore_fields,
            identical_is_update=self.identical_is_update,
        )
        if rows.num_rows:
            self._parts.append(rows)

    def rows(self) -> pa.Table | None:
        """Every row added so far (key-value form, ``_VALUE_KIND`` = the change kind); None when there is none."""
        return pa.concat_tables(self._parts) if self._parts else None


class CompactionChangelog:
    """What a changelog producer does during the compaction of one unit of one bucket.

    The compaction reports each file it upgrades (:meth:`upgraded`), merges whole sections through
    :meth:`merged_section` when :attr:`whole_sections` says so (else window by window, with the reader),
    and finally asks for the rows to write as changelog files (:meth:`finish`).
    """

    whole_sections = False
    """Whether the producer needs each rewritten section merged as a whole, by :meth:`merged_section`."""

    def __init__(self, reader: SplitReader, split: Split, options: TableOptions, keys: Sequence[str]) -> None:
        self.reader = reader
        self.split = split
        self.changes = ChangelogDiff(options, keys)

    def upgraded(self, f: DataFileMeta) -> None:
        """``f`` moves to the output level without being rewritten."""

    def merged_section(self, section: Section) -> pa.Table:
        """The merged key-value rows of ``section`` (retracts kept), to be written at the output level."""
        return self.reader.merged_section(self.split, section)

    def finish(self) -> pa.Table | None:
        """The changelog rows of the compaction, once its data files are written; None when there is none."""
        return self.changes.rows()


class LookupChangelog(CompactionChangelog):
    """``lookup``: for the keys of the unit's level-0 files, their merge in the levels above 0 before vs
    the merge of all their records after (``levels`` are the bucket's levels before the compaction)."""

    def __init__(
        self,
        reader: SplitReader,
        split: Split,
        options: TableOptions,
        keys: Sequence[str],
        unit: CompactUnit,
        levels: Levels,
        cache: FileCache | None,
    ) -> None:
        super().__init__(reader, split, options, keys)
        self.level0 = [f for f in unit.files if f.level == 0]
        self.higher = [f for f in levels.all_files() if f.level > 0]
        self.cache = cache

    def finish(self) -> pa.Table | None:
        new = [(f, self.reader.read_file(self.split, f, None)) for f in self.level0]
        keys = key_set([rows for _, rows in new], self.changes.keys)
        lookup = KeyLookup(self.reader, self.split, self.higher, keys, self.cache)
        after = lookup.merged(new)
        if after is not None:
            self.changes.diff(lookup.merged(), after)
        return self.changes.rows()


class FullCompactionChangelog(CompactionChangelog):
    """``full-compaction``: per key merged below the top level, its top-level record before vs the merged
    record after, section by section (a compaction writing the top level holds every record of a key)."""

    whole_sections = True

    def __init__(
        self, reader: SplitReader, split: Split, options: TableOptions, keys: Sequence[str], max_level: int
    ) -> None:
        super().__init__(reader, split, options, keys)
        self.max_level = max_level

    def upgraded(self, f: DataFileMeta) -> None:
        if f.level != self.max_level:  # its records are new to the top level
            self.changes.diff(None, self.reader.read_file(self.split, f, None))

    def merged_section(self, section: Section) -> pa.Table:
        files = [f for run in section for f in run]
        tables = {f.file_name: self.reader.read_file(self.split, f, None) for f in files}
        merged = self.reader.merge_files(section, lambda f, _: tables[f.file_name])
        top = [tables[f.file_name] for f in files if f.level == self.max_level]
        if len(top) == len(files):
            return merged
        before, after = None, merged
        if top:  # keys only the top level holds were not merged: no change (as in Paimon)
            lower = [tables[f.file_name] for f in files if f.level != self.max_level]
            touched = key_set(lower, self.changes.keys)
            before, after = only_keys(pa.concat_tables(top), touched), only_keys(merged, touched)
        self.changes.diff(before, after)
        return merged


def compaction_changelog(
    reader: SplitReader,
    split: Split,
    options: TableOptions,
    keys: Sequence[str],
    unit: CompactUnit,
    levels: Levels,
    cache: FileCache | None = LOOKUP_CACHE,
) -> CompactionChangelog | None:
    """The producer of the changelog of compacting ``unit`` of the bucket with ``levels``; None when the
    table's ``changelog-producer`` emits nothing for it (``cache``: where ``lookup`` keeps decoded files)."""
    producer = options.changelog_producer
    output = unit.output_level
    if producer is ChangelogProducer.LOOKUP and output > 0 and any(f.level == 0 for f in unit.files):
        return LookupChangelog(reader, split, options, keys, unit, levels, cache)
    if producer is ChangelogProducer.FULL_COMPACTION and output == levels.max_level:
        return FullCompactionChangelog(reader, split, options, keys, levels.max_level)
    return None


__all__ = [
    "LOOKUP_CACHE",
    "LOOKUP_CACHE_BYTES",
    "ChangelogDiff",
    "CompactionChangelog",
    "FullCompactionChangelog",
    "LookupChangelog",
    "compaction_changelog",
    "diff_changelog",
]
