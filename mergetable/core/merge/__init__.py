"""Merge engines: one protocol and registry used by writes, merge-on-read and compaction.

Engines (``merge-engine``, Fluss ``table.merge-engine``): ``deduplicate`` (Fluss ``default``),
``partial-update``, ``aggregation``, ``first-row`` (Fluss ``first_row``) and Fluss's ``versioned``.
Aggregate functions live in the ``agg_*`` modules, grouped by family.
"""

from mergetable.core.merge import agg_collections, agg_nested, agg_numeric, agg_sketches, agg_value
from mergetable.core.merge.agg_base import function_names
from mergetable.core.merge.aggregation import Aggregation
from mergetable.core.merge.base import (
    WRITE_MASK,
    MergeFunction,
    create_merge_function,
    register,
    system_and_key_columns,
    validate_merge_options,
)
from mergetable.core.merge.deduplicate import Deduplicate
from mergetable.core.merge.first_row import FirstRow
from mergetable.core.merge.grouping import group_starts, sort_permutation
from mergetable.core.merge.layout import Layout
from mergetable.core.merge.partial_update import PartialUpdate
from mergetable.core.merge.sequence_groups import PartialUpdateConfig
from mergetable.core.merge.validation import validate_common
from mergetable.core.merge.versioned import Versioned
from mergetable.core.options import MergeEngine
from mergetable.core.schema import TableSchema

del agg_collections, agg_nested, agg_numeric, agg_sketches, agg_value  # imported to register the functions


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
