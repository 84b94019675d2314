"""``partial-update``: each column takes the newest non-null value (Paimon ``PartialUpdateMergeFunction``).

Without sequence groups every column is "last non-null add" — one ``np.maximum.at`` per column. Deletes:
``ignore-delete`` skips them, ``partial-update.remove-record-on-delete`` re-initialises the row from the
newest -D (a trailing -D removes the key), otherwise a -U/-D in a multi-record key is an error. As in
Paimon, a key whose first record is a retraction starts from that record's values, and a key without
any add yields -D.

Sequence groups (``fields.<g>.sequence-group``) protect columns with their own ordering fields; per key
and group a record *advances* the group when its ordering is >= the running maximum (NULL lowest); the
protected columns take the newest advancing record's values, NULL included ("true partial update"),
retractions null them, and aggregate functions receive ``agg``/``aggReversed``/``retract`` events. This
is computed with a segmented running maximum over dense ordering ranks. Keys where a -D meets
``partial-update.remove-record-on-sequence-group`` are folded record by record
(:mod:`~mergetable.merge.engines.partial_update_scalar`).

Partial writes: a column only takes values from records whose ``_WRITE_MASK`` includes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.errors import MergeError
from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import TableSchema
from mergetable.merge.aggregates.base import ADD, ADD_OLD, RESET, RETRACT, FoldInput
from mergetable.merge.arrays import scatter
from mergetable.merge.engines.aggregation import check_not_null_reset
from mergetable.merge.engines.base import EngineBase, assemble, null_where
from mergetable.merge.engines.partial_update_scalar import fold_groups_scalar
from mergetable.merge.engines.sequence_groups import PARTIAL_UPDATE_DELETE, PartialUpdateConfig, SequenceGroup
from mergetable.merge.layout import Layout


def _valid(col: pa.Array) -> np.ndarray:
    if col.null_count == 0:
        return np.ones(len(col), dtype=bool)
    return np.asarray(col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)


def _take(col: pa.Array, positions: np.ndarray) -> pa.Array:
    return col.take(pa.array(positions, mask=positions < 0))


def dense_rank(columns: Sequence[pa.Array]) -> np.ndarray:
    """Dense rank of each row's tuple of ``columns`` (lexicographic, NULL lowest)."""
    n = len(columns[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    table = pa.table({f"c{i}": c for i, c in enumerate(columns)})
    order = np.asarray(
        pc.sort_indices(table, sort_keys=[(f"c{i}", "ascending", "at_start") for i in range(len(columns))])
    )
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for c in columns:
        s = c.take(pa.array(order))
        ne = pc.not_equal(s[1:], s[:-1])
        both_null = pc.and_(s[1:].is_null(), s[:-1].is_null())
        differs = pc.if_else(both_null, False, pc.fill_null(ne, True))
        change[1:] |= np.asarray(differs.to_numpy(zero_copy_only=False), dtype=bool)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.cumsum(change) - 1
    return rank


class PartialUpdate(EngineBase):
    """Vectorized partial update with sequence groups and aggregate functions."""

    def __init__(self, schema: TableSchema) -> None:
        super().__init__(schema)
        self.cfg = PartialUpdateConfig.parse(schema)

    def required_columns(self, wanted: Sequence[str]) -> list[str]:
        extra: list[str] = []
        for c in wanted:
            g = self.cfg.group_of.get(c)
            if g is not None:
                extra.extend(self.cfg.groups[g].ordering)
        if self.cfg.remove_on_group:
            for group in self.cfg.groups:
                extra.extend(group.ordering)
        return list(dict.fromkeys([*wanted, *self.seq_fields, *extra]))

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table:
        rows = self.drop_deletes(rows, ignore=False)
        layout = Layout.build(rows, self.keys, self.seq_fields, self.seq_descending, seq_ordered)
        if layout.n_groups == 0:
            return rows
        if not self.cfg.groups:
            return self._merge_plain(layout)
        return self._merge_groups(layout.contiguous_layout())

    # -- no sequence groups ---------------------------------------------------------------------------
    def _merge_plain(self, layout: Layout) -> pa.Table:
        cfg = self.cfg
        multi = layout.sizes > 1
        kinds = layout.kinds
        retract = is_retract(kinds)
        in_multi = multi[layout.gid]
        if bool(np.any(retract & in_multi)) and not cfg.ignore_delete and not cfg.remove_on_delete:
            raise MergeError(PARTIAL_UPDATE_DELETE)
        masks = self.masks(layout)
        first = layout.first_pos
        base = np.where(retract[first], first, -1)
        if cfg.remove_on_delete and not cfg.ignore_delete:
            last_delete = layout.last_where(kinds == RowKind.DELETE)
            base = np.where(last_delete >= 0, last_delete, base)
        positions = np.arange(layout.num_positions, dtype=np.int64)
        adds = ~retract
        after_base = positions > base[layout.gid] if bool(np.any(base >= 0)) else None
        eligible = adds if after_base is None else adds & after_base
        is_base = np.zeros(layout.num_positions, dtype=bool)
        is_base[base[base >= 0]] = True
        check_not_null_reset(layout, self.schema, self.nullable, self.data_columns(layout.rows), is_base & in_multi)
        values: dict[str, pa.Array] = {}
        for c in self.data_columns(layout.rows):
            col = layout.column(c)
            valid = _valid(col)
            wrote = self.written(masks, c)
            cand = eligible & valid if wrote is None else eligible & valid & wrote
            if not self.nullable.get(c, True):
                bad = adds & ~valid & in_multi if wrote is None else adds & ~valid & wrote & in_multi
                if bad.any():
                    raise MergeError(f"Field {self.schema.column_names.index(c)} can not be null (column '{c}')")
            last = layout.last_where(None if bool(cand.all()) else cand)
            values[c] = _take(col, np.where(last >= 0, last, base))
        has_add = layout.any_where(adds)
        out_kinds = np.where(has_add, RowKind.INSERT, RowKind.DELETE).astype(np.int8)
        if cfg.remove_on_delete and not cfg.ignore_delete:
            out_kinds[kinds[layout.last_pos] == RowKind.DELETE] = RowKind.DELETE
        out_masks = None if masks is None else self.or_masks(layout, masks)
        return assemble(layout, values, out_kinds, out_masks, ~multi)

    # -- sequence groups --------------------------------------------------------------------------------
    def _merge_groups(self, layout: Layout) -> pa.Table:
        cfg = self.cfg
        multi = layout.sizes > 1
        kinds = layout.kinds
        retract = is_retract(kinds)
        adds = ~retract
        masks = self.masks(layout)
        first = layout.first_pos
        init_group = retract[first] & multi
        is_init = np.zeros(layout.num_positions, dtype=bool)
        is_init[first[init_group]] = True
        ignored = retract if cfg.ignore_delete else np.zeros(layout.num_positions, dtype=bool)
        base = np.where(init_group, first, -1)
        check_not_null_reset(layout, self.schema, self.nullable, self.data_columns(layout.rows), is_init)
        present = set(layout.rows.column_names)
        scalar_groups = np.zeros(layout.n_groups, dtype=bool)
        columns: dict[str, pa.Array] = {}
        values: dict[str, pa.Array] = {}

        def column(name: str) -> pa.Array:
            if name not in columns:
                col = layout.column(name)
                wrote = self.written(masks, name)
                columns[name] = col if wrote is None else null_where(col, ~wrote)
            return columns[name]

        advances: list[tuple[np.ndarray, np.ndarray] | None] = []
        for group in cfg.groups:
            if not all(f in present for f in group.ordering):
                advances.append(None)
                continue
            advance, valid_ord = self._advance(layout, group, column, ignored, is_init)
            advances.append((advance, valid_ord))
            if cfg.remove_on_group & set(group.ordering):
                candidates = (kinds == RowKind.DELETE) & advance & ~ignored & multi[layout.gid]
                scalar_groups |= layout.any_where(candidates)
        for c in self.data_columns(layout.rows):
            g = cfg.group_of.get(c)
            col = column(c)
            if g is None:
                cand = adds & _valid(col)
                last = layout.last_where(cand)
                values[c] = _take(col, np.where(last >= 0, last, base))
                continue
            group = cfg.groups[g]
            adv = advances[g]
            if adv is None:
                values[c] = _take(col, base)
                continue
            advance, valid_ord = adv
            writers = advance & ~ignored
            fn = cfg.functions.get(c)
            if c in group.ordering or fn is None:
                wrote = self.written(masks, c)
                if wrote is not None and c not in group.ordering:
                    writers &= wrote
                last = layout.last_where(writers)
                nulled = np.zeros(layout.n_groups, dtype=bool)
                hit = last >= 0
                nulled[hit] = retract[last[hit]] & (c not in group.ordering)
                pick = np.where(hit, np.where(nulled, -1, last), base)
                values[c] = _take(col, pick)
                continue
            wrote = self.written(masks, c)
            recs = valid_ord if wrote is None else valid_ord & wrote
            values[c] = self._fold_aggregated(layout, c, col, advance, recs, retract, ignored, init_group, multi)
        has_add = layout.any_where(adds)
        out_kinds = np.where(has_add, RowKind.INSERT, RowKind.DELETE).astype(np.int8)
        out_masks = None if masks is None else self.or_masks(layout, masks)
        if scalar_groups.any():
            values, out_kinds = self._apply_scalar(layout, scalar_groups, values, out_kinds, masks)
        return assemble(layout, values, out_kinds, out_masks, ~multi)

    def _advance(
        self,
        layout: Layout,
        group: SequenceGroup,
        column: Callable[[str], pa.Array],
        ignored: np.ndarray,
        is_init: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per position: whether the record advances the group's ordering, and whether it has one."""
        ords = [column(f) for f in group.ordering]
        valid_ord = np.zeros(layout.num_positions, dtype=bool)
        for o in ords:
            valid_ord |= _valid(o)
        participant = valid_ord & (~ignored | is_init)
        rank = dense_rank(ords)
        key = np.where(participant, rank, -1)
        span = int(rank.max()) + 2 if len(rank) else 2
        offset = layout.gid * span
        running = np.maximum.accumulate(key + 1 + offset) - offset - 1
        previous = np.empty_like(running)
        previous[1:] = running[:-1]
        previous[layout.starts[layout.sizes > 0]] = -1
        return participant & (key >= previous), valid_ord

    def _fold_aggregated(
        self,
        layout: Layout,
        c: str,
        col: pa.Array,
        advance: np.ndarray,
        participating: np.ndarray,
        retract: np.ndarray,
        ignored: np.ndarray,
        init_group: np.ndarray,
        multi: np.ndarray,
    ) -> pa.Array:
        """Fold an aggregated protected column: records with the group's ordering that wrote it."""
        cfg = self.cfg
        fn = cfg.functions[c]
        recs = participating & ~ignored
        if cfg.ignore_retract.get(c, False):
            recs &= ~retract
        events = np.where(retract, RETRACT, np.where(advance, ADD, ADD_OLD)).astype(np.int8)
        positions = np.flatnonzero(recs)
        ev = events[positions]
        inits = layout.first_pos[init_group]
        if len(inits):
            all_pos = np.concatenate([inits, positions])
            all_ev = np.concatenate([np.full(len(inits), RESET, dtype=np.int8), ev])
            order = np.argsort(np.concatenate([inits * 2, positions * 2 + 1]), kind="stable")
            positions, ev = all_pos[order], all_ev[order]
        fi = FoldInput(c, layout.n_groups, layout.gid[positions], col.take(pa.array(positions)), ev, multi, True)
        return fn.run(fi)

    def _apply_scalar(
        self,
        layout: Layout,
        groups: np.ndarray,
        values: dict[str, pa.Array],
        kinds: np.ndarray,
        masks: np.ndarray | None,
    ) -> tuple[dict[str, pa.Array], np.ndarray]:
        sub, positions = layout.restrict(groups)
        columns = self.data_columns(sub.rows)
        written = None
        if masks is not None:
            sub_masks = masks[positions]
            written = {c: self.written(sub_masks, c) for c in columns}
        scalar_values, scalar_kinds = fold_groups_scalar(self.cfg, sub, columns, self.nullable, written)
        targets = np.flatnonzero(groups)
        out = {c: scatter(arr, targets, scalar_values[c]) for c, arr in values.items()}
        kinds = kinds.copy()
        kinds[targets] = scalar_kinds
        return out, kinds


__all__ = ["PartialUpdate", "dense_rank"]
