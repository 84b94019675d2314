"""Cross-partition upsert: a key table whose primary key lacks a partition key, where a key moves between partitions.

Such a table (:attr:`~mergetable.core.schema.TableSchema.is_cross_partition`, always dynamic bucket mode) is merged
on the key alone, so a key must be live in one partition only. A writer routes its rows through a
:class:`CrossPartitionRouter` before they are placed in buckets: it looks each key up in :class:`KeyLocations`,
the partition of every live key of the latest snapshot (bootstrapped by the read tier,
:mod:`mergetable.read.key_index`), and applies Paimon's rule for a row whose key lives in another partition,
chosen by the merge engine (:func:`existing_rule`):

* ``deduplicate``: a ``-D`` of the key (the new row with the old partition's values) goes to the old partition,
  and the row to its own partition (:attr:`ExistingRule.DELETE`);
* ``partial-update``, ``aggregation`` (and ``versioned``): the row goes to the old partition, its partition
  fields set to the old values, so that it merges with the old row (:attr:`ExistingRule.USE_OLD`);
* ``first-row``: the row is dropped, the old one is kept (:attr:`ExistingRule.SKIP_NEW`).

The bucket is then the dynamic one: an old partition's HASH index holds the key, so it keeps its bucket there.
A retract row (``-U``/``-D``) goes to the key's current partition. A key's rows of one write are routed as if
processed one after the other in input order (as Paimon's assigner does), computed per key with numpy: a key
written into ``a`` then ``b`` by a deduplicate write leaves ``+I a, -D a, +I b``. The ``-D`` carries the new row's
values (its ``sequence.field`` too, as in Paimon). Keys of a write are remembered for the next batches.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mergetable.core.buckets import Partition
from mergetable.core.errors import UnsupportedError
from mergetable.core.options import MergeEngine
from mergetable.core.rowkind import RowKind, is_retract
from mergetable.core.schema import TableSchema
from mergetable.write.input import partition_ids

PARTITION_ID = "_PARTITION_ID"
"""The column of :attr:`KeyLocations.keys` holding each key's partition (an index into ``partitions``)."""
_ROW = "_XP_ROW"
_KEY = "_XP_KEY"


class ExistingRule(enum.Enum):
    """What happens to a row whose key lives in another partition (Paimon's ``ExistingProcessor`` kinds)."""

    DELETE = "delete"
    USE_OLD = "use-old"
    SKIP_NEW = "skip-new"


def existing_rule(engine: MergeEngine) -> ExistingRule:
    """The rule of a merge engine.

    >>> existing_rule(MergeEngine.PARTIAL_UPDATE).name, existing_rule(MergeEngine.FIRST_ROW).name
    ('USE_OLD', 'SKIP_NEW')
    """
    if engine is MergeEngine.DEDUPLICATE:
        return ExistingRule.DELETE
    if engine is MergeEngine.FIRST_ROW:
        return ExistingRule.SKIP_NEW
    return ExistingRule.USE_OLD


@dataclass(frozen=True)
class KeyLocations:
    """The partition of every live key of a snapshot.

    Attributes:
        keys: The trimmed primary-key columns and :data:`PARTITION_ID`, one row per key.
        partitions: The partitions (string form) that ``PARTITION_ID`` indexes.
        values: The partition columns, typed, one row per entry of ``partitions``.
        snapshot_id: The snapshot it was read from (None: an empty table).

    Example:
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64()), ("dt", pa.string())]), ["id"], ["dt"])
        >>> loc = KeyLocations.of(schema, pa.table({"id": [1, 2], "dt": ["a", "b"]}), 4)
        >>> loc.partitions, loc.keys.column(PARTITION_ID).to_pylist()
        ((('a',), ('b',)), [0, 1])
    """

    keys: pa.Table
    partitions: tuple[Partition, ...]
    values: pa.Table
    snapshot_id: int | None

    @classmethod
    def of(cls, schema: TableSchema, rows: pa.Table, snapshot_id: int | None) -> KeyLocations:
        """From ``rows`` holding the trimmed primary key and the partition columns of each live key."""
        arrow = schema.arrow_schema
        part_fields = [arrow.field(p) for p in schema.partition_keys]
        key_fields = [arrow.field(k) for k in schema.trimmed_primary_keys]
        if rows.num_rows == 0:
            keys = pa.schema([*key_fields, pa.field(PARTITION_ID, pa.int32())]).empty_table()
            return cls(keys, (), pa.schema(part_fields).empty_table(), snapshot_id)
        ids, parts = partition_ids(rows, schema)
        first = np.unique(ids, return_index=True)[1]
        values = rows.select(list(schema.partition_keys)).take(pa.array(first)).cast(pa.schema(part_fields))
        keys = rows.select(list(schema.trimmed_primary_keys)).cast(pa.schema(key_fields))
        keys = keys.append_column(PARTITION_ID, pa.array(ids.astype(np.int32)))
        return cls(keys, tuple(parts), values, snapshot_id)


