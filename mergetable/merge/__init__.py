"""Merge engines: one protocol and registry used by writes, merge-on-read and compaction.

Engines (``merge-engine``, Fluss ``table.merge-engine``): ``deduplicate`` (Fluss ``default``),
``partial-update``, ``aggregation``, ``first-row`` (Fluss ``first_row``) and Fluss's ``versioned``, in
:mod:`mergetable.merge.engines`. Aggregate functions live in :mod:`mergetable.merge.aggregates`, one module
per family.

Example:
    >>> import pyarrow as pa
    >>> from mergetable.core.schema import TableSchema
    >>> schema = TableSchema.create(
    ...     pa.schema([("id", pa.int64()), ("total", pa.float64())]), ["id"],
    ...     options={"merge-engine": "aggregation", "fields.total.aggregate-function": "sum"})
    >>> engine = create_merge_function(schema)
    >>> rows = pa.table({"id": [1, 2, 1], "_SEQUENCE_NUMBER": [0, 1, 2],
    ...                  "_VALUE_KIND": pa.array([0, 0, 0], pa.int8()), "total": [1.0, 5.0, 2.5]})
    >>> engine.merge(rows).select(["id", "total"]).to_pydict()
    {'id': [1, 2], 'total': [3.5, 5.0]}
"""

from mergetable.core.options import MergeEngine
from mergetable.core.schema import TableSchema
from mergetable.merge.aggregates import collection, nested, numeric, sketches, value
from mergetable.merge.aggregates.base import function_names
from mergetable.merge.base import (
    WRITE_MASK,
    MergeFunction,
    create_merge_function,
    register,
    system_and_key_columns,
    validate_merge_options,
)
from mergetable.merge.engines.aggregation import Aggregation
from mergetable.merge.engines.deduplicate import Deduplicate
from mergetable.merge.engines.first_row import FirstRow
from mergetable.merge.engines.partial_update import PartialUpdate
from mergetable.merge.engines.sequence_groups import PartialUpdateConfig
from mergetable.merge.engines.versioned import Versioned
from mergetable.merge.grouping import group_starts, sort_permutation
from mergetable.merge.layout import Layout
from mergetable.merge.validation import validate_common

del collection, nested, numeric, sketches, value  # imported to register the functions


def _validate_aggregation(schema: TableSchema) -> None:
    validate_common(schema)
    Aggregation.validate(schema)


def _validate_partial_update(schema: TableSchema) -> None:
    validate_common(schema)
    PartialUpdateConfig.parse(schema)


register(MergeEngine.DEDUPLICATE, Deduplicate, validate_common)
register(MergeEngine.PARTIAL_UPDATE, PartialUpdate, _validate_partial_update)
register(MergeEngine.AGGREGATION, Aggregation, _validate_aggregation)
register(MergeEngine.FIRST_ROW, FirstRow, validate_common)
register(MergeEngine.VERSIONED, Versioned, validate_common)

__all__ = [
    "WRITE_MASK",
    "Aggregation",
    "Deduplicate",
    "FirstRow",
    "Layout",
    "MergeFunction",
    "PartialUpdate",
    "Versioned",
    "create_merge_function",
    "function_names",
    "group_starts",
    "register",
    "sort_permutation",
    "system_and_key_columns",
    "validate_merge_options",
]
