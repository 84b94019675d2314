"""Helpers for the merge-engine tests: build key-value rows, run engines, simulate commits."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.core.rowkind import RowKind
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema
from mergetable.merge import WRITE_MASK, create_merge_function, validate_merge_options
from mergetable.merge.base import MergeFunction

KINDS = {"+I": RowKind.INSERT, "-U": RowKind.UPDATE_BEFORE, "+U": RowKind.UPDATE_AFTER, "-D": RowKind.DELETE}


def make_schema(
    fields: Sequence[tuple[str, pa.DataType]] | pa.Schema,
    primary_key: Sequence[str] = ("k",),
    options: dict[str, str] | None = None,
    partition_keys: Sequence[str] = (),
) -> TableSchema:
    """A validated table schema (merge options checked as at create_table)."""
    arrow = fields if isinstance(fields, pa.Schema) else pa.schema([pa.field(n, t) for n, t in fields])
    schema = TableSchema.create(arrow, list(primary_key), list(partition_keys), options or {})
    validate_merge_options(schema)
    return schema


def engine(schema: TableSchema) -> MergeFunction:
    return create_merge_function(schema)


def kv(
    schema: TableSchema,
    rows: Sequence[dict[str, Any] | Sequence[Any]],
    kinds: Sequence[str] | str | None = None,
    seq: Sequence[int] | int = 0,
    masks: Sequence[Sequence[str] | None] | None = None,
) -> pa.Table:
    """Key-value rows in the data-file layout. ``rows`` are dicts or tuples in column order.

    ``kinds`` are '+I'/'-U'/'+U'/'-D' (one string = all rows); ``seq`` is the first sequence number or
    one per row; ``masks`` lists each row's written columns (``None`` = all) and adds ``_WRITE_MASK``.
    """
    names = list(schema.column_names)
    dicts = [r if isinstance(r, dict) else dict(zip(names, r, strict=True)) for r in rows]
    n = len(dicts)
    if kinds is None or isinstance(kinds, str):
        kinds = [kinds or "+I"] * n
    seqs = list(range(seq, seq + n)) if isinstance(seq, int) else list(seq)
    fs = schema.file_schema
    cols = []
    for f in fs:
        if f.name == SEQUENCE_NUMBER:
            cols.append(pa.array(seqs, pa.int64()))
        elif f.name == VALUE_KIND:
            cols.append(pa.array([int(KINDS[k]) for k in kinds], pa.int8()))
        else:
            cols.append(pa.array([d.get(f.name) for d in dicts], f.type))
    table = pa.Table.from_arrays(cols, schema=fs)
    if masks is not None:
        values = []
        for m in masks:
            cols_written = names if m is None else list(m)
            bits = 0
            for c in cols_written:
                bits |= 1 << names.index(c)
            values.append(bits)
        table = table.append_column(WRITE_MASK, pa.array(values, pa.int64()))
    return table


def merge(fn: MergeFunction, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
    return fn.merge(rows, seq_ordered=seq_ordered)


def visible(schema: TableSchema, result: pa.Table) -> list[dict[str, Any]]:
    """Rows readers would see: retractions dropped, user columns only, sorted by key."""
    kinds = np.asarray(result.column(VALUE_KIND).to_numpy())
    keep = (kinds != RowKind.UPDATE_BEFORE) & (kinds != RowKind.DELETE)
    out = result.filter(pa.array(keep)).select(list(schema.column_names)).to_pylist()
    return sorted(out, key=lambda r: tuple(str(r[k]) for k in schema.primary_keys))


def rows_of(schema: TableSchema, result: pa.Table) -> list[dict[str, Any]]:
    """Every result row (retractions included) with its kind as a string."""
    inverse = {int(v): k for k, v in KINDS.items()}
    out = []
    for r in result.to_pylist():
        d = {c: r[c] for c in schema.column_names}
        d["_kind"] = inverse[r[VALUE_KIND]]
        out.append(d)
    return out


def commits(
    fn: MergeFunction,
    schema: TableSchema,
    batches: Sequence[Sequence[Any]],
    kinds: Sequence[Sequence[str] | str | None] | None = None,
    masks: Sequence[Sequence[Sequence[str] | None] | None] | None = None,
) -> pa.Table:
    """Write ``batches`` as successive commits (each pre-merged like a write buffer), then merge all."""
    seq = 0
    merged = []
    for i, batch in enumerate(batches):
        rows = kv(schema, batch, None if kinds is None else kinds[i], seq, None if masks is None else masks[i])
        seq += len(batch)
        merged.append(fn.merge(rows, seq_ordered=True))
    if any(WRITE_MASK in m.column_names for m in merged):
        full = (1 << len(schema.column_names)) - 1
        merged = [
            m
            if WRITE_MASK in m.column_names
            else m.append_column(WRITE_MASK, pa.array([full] * m.num_rows, pa.int64()))
            for m in merged
        ]
    return fn.merge(pa.concat_tables(merged), seq_ordered=True)


def agg_schema(function: str, type_: pa.DataType, **options: str) -> TableSchema:
    """A (k BIGINT, v <type_>) aggregation table folding ``v`` with ``function``."""
    opts = {"merge-engine": "aggregation", "fields.v.aggregate-function": function}
    opts.update({f"fields.v.{k.replace('_', '-')}": val for k, val in options.items()})
    return make_schema([("k", pa.int64()), ("v", type_)], options=opts)


def fold(
    function: str, type_: pa.DataType, values: Sequence[Any], kinds: Sequence[str] | None = None, **options: str
) -> Any:
    """The aggregated ``v`` of one key whose records carry ``values`` (in order)."""
    s = agg_schema(function, type_, **options)
    result = engine(s).merge(kv(s, [(1, v) for v in values], kinds))
    assert result.num_rows == 1
    return result.column("v")[0].as_py()
