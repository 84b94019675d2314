"""The merge-engine protocol and registry shared by the write buffer, merge-on-read and compaction.

Rows handed to :meth:`MergeFunction.merge` may carry the int64 column :data:`WRITE_MASK`
(``_WRITE_MASK``) for partial writes (Fluss target columns): bit ``i`` is set when the row carries a
real value for ``schema.column_names[i]``. Without the column, every row wrote every column. Every
engine honours it: a column's fold only sees rows that wrote it, the result's mask is the OR of the
key's masks, and a delete with a partial mask is a partial delete (see ``engines.base``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import pyarrow as pa

from mergetable.core.errors import OptionsError
from mergetable.core.options import MergeEngine
from mergetable.core.schema import SEQUENCE_NUMBER, VALUE_KIND, TableSchema

WRITE_MASK = "_WRITE_MASK"
"""Optional int64 row column of a partial write: bit i set ⇔ the row carries ``schema.column_names[i]``."""


class MergeFunction(Protocol):
    """Folds every key's records (oldest → newest) into one record, vectorized over Arrow.

    ``merge(rows)`` takes the records of one or more sorted runs of one bucket, in any physical order,
    with the key columns, ``_SEQUENCE_NUMBER``, ``_VALUE_KIND`` and (a subset of) the value columns. It
    returns one row per key, sorted by key, with the same columns. The result's ``_SEQUENCE_NUMBER`` is
    that of the key's newest record and its ``_VALUE_KIND`` follows the engine: a retract kind (-U/-D)
    means the key has no visible row (readers drop it; compaction to the top level drops it).
    A key with a single record is returned unchanged (Paimon's single-record passthrough).
    """

    def merge(self, rows: pa.Table, seq_ordered: bool = False) -> pa.Table: ...

    def survivors(self, rows: pa.Table, seq_ordered: bool = False) -> np.ndarray | None:
        """When ``merge(rows)`` is a selection of ``rows`` (the newest or oldest record of each key), the indices
        of the selected rows, in key order: ``rows.take(survivors(rows))`` equals ``merge(rows)``. None when the
        merge computes new values (a reader then calls :meth:`merge`)."""
        ...

    def required_columns(self, wanted: Sequence[str]) -> list[str]:
        """Value columns that must be read to produce ``wanted`` correctly (a superset of ``wanted``)."""
        ...

    def check_kinds(self, kinds: np.ndarray) -> None:
        """Refuse, before anything is written, records whose row kinds (``_VALUE_KIND`` codes) this merge could
        turn into rows the table's schema does not allow (raises a :class:`~mergetable.core.errors.MergeError`)."""
        ...


WRITE_MASK_BITS = 63
"""Columns per mask word: column i is bit ``i % 63`` of word ``i // 63``."""


def write_mask_columns(schema: TableSchema) -> list[str]:
    """Names of the mask words of a table: ``_WRITE_MASK``, then ``_WRITE_MASK_1`` … for wide tables."""
    words = max(1, -(-len(schema.column_names) // WRITE_MASK_BITS))
    return [WRITE_MASK, *(f"{WRITE_MASK}_{k}" for k in range(1, words))]


def mask_bit(schema: TableSchema, column: str) -> tuple[int, int]:
    """(word, bit) of ``column`` in the write mask."""
    return divmod(schema.column_names.index(column), WRITE_MASK_BITS)


def write_mask(schema: TableSchema, columns: Sequence[str] | None = None) -> list[int]:
    """The mask words of a row carrying ``columns`` (None: every column)."""
    words = [0] * len(write_mask_columns(schema))
    wanted = set(schema.column_names if columns is None else columns)
    for i, c in enumerate(schema.column_names):
        if c in wanted:
            words[i // WRITE_MASK_BITS] |= 1 << (i % WRITE_MASK_BITS)
    return words


def with_write_mask(rows: pa.Table, schema: TableSchema, columns: Sequence[str] | None = None) -> pa.Table:
    """``rows`` with constant mask columns for ``columns`` appended."""
    n = rows.num_rows
    for name, word in zip(write_mask_columns(schema), write_mask(schema, columns), strict=True):
        rows = rows.append_column(name, pa.array(np.full(n, word, dtype=np.int64)))
    return rows


def drop_write_mask(rows: pa.Table) -> pa.Table:
    names = [c for c in rows.column_names if c == WRITE_MASK or c.startswith(WRITE_MASK + "_")]
    return rows.drop_columns(names) if names else rows


Factory = Callable[[TableSchema], MergeFunction]
_REGISTRY: dict[MergeEngine, Factory] = {}
_VALIDATORS: dict[MergeEngine, Callable[[TableSchema], None]] = {}


def register(engine: MergeEngine, factory: Factory, validator: Callable[[TableSchema], None] | None = None) -> None:
    """Register the factory (and optional create-time validator) of a merge engine.

    :mod:`mergetable.merge` registers the built-in engines when it is imported; registering an engine
    again replaces its factory.

    Args:
        engine: the ``merge-engine`` value the factory serves.
        factory: builds the engine's :class:`MergeFunction` for a table schema.
        validator: create-time checks of the engine's options (raises ``OptionsError``/``SchemaError``).

    Example:
        >>> from mergetable.merge import Deduplicate
        >>> register(MergeEngine.DEDUPLICATE, Deduplicate)
    """
    _REGISTRY[engine] = factory
    if validator is not None:
        _VALIDATORS[engine] = validator


def create_merge_function(schema: TableSchema) -> MergeFunction:
    """The merge function of the table's ``merge-engine``.

    Args:
        schema: the table schema; its options configure the engine.

    Returns:
        A :class:`MergeFunction` for rows of that schema.

    Raises:
        OptionsError: no engine is registered for ``merge-engine``, or an engine option is invalid.

    Example:
        >>> import pyarrow as pa
        >>> schema = TableSchema.create(pa.schema([("id", pa.int64()), ("v", pa.string())]), ["id"])
        >>> type(create_merge_function(schema)).__name__
        'Deduplicate'
    """
    engine = schema.table_options.merge_engine
    try:
        factory = _REGISTRY[engine]
    except KeyError:
        raise OptionsError("merge-engine", f"merge engine '{engine.value}' is not available") from None
    return factory(schema)


def validate_merge_options(schema: TableSchema) -> None:
    """Create-time validation of the engine's options: everything that would make a merge fail later.

    Args:
        schema: the table schema to check.

    Raises:
        OptionsError: an unknown engine or function, or an option the engine rejects (names the option).
        SchemaError: a column type the configured function cannot aggregate (names the column).

    Example:
        >>> import pyarrow as pa
        >>> fields = pa.schema([("id", pa.int64()), ("total", pa.string())])
        >>> schema = TableSchema.create(fields, ["id"], options={
        ...     "merge-engine": "aggregation", "fields.total.aggregate-function": "sum"})
        >>> validate_merge_options(schema)
        Traceback (most recent call last):
        ...
        mergetable.core.errors.SchemaError: column 'total': ... must be 'NumericType' but was 'STRING'.
    """
    engine = schema.table_options.merge_engine
    if engine not in _REGISTRY:
        raise OptionsError("merge-engine", f"merge engine '{engine.value}' is not available")
    validator = _VALIDATORS.get(engine)
    if validator is not None:
        validator(schema)
    create_merge_function(schema)


def system_and_key_columns(schema: TableSchema) -> list[str]:
    """Key columns, ``_SEQUENCE_NUMBER`` and ``_VALUE_KIND``: always part of a merge's rows.

    Example:
        >>> import pyarrow as pa
        >>> fields = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.string())])
        >>> system_and_key_columns(TableSchema.create(fields, ["dt", "id"], ["dt"]))
        ['id', '_SEQUENCE_NUMBER', '_VALUE_KIND']
    """
    return [*schema.trimmed_primary_keys, SEQUENCE_NUMBER, VALUE_KIND]
