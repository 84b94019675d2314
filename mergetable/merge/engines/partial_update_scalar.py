"""Record-by-record partial update for one key, mirroring Paimon's ``PartialUpdateMergeFunction``.

Used by the vectorized engine for the rare keys it does not fold in bulk (a -D reaching
``partial-update.remove-record-on-sequence-group``), and by the tests as the reference. With partial
writes a column a record did not write is left alone (and counts as NULL in an ordering).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from mergetable.core.errors import MergeError
from mergetable.core.rowkind import RowKind
from mergetable.merge.engines.sequence_groups import PARTIAL_UPDATE_DELETE, PartialUpdateConfig
from mergetable.merge.layout import Layout


@dataclass
class Record:
    """One input record of a key: its kind, values by column and the columns it wrote (None = all)."""

    kind: int
    values: dict[str, Any]
    written: frozenset[str] | None = None

    @property
    def retract(self) -> bool:
        """Whether the record is -U or -D."""
        return self.kind in (RowKind.UPDATE_BEFORE, RowKind.DELETE)

    def get(self, column: str) -> Any:
        """The record's value for ``column`` (NULL when it did not write it)."""
        if self.written is not None and column not in self.written:
            return None
        return self.values.get(column)

    def wrote(self, column: str) -> bool:
        """Whether the record wrote ``column``."""
        return self.written is None or column in self.written


def _order_key(values: list[Any]) -> tuple[tuple[int, Any], ...]:
    return tuple((0, 0) if v is None else (1, v) for v in values)


class _KeyFold:
    def __init__(self, cfg: PartialUpdateConfig, columns: list[str], nullable: dict[str, bool]) -> None:
        self.cfg = cfg
        self.columns = columns
        self.nullable = nullable
        self.row: dict[str, Any] = dict.fromkeys(columns)
        self.states = {c: fn.new_state() for c, fn in cfg.functions.items()}
        self.meet_insert = False
        self.filled = False
        self.deleted = False

    def init_row(self, rec: Record) -> None:
        for i, c in enumerate(self.columns):
            value = rec.get(c)
            if value is None and not self.nullable.get(c, True):
                raise MergeError(f"Field {i} can not be null (column '{c}')")
            self.row[c] = value

    def add(self, rec: Record) -> None:
        cfg = self.cfg
        self.deleted = False
        if rec.retract:
            if not self.filled:
                self.init_row(rec)
                self.filled = True
            if cfg.ignore_delete:
                return
            if cfg.groups:
                self.retract_with_groups(rec)
                return
            if cfg.remove_on_delete:
                if rec.kind == RowKind.DELETE:
                    self.deleted = True
                    self.row = dict.fromkeys(self.columns)
                    self.init_row(rec)
                return
            raise MergeError(PARTIAL_UPDATE_DELETE)
        if not cfg.groups:
            for c in self.columns:
                value = rec.get(c)
                if value is not None:
                    self.row[c] = value
                elif rec.wrote(c) and not self.nullable.get(c, True):
                    raise MergeError(f"Field {self.columns.index(c)} can not be null (column '{c}')")
        else:
            self.update_with_groups(rec)
        self.meet_insert = True
        self.filled = True

    def _compare(self, rec: Record, ordering: tuple[str, ...]) -> int:
        new = _order_key([rec.get(f) for f in ordering])
        old = _order_key([self.row.get(f) for f in ordering])
        return (new > old) - (new < old)

    def _steps(self, rec: Record) -> Iterator[tuple[str, tuple[str, ...] | None, bool]]:
        """Per column, in order: ``(column, its sequence group's ordering or None, whether rec advances it)``.

        A group whose ordering ``rec`` leaves entirely NULL ignores the record, and once a column of an
        ordering has been yielded with ``advances`` the other ordering columns are not yielded again.
        """
        processed: set[str] = set()
        for c in self.columns:
            g = self.cfg.group_of.get(c)
            if g is None:
                yield c, None, True
                continue
            if c in processed:
                continue
            ordering = self.cfg.groups[g].ordering
            if all(rec.get(f) is None for f in ordering):
                processed.update(ordering)
                continue
            advances = self._compare(rec, ordering) >= 0
            if advances and c in ordering:
                processed.update(ordering)
            yield c, ordering, advances

    def update_with_groups(self, rec: Record) -> None:
        for c, ordering, advances in self._steps(rec):
            fn = self.cfg.functions.get(c)
            if ordering is None:
                if fn is not None:
                    if rec.wrote(c):
                        self.row[c] = fn.agg(self.row[c], rec.get(c), self.states[c])
                elif rec.get(c) is not None:
                    self.row[c] = rec.get(c)
            elif advances and c in ordering:
                for f in ordering:
                    self.row[f] = rec.get(f)
            elif advances:
                if rec.wrote(c):
                    self.row[c] = rec.get(c) if fn is None else fn.agg(self.row[c], rec.get(c), self.states[c])
            elif fn is not None and rec.wrote(c):
                self.row[c] = fn.agg_old(self.row[c], rec.get(c), self.states[c])

    def retract_with_groups(self, rec: Record) -> None:
        cfg = self.cfg
        updated: set[str] = set()
        for c, ordering, advances in self._steps(rec):
            if ordering is None:
                continue
            fn = cfg.functions.get(c)
            if advances and c in ordering:
                for f in ordering:
                    if f in updated:
                        continue
                    if rec.kind == RowKind.DELETE and f in cfg.remove_on_group:
                        self.deleted = True
                        self.row = dict.fromkeys(self.columns)
                        self.init_row(rec)
                        return
                    self.row[f] = rec.get(f)
                    updated.add(f)
            elif advances and fn is None:
                if rec.wrote(c):
                    self.row[c] = None
            elif fn is not None and rec.wrote(c) and not cfg.ignore_retract.get(c, False):
                self.row[c] = fn.retract(self.row[c], rec.get(c), self.states[c])

    def result(self) -> tuple[dict[str, Any], int]:
        kind = RowKind.DELETE if self.deleted or not self.meet_insert else RowKind.INSERT
        return self.row, int(kind)


