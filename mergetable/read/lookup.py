"""Looking up the records of some keys in some data files: the read side of the ``lookup`` changelog producer.

A ``lookup`` compaction compares, for the keys its level-0 files hold, the merge of their records in the
levels above 0 (the value before) with the merge of all their records (after); see
:mod:`mergetable.compaction.changelog`. :class:`KeyLookup` reads each file of those levels once, keeps the
records of the keys (:func:`only_keys`) and merges them with the table's merge engine
(:meth:`~mergetable.read.reader.SplitReader.merge_files`), as Paimon's ``LookupLevels`` does.

Files above level 0 rarely change between commits and never change in place, so a writer that compacts at
every commit may keep them decoded in a :class:`FileCache` of its choosing, passed to :class:`KeyLookup`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.metadata.models import DataFileMeta
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split

_ROW = "__mt_row"

CacheKey = tuple[str, int, str]
"""What :class:`FileCache` keys a decoded file by: (table URI, schema id it is read with, file name)."""


class FileCache:
    """Decoded data files, least recently used out first, at most ``budget`` bytes in all; thread-safe.

    Keyed by :data:`CacheKey`: a data file's name is never reused in a table and the file never changes in
    place, so an entry never goes stale; a file read through another schema is another entry. A file
    larger than the whole budget is not kept.

    Example:
        >>> cache = FileCache(budget=64)
        >>> cache.put(("file:///t", 0, "data-1.parquet"), pa.table({"k": [1, 2]}))
        >>> cache.get(("file:///t", 0, "data-1.parquet")).num_rows, cache.size
        (2, 16)
        >>> cache.put(("file:///t", 0, "data-2.parquet"), pa.table({"k": list(range(8))}))
        >>> cache.get(("file:///t", 0, "data-1.parquet")) is None, len(cache), cache.size
        (True, 1, 64)
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._tables: OrderedDict[CacheKey, pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._tables)

    def get(self, key: CacheKey) -> pa.Table | None:
        """The file's decoded rows, or None when they are not kept."""
        with self._lock:
            table = self._tables.get(key)
            if table is not None:
                self._tables.move_to_end(key)
            return table

    def put(self, key: CacheKey, table: pa.Table) -> None:
        """Keep ``table`` as the file's rows, dropping the least recently used files beyond the budget."""
        if table.nbytes > self.budget:
            return
        with self._lock:
            if key in self._tables:
                return
            self._tables[key] = table
            self.size += table.nbytes
            while self.size > self.budget:
                _, old = self._tables.popitem(last=False)
                self.size -= old.nbytes


def key_set(tables: Sequence[pa.Table], keys: Sequence[str]) -> pa.Table:
    """The distinct keys of some key-value tables, as a table of the key columns.

    Example:
        >>> key_set([pa.table({"k": [2, 1], "v": [0, 0]}), pa.table({"k": [2], "v": [1]})], ["k"]).to_pydict()
        {'k': [2, 1]}
    """
    parts = [t.select(list(keys)) for t in tables if t.num_rows]
    if not parts:
        return tables[0].select(list(keys)).slice(0, 0) if tables else pa.table({})
    combined = pa.concat_tables(parts)
    if len(keys) == 1:
        k = keys[0]
        return pa.table({k: pc.unique(combined.column(k).combine_chunks())})
    return combined.group_by(list(keys)).aggregate([])


def only_keys(table: pa.Table, keys: pa.Table) -> pa.Table:
    """The rows of ``table`` whose key is one of the rows of ``keys`` (in ``table``'s order).

    Example:
        >>> rows = pa.table({"a": [1, 1, 2], "b": ["x", "y", "x"], "v": [10, 11, 12]})
        >>> only_keys(rows, pa.table({"a": [2, 1], "b": ["x", "y"]})).column("v").to_pylist()
        [11, 12]
    """
    if table.num_rows == 0:
        return table
    names = keys.column_names
    if len(names) == 1:
        mask = pc.is_in(table.column(names[0]), value_set=keys.column(0).combine_chunks())
        return table.filter(mask)
    probe = table.select(names).append_column(_ROW, pa.array(np.arange(table.num_rows, dtype=np.int64)))
    hits = probe.join(keys, names, join_type="left semi").column(_ROW)
    return table.take(pa.array(np.sort(np.asarray(hits.to_numpy(), dtype=np.int64))))


class KeyLookup:
    """The records of ``keys`` in ``files`` of the bucket of ``split``, each file read once.

    ``reader`` reads the files (a reader of every column, without filter); with a ``cache``, whole files
    are taken from it, or read and put in it, before the keys are picked.

    Example:
        >>> import tempfile, mergetable as mt
        >>> t = mt.create_table(tempfile.mkdtemp() + "/t", pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"])
        >>> _ = t.write(pa.table({"k": [1, 2, 3], "v": [10, 20, 30]}))
        >>> _ = t.write(pa.table({"k": [2, 3], "v": [21, None]}))
        >>> [split] = t.plan()
        >>> lookup = KeyLookup(t.split_reader(), split, split.files, pa.table({"k": [2, 9]}))
        >>> lookup.merged().select(["k", "v"]).to_pylist()
        [{'k': 2, 'v': 21}]
    """

    def __init__(
        self,
        reader: SplitReader,
        split: Split,
        files: Sequence[DataFileMeta],
        keys: pa.Table,
        cache: FileCache | None = None,
    ) -> None:
        self.reader = reader
        self.split = split
        self.files = list(files)
        self.keys = keys
        self.cache = cache
        self.rows = {f.file_name: only_keys(self._decoded(f), keys) for f in self.files}
        """The records of the keys in each file, by file name."""

    def _decoded(self, f: DataFileMeta) -> pa.Table:
        if self.cache is None:
            return self.reader.read_file(self.split, f, None)
        key = (self.reader.fileio.uri, self.reader.schema.id, f.file_name)
        table = self.cache.get(key)
        if table is None:
            table = self.reader.read_file(self.split, f, None)
            self.cache.put(key, table)
        return table

    def merged(self, newer: Sequence[tuple[DataFileMeta, pa.Table]] = ()) -> pa.Table | None:
        """The merge of the looked-up records (retracts kept) and of ``newer`` files' rows as the caller read
        them (e.g. level-0 files, with :meth:`~mergetable.read.reader.SplitReader.read_file`); None without
        files. Each file is a sorted run of its own: records of a key are merged by age."""
        files = [*self.files, *(f for f, _ in newer)]
        if not files:
            return None
        tables = {**self.rows, **{f.file_name: rows for f, rows in newer}}
        return self.reader.merge_files([[f] for f in files], lambda f, _: tables[f.file_name])


__all__ = ["CacheKey", "FileCache", "KeyLookup", "key_set", "only_keys"]