class KeyBootstrap(Protocol):
    """A table's key index (the read tier's :class:`mergetable.read.key_index.KeyIndex`)."""

    def __call__(self) -> KeyLocations:
        """The key locations of the latest snapshot."""

    def remember(self, locations: KeyLocations) -> None:
        """Keep ``locations`` as those of snapshot ``locations.snapshot_id`` (a writer's, once committed)."""


class CrossPartitionRouter:
    """Routes a writer's rows of a cross-partition table (see the module docstring).

    Example:
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64()), ("dt", pa.string())]), ["id"], ["dt"])
        >>> stored = KeyLocations.of(schema, pa.table({"id": [1], "dt": ["a"]}), 1)
        >>> router = CrossPartitionRouter(schema, lambda: stored)
        >>> rows, kinds = router.route(pa.table({"id": [1, 2], "dt": ["b", "b"]}), pa.array([0, 0], pa.int8()))
        >>> rows.to_pydict(), kinds.to_pylist()
        ({'id': [1, 1, 2], 'dt': ['a', 'b', 'b']}, [3, 0, 0])
    """

    def __init__(self, schema: TableSchema, bootstrap: Callable[[], KeyLocations], guarded: bool = True) -> None:
        self.schema = schema
        self.guarded = guarded
        self.rule = existing_rule(schema.table_options.merge_engine)
        self._bootstrap = bootstrap
        self._keys: pa.Table | None = None
        self._ids: dict[Partition, int] = {}
        self._values: pa.Table | None = None
        self.base_snapshot_id: int | None = None
        """The snapshot whose key locations the rows were routed against."""
        self.routed_rows = False
        """Whether a row that is not a retract was routed: the commit then checks for concurrent writes (never
        with ``guarded`` false: a whole-table overwrite, which replaces whatever is live when it commits)."""
        self.key_log: list[tuple[pa.Table, np.ndarray]] | None = None
        """Set to a list to collect, for each routed batch, its distinct trimmed keys and the partition id each
        is left live in (-1: none; see :meth:`locations`), e.g. to check that writers of disjoint rows agree."""

    def _load(self) -> pa.Table:
        if self._keys is None:
            loc = self._bootstrap()
            self._keys, self._values, self.base_snapshot_id = loc.keys, loc.values, loc.snapshot_id
            self._ids = {p: i for i, p in enumerate(loc.partitions)}
        return self._keys

    def locations(self) -> KeyLocations:
        """The key locations once the rows routed so far are committed (on top of the base snapshot)."""
        keys = self._load()
        assert self._values is not None
        return KeyLocations(keys, tuple(self._ids), self._values, self.base_snapshot_id)

    def _own_partitions(self, table: pa.Table) -> np.ndarray:
        """Each row's partition id (registering new partitions with their typed values)."""
        local, parts = partition_ids(table, self.schema)
        first = np.unique(local, return_index=True)[1]
        mapping = np.empty(len(parts), dtype=np.int32)
        new_rows: list[int] = []
        for j, p in enumerate(parts):  # one step per partition of the input (few)
            if p not in self._ids:
                self._ids[p] = len(self._ids)
                new_rows.append(int(first[j]))
            mapping[j] = self._ids[p]
        if new_rows:
            assert self._values is not None
            added = table.select(list(self.schema.partition_keys)).take(pa.array(new_rows))
            self._values = pa.concat_tables([self._values, added.cast(self._values.schema)])
        return mapping[local]

    def route(self, table: pa.Table, kinds: pa.Array) -> tuple[pa.Table, pa.Array]:
        """The rows to write instead of ``table`` (with row kinds ``kinds``), and their kinds."""
        state = self._load()
        n = table.num_rows
        if n == 0:
            return table, kinds
        trimmed = list(self.schema.trimmed_primary_keys)
        own = self._own_partitions(table)
        keys = table.select(trimmed).cast(state.select(trimmed).schema)
        distinct = keys.group_by(trimmed, use_threads=False).aggregate([])
        groups = distinct.num_rows
        distinct = distinct.append_column(_KEY, pa.array(np.arange(groups, dtype=np.int64)))
        joined = keys.append_column(_ROW, pa.array(np.arange(n, dtype=np.int64))).join(
            distinct, trimmed, join_type="inner", use_threads=False
        )
        key_of = np.empty(n, dtype=np.int64)
        key_of[_np(joined.column(_ROW))] = _np(joined.column(_KEY))
        found = state.join(distinct, trimmed, join_type="inner", use_threads=False)  # the batch is the build side
        old = np.full(groups, -1, dtype=np.int32)
        old[_np(found.column(_KEY))] = _np(found.column(PARTITION_ID))
        codes = np.asarray(kinds.to_numpy(zero_copy_only=False))
        removes = removes_key(self.schema, codes)
        target, keep, delete_at, final = _sequential(self.rule, key_of, own, old, is_retract(codes), removes)
        out, out_kinds = self._emit(table, kinds, own, target, keep, delete_at)
        has = final >= 0
        if self.key_log is not None:
            self.key_log.append((distinct.select(trimmed), final))
        self.routed_rows = self.routed_rows or (self.guarded and not is_retract(codes).all())
        rest = state.join(distinct.select(trimmed), trimmed, join_type="left anti", use_threads=False)
        added = distinct.filter(pa.array(has)).select(trimmed).append_column(PARTITION_ID, pa.array(final[has]))
        self._keys = pa.concat_tables([rest.select(state.schema.names).cast(state.schema), added.cast(state.schema)])
        return out, out_kinds

    def _with_partitions(self, table: pa.Table, target: np.ndarray, rows: np.ndarray | None) -> pa.Table:
        """``table``'s partition columns set to the values of partitions ``target`` (only at ``rows``: a mask)."""
        assert self._values is not None
        picks = pa.array(target)
        for name in self.schema.partition_keys:
            i = table.schema.get_field_index(name)
            col = table.column(i)
            new = self._values.column(name).take(picks).cast(col.type)
            table = table.set_column(i, name, new if rows is None else pc.if_else(pa.array(rows), new, col))
        return table

    def _emit(
        self,
        table: pa.Table,
        kinds: pa.Array,
        own: np.ndarray,
        target: np.ndarray,
        keep: np.ndarray,
        delete_at: np.ndarray,
    ) -> tuple[pa.Table, pa.Array]:
        moved = target != own
        routed = self._with_partitions(table, target, moved) if moved.any() else table
        deletes = np.flatnonzero(delete_at >= 0)
        if len(deletes) == 0:
            if keep.all():
                return routed, kinds
            mask = pa.array(keep)
            return routed.filter(mask), kinds.filter(mask)
        retracts = self._with_partitions(table.take(pa.array(deletes)), delete_at[deletes], None)
        # each -D goes right before the row that moved its key: order 2i for it, 2i + 1 for row i
        rank = np.concatenate([np.flatnonzero(keep) * 2 + 1, deletes * 2])
        order = pa.array(np.argsort(rank, kind="stable"))
        both = pa.concat_tables([routed.filter(pa.array(keep)), retracts])
        delete_kind = pa.array(np.full(len(deletes), int(RowKind.DELETE), np.int8))
        all_kinds = pa.concat_arrays([kinds.filter(pa.array(keep)), delete_kind.cast(kinds.type)])
        return both.take(order), all_kinds.take(order)