def fold_key(
    cfg: PartialUpdateConfig, columns: list[str], nullable: dict[str, bool], records: list[Record]
) -> tuple[dict[str, Any], int]:
    """Fold one key's records (oldest first, at least two) into (values by column, row kind)."""
    fold = _KeyFold(cfg, columns, nullable)
    for rec in records:
        fold.add(rec)
    return fold.result()


def fold_groups_scalar(
    cfg: PartialUpdateConfig,
    layout: Layout,
    columns: list[str],
    nullable: dict[str, bool],
    written: Mapping[str, np.ndarray] | None,
) -> tuple[dict[str, pa.Array], np.ndarray]:
    """Fold every group of a contiguous ``layout`` record by record.

    ``columns`` are the value columns to fold; ``written`` holds, per column, which positions wrote it
    (``None``: every record wrote every column).
    """
    py = {c: layout.column(c).to_pylist() for c in columns}
    kinds = layout.kinds.tolist()
    wrote = None if written is None else {c: written[c].tolist() for c in columns}
    out: dict[str, list[Any]] = {c: [None] * layout.n_groups for c in columns}
    out_kinds = np.empty(layout.n_groups, dtype=np.int8)
    for g, (s, e) in enumerate(zip(layout.starts.tolist(), layout.ends.tolist())):
        records = []
        for i in range(s, e):
            cols = None if wrote is None else frozenset(c for c in columns if wrote[c][i])
            records.append(Record(kinds[i], {c: py[c][i] for c in columns}, cols))
        row, kind = fold_key(cfg, columns, nullable, records)
        for c in columns:
            out[c][g] = row[c]
        out_kinds[g] = kind
    types = {f.name: f.type for f in layout.rows.schema}
    return {c: pa.array(out[c], type=types[c]) for c in columns}, out_kinds


__all__ = ["Record", "fold_groups_scalar", "fold_key"]
