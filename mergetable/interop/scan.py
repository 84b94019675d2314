"""One read of a table at one pinned snapshot, as the dataframe engines ask for it.

A :class:`TableScan` takes a projection, a filter in mergetable's DNF form (pruned by partition, bucket and
key range, applied exactly to merged rows), optionally a pyarrow expression (the form duckdb and pyarrow
scanners push; files are pruned by it through pyarrow's own guarantee simplification over each file's
partition values and key ranges, an append table's also over its column statistics, and it is applied
exactly after the merge) and a row limit, and streams Arrow batches. :class:`ScanStats` counts the data
files it handed to the reader.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, Unpack

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from mergetable.core.errors import SchemaError
from mergetable.core.predicates import Filters, candidate_buckets, comparable
from mergetable.core.read_options import Timestamp
from mergetable.core.schema import TableSchema, check_column
from mergetable.metadata.models import DataFileMeta, Snapshot
from mergetable.read.parallel import in_process_key_ranges
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Split


class Travel(TypedDict, total=False):
    """Which snapshot a read uses: at most one of these (none: the latest); as in ``Table.read``."""

    snapshot_id: int | None
    timestamp_ms: Timestamp | None
    tag: str | None
    version: int | str | None


class ReadableTable(Protocol):
    """What interop needs of a table (:class:`mergetable.Table` is one)."""

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def uri(self) -> str: ...

    @property
    def table_schema(self) -> TableSchema: ...

    def resolve_snapshot(self, **travel: Unpack[Travel]) -> Snapshot | None: ...

    def plan(
        self, filter: Filters | None = None, *, key_ranges: bool = True, **travel: Unpack[Travel]
    ) -> list[Split]: ...

    def split_reader(self, columns: Sequence[str] | None = None, filter: Filters | None = None) -> SplitReader: ...


@dataclass
class ScanStats:
    """What scans of one source read, summed over its scans (thread-safe)."""

    scans: int = 0
    files_read: int = 0
    rows_out: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, files: int = 0, rows: int = 0, scans: int = 0) -> None:
        with self._lock:
            self.files_read += files
            self.rows_out += rows
            self.scans += scans


class TableScan:
    """Reads of one table at the snapshot ``travel`` picks, resolved once (later commits are not seen)."""

    def __init__(self, table: ReadableTable, **travel: Unpack[Travel]) -> None:
        self.table = table
        snapshot = table.resolve_snapshot(**travel)
        self.snapshot_id = None if snapshot is None else snapshot.id
        self.schema: pa.Schema = table.schema
        self.stats = ScanStats()

    def check_columns(self, columns: Sequence[str] | None) -> list[str]:
        if columns is None:
            return list(self.schema.names)
        if isinstance(columns, str):
            raise SchemaError(f"argument 'columns': expected a list of column names, got the string {columns!r}")
        for c in columns:
            check_column(c, self.schema.names)
        return list(columns)

    def splits(self, dnf: Filters | None = None, expression: pc.Expression | None = None) -> list[Split]:
        """The splits to read: planned with ``dnf`` and pruned file by file with ``expression``."""
        if self.snapshot_id is None:
            return []
        splits = self.table.plan(dnf, key_ranges=in_process_key_ranges(), snapshot_id=self.snapshot_id)
        if expression is not None:
            splits = prune_by_expression(splits, expression, self.table.table_schema)
        return splits

    def batches(
        self,
        columns: Sequence[str] | None = None,
        dnf: Filters | None = None,
        expression: pc.Expression | None = None,
        limit: int | None = None,
    ) -> Iterator[pa.Table]:
        """Merged rows: ``columns`` of the rows matching ``dnf`` and ``expression``, at most ``limit`` of them."""
        out_columns = self.check_columns(columns)
        read_columns = list(out_columns)
        if expression is not None:
            read_columns = list(dict.fromkeys([*read_columns, *expression_columns(expression, self.schema)]))
        self.stats.add(scans=1)
        if limit is not None and limit <= 0:
            return
        reader = self.table.split_reader(read_columns, dnf)
        remaining = limit
        for table in reader.read_splits(self._counted(self.splits(dnf, expression))):
            if expression is not None:
                table = table.filter(expression)
            table = table.select(out_columns)
            if remaining is not None:
                table = table.slice(0, remaining)
                remaining -= table.num_rows
            if table.num_rows:
                self.stats.add(rows=table.num_rows)
                yield table
            if remaining is not None and remaining <= 0:
                return

    def reader(
        self,
        columns: Sequence[str] | None = None,
        dnf: Filters | None = None,
        expression: pc.Expression | None = None,
        limit: int | None = None,
    ) -> pa.RecordBatchReader:
        names = self.check_columns(columns)
        schema = pa.schema([self.schema.field(c) for c in names])
        tables = self.batches(names, dnf, expression, limit)
        return pa.RecordBatchReader.from_batches(schema, (b for t in tables for b in t.to_batches()))

    def _counted(self, splits: Iterable[Split]) -> Iterator[Split]:
        for split in splits:
            self.stats.add(files=len(split.files))
            yield split


def expression_columns(expression: pc.Expression, schema: pa.Schema) -> list[str]:
    """The columns ``expression`` references (it fails to bind on an empty table without them)."""
    empty = schema.empty_table()
    used = []
    for name in schema.names:
        try:
            empty.drop_columns([name]).filter(expression)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, KeyError):
            used.append(name)
    return used


def prune_by_expression(splits: list[Split], expression: pc.Expression, schema: TableSchema) -> list[Split]:
    """Drop files whose partition values and key ranges make ``expression`` false for every row.

    Each file becomes a pyarrow fragment whose guarantee states those facts; pyarrow's simplification
    decides which fragments may match. Only key columns and partition values are used: a key's versions
    share its key, so a key range that excludes a match excludes it for every version (value statistics
    would not be safe, see :meth:`mergetable.read.scan.Planner.prune`), but for an append table, whose
    rows are records of their own, column statistics are used too.
    """
    by_total: dict[int, set[int] | None] = {}  # a partition's own bucket count (rescaled ones differ)
    for s in splits:
        if s.total_buckets not in by_total:
            by_total[s.total_buckets] = expression_buckets(expression, schema, s.total_buckets)
    files = [(s, f) for s in splits if (b := by_total[s.total_buckets]) is None or s.bucket in b for f in s.files]
    if not files:
        return []
    guarantees = [_guarantee(s, f, schema) for s, f in files]
    surviving = _may_match(expression, schema.arrow_schema, guarantees)
    keep = {files[i][1].file_name for i in surviving}
    out = []
    for s in splits:
        sections = tuple(
            sec
            for sec in (tuple(r for r in (tuple(f for f in run if f.file_name in keep) for run in section) if r)
                        for section in s.sections)
            if sec
        )  # fmt: skip
        if sections:
            out.append(dataclasses.replace(s, sections=sections))
    return out


def _may_match(expression: pc.Expression, schema: pa.Schema, guarantees: list[pc.Expression]) -> list[int]:
    """Indexes of the guarantees under which ``expression`` may hold (pyarrow's fragment pruning decides)."""
    dataset = ds.FileSystemDataset.from_paths(
        [f"f{i}" for i in range(len(guarantees))],
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=guarantees,
    )
    return [int(fragment.path[1:]) for fragment in dataset.get_fragments(filter=expression)]


def expression_buckets(
    expression: pc.Expression, schema: TableSchema, num_buckets: int | None = None
) -> set[int] | None:
    """The buckets that can hold rows matching ``expression``, or None when it does not fix every bucket key
    (``num_buckets``: of a partition with that many; default: the ``bucket`` option).

    Candidate values of each bucket key are read from the expression's text (``key == v``, ``is_in(key, …)``);
    they count only once pyarrow proves that the expression is false for every other value of the key.
    """
    arrow = schema.arrow_schema
    text = str(expression)
    conjunct = []
    for key in schema.bucket_keys:
        t = arrow.field(key).type
        values = None if pa.types.is_floating(t) else _candidates(text, key, t)
        if not values or len(values) > _MAX_CANDIDATES or not _only(expression, key, values, arrow):
            return None
        conjunct.append((key, "in", values))
    total = schema.table_options.bucket if num_buckets is None else num_buckets
    return candidate_buckets([conjunct], schema.bucket_keys, total, arrow)


_MAX_CANDIDATES = 1024


def _candidates(text: str, key: str, t: pa.DataType) -> list[Any] | None:
    name = re.escape(key)
    literals = re.findall(rf"\({name} == ([^()\n]+?)\)", text)
    for values in re.findall(rf"is_in\({name}, {{value_set=[^:]+:\[(.*?)\]", text, re.S):
        literals.extend(v.strip() for v in values.split(",\n"))
    out = []
    for literal in literals:
        literal = literal.strip()
        if literal.startswith('"') and literal.endswith('"') and "\\" not in literal:
            literal = literal[1:-1]
        try:
            out.append(pa.scalar(literal).cast(t).as_py())
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None
    return sorted(set(out)) if out else None


def _only(expression: pc.Expression, key: str, values: list[Any], schema: pa.Schema) -> bool:
    """Whether ``expression`` is false whenever ``key`` is none of ``values`` (one guarantee per gap between them)."""
    t = schema.field(key).type
    field, bounds = pc.field(key), [pa.scalar(v, t) for v in values]
    gaps = [field < bounds[0], field > bounds[-1]]
    gaps += [(field > lo) & (field < hi) for lo, hi in itertools.pairwise(bounds)]
    return not _may_match(expression, schema, gaps)


def _guarantee(split: Split, f: DataFileMeta, schema: TableSchema) -> pc.Expression:
    arrow = schema.arrow_schema
    terms: list[pc.Expression] = []
    for name, value in zip(schema.partition_keys, split.partition, strict=True):
        if value is None:
            terms.append(pc.field(name).is_null())
            continue
        scalar = _scalar(value, arrow.field(name).type, from_string=True)
        if scalar is not None:
            terms.append(pc.field(name) == scalar)
    stats = f.key_stats
    for name, lo, hi in zip(schema.trimmed_primary_keys, stats.min_values, stats.max_values, strict=False):
        t = arrow.field(name).type
        if lo is None or hi is None or pa.types.is_floating(t):
            continue
        low, high = _scalar(lo, t), _scalar(hi, t)
        if low is not None and high is not None:
            terms.append((pc.field(name) >= low) & (pc.field(name) <= high))
    if schema.is_append_table:
        terms += _value_ranges(f, schema)
    if not terms:
        return pc.scalar(True)
    out = terms[0]
    for term in terms[1:]:
        out = out & term
    return out


def _value_ranges(f: DataFileMeta, schema: TableSchema) -> list[pc.Expression]:
    """An append table's file: each row is a record of its own, so its column statistics bound every row
    (a column with nulls, or an unknown null count, may also be null). Files of another schema are left
    unbounded: their statistics name that schema's columns."""
    if f.schema_id != schema.id or not f.value_stats_cols:
        return []
    arrow, stats, out = schema.arrow_schema, f.value_stats, []
    nulls = stats.null_counts or (None,) * len(f.value_stats_cols)
    for name, lo, hi, n in zip(f.value_stats_cols, stats.min_values, stats.max_values, nulls, strict=False):
        if lo is None or hi is None or name not in arrow.names:
            continue
        t = arrow.field(name).type
        if pa.types.is_floating(t) or pa.types.is_nested(t):
            continue
        low, high = _scalar(lo, t), _scalar(hi, t)
        if low is None or high is None:
            continue
        term = (pc.field(name) >= low) & (pc.field(name) <= high)
        out.append(term if n == 0 else term | pc.field(name).is_null())
    return out


def _scalar(value: Any, t: pa.DataType, from_string: bool = False) -> pa.Scalar | None:
    """A typed scalar of a stored statistic or partition value, or None when it cannot be rebuilt exactly."""
    try:
        if from_string:
            return pa.scalar(value, pa.string()).cast(t)
        c = comparable(value, t)
        if pa.types.is_temporal(t):
            return pa.scalar(c, pa.int32() if t.bit_width == 32 else pa.int64()).cast(t)
        return pa.scalar(c, t)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None