def _np(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    return np.asarray(col.to_numpy())


def removes_key(schema: TableSchema, kinds: np.ndarray) -> np.ndarray:
    """Which rows of kinds ``kinds`` remove their key, so that the key lives nowhere after them: every retract of a
    deduplicate or first-row table, a ``-D`` of a partial-update or aggregation table that removes records on
    delete (``*.remove-record-on-delete``); other retracts change the row in place."""
    opts = schema.table_options
    rule = existing_rule(opts.merge_engine)
    if rule is not ExistingRule.USE_OLD:
        return is_retract(kinds)
    engine = opts.merge_engine
    if (engine is MergeEngine.PARTIAL_UPDATE and opts.partial_update_remove_record_on_delete) or (
        engine is MergeEngine.AGGREGATION and opts.aggregation_remove_record_on_delete
    ):
        return np.asarray(kinds == int(RowKind.DELETE))
    return np.zeros(len(kinds), dtype=bool)


def _sequential(
    rule: ExistingRule, key_of: np.ndarray, own: np.ndarray, old: np.ndarray, retract: np.ndarray, removes: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each row's partition, whether it is kept, the partition of the ``-D`` written before it (-1: none), and
    each key's partition after the rows (-1: none), as processing the rows in order would give.

    ``key_of``: each row's key (0..k-1), ``own``: its partition, ``old``: each key's partition before (-1: none),
    ``retract``: the ``-U``/``-D`` rows, ``removes``: those of them after which the key lives nowhere.

    >>> no = np.array([False, False, False])
    >>> t, k, d, f = _sequential(ExistingRule.DELETE, np.array([0, 0, 0]), np.array([1, 2, 1], np.int32),
    ...                          np.array([-1], np.int32), no, no)
    >>> t.tolist(), d.tolist(), f.tolist()
    ([1, 2, 1], [-1, 1, 2], [1])
    >>> t, k, d, f = _sequential(ExistingRule.USE_OLD, np.array([0, 0, 0]), np.array([1, 2, 2], np.int32),
    ...                          np.array([0], np.int32), no, no)
    >>> t.tolist(), f.tolist()
    ([0, 0, 0], [0])
    """
    n = len(key_of)
    order = np.argsort(key_of, kind="stable")
    key_s, own_s, retract_s, removes_s = key_of[order], own[order], retract[order], removes[order]
    pos = np.arange(n)
    # a segment: a key's rows up to and including one that removes it; the key lives nowhere when the next begins
    prior_removes = np.cumsum(removes_s) - removes_s
    boundary = np.ones(n, dtype=bool)
    boundary[1:] = (key_s[1:] != key_s[:-1]) | (prior_removes[1:] != prior_removes[:-1])
    first_of_key = np.ones(n, dtype=bool)
    first_of_key[1:] = key_s[1:] != key_s[:-1]
    seg_start = np.maximum.accumulate(np.where(boundary, pos, 0))
    starts = np.flatnonzero(boundary)
    sizes = np.diff(np.append(starts, n))
    start_old = np.where(first_of_key[starts], old[key_s[starts]], -1)
    old_s = np.repeat(start_old, sizes)
    insert_s = ~retract_s
    keep_s = np.ones(n, dtype=bool)
    delete_s = np.full(n, -1, dtype=np.int32)
    if rule is ExistingRule.DELETE:
        last_insert = np.maximum.accumulate(np.where(insert_s, pos, -1))
        at = np.where(last_insert >= seg_start, own_s[np.maximum(last_insert, 0)], old_s)  # before a removal
        before = np.where(boundary, old_s, np.roll(at, 1))
        target_s = np.where(retract_s & (before >= 0), before, own_s)
        moves = insert_s & (before >= 0) & (before != own_s)
        delete_s[moves] = before[moves]
        after = np.where(removes_s, -1, at)
    else:
        first_insert = np.minimum.reduceat(np.where(insert_s, pos, n), starts)
        home = np.where(first_insert < n, own_s[np.minimum(first_insert, n - 1)], -1)
        seg_home = np.repeat(np.where(start_old >= 0, start_old, home), sizes)
        covered = (old_s >= 0) | (pos >= np.repeat(first_insert, sizes))
        target_s = np.where(covered, seg_home, own_s)
        if rule is ExistingRule.SKIP_NEW:
            keep_s = ~covered | (seg_home == own_s) | retract_s
            target_s = np.where(retract_s, target_s, own_s)
        after = np.where(removes_s, -1, np.where(covered, seg_home, -1))
    last = np.append(np.flatnonzero(first_of_key)[1:], n) - 1
    target = np.empty(n, dtype=np.int32)
    keep = np.empty(n, dtype=bool)
    delete_at = np.empty(n, dtype=np.int32)
    target[order], keep[order], delete_at[order] = target_s, keep_s, delete_s
    return target, keep, delete_at, np.asarray(after[last], dtype=np.int32)


def router_for(schema: TableSchema, bootstrap: KeyBootstrap | None, overwrite: bool | dict[str, Any]) -> Any:
    """The router of a writer of a cross-partition table (None for other tables): an overwrite of the whole
    table routes against no keys; other overwrites are refused, as a key may live in a partition they keep.

    Raises:
        UnsupportedError: a partition overwrite of a cross-partition table, or no ``bootstrap``.
    """
    if not schema.is_cross_partition:
        return None
    if overwrite is not False:
        if overwrite is not True or schema.table_options.dynamic_partition_overwrite:
            raise UnsupportedError(
                "overwrite: a partition overwrite of a cross-partition upsert table (primary key "
                f"{list(schema.primary_keys)} without partition keys {list(schema.partition_keys)}) could leave a "
                "key live in a partition it keeps and one it writes; overwrite the whole table (overwrite=True "
                "with 'dynamic-partition-overwrite' = 'false') or write upserts"
            )
        return CrossPartitionRouter(schema, lambda: KeyLocations.of(schema, pa.table({}), None), guarded=False)
    if bootstrap is None:
        raise UnsupportedError(
            "a writer of a cross-partition upsert table needs the table's key index: write through "
            "Table.write or Table.writing"
        )
    return CrossPartitionRouter(schema, bootstrap)


__all__ = [
    "PARTITION_ID",
    "CrossPartitionRouter",
    "ExistingRule",
    "KeyBootstrap",
    "KeyLocations",
    "existing_rule",
    "router_for",
]
