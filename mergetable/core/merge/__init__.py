"""Merge engines: one protocol and registry used by writes, merge-on-read and compaction."""

from mergetable.core.merge.base import (
    MergeFunction,
    create_merge_function,
    register,
    system_and_key_columns,
    validate_merge_options,
)
from mergetable.core.merge.deduplicate import Deduplicate
from mergetable.core.merge.grouping import KeyGroups, group_starts, sort_permutation
from mergetable.core.options import MergeEngine

register(MergeEngine.DEDUPLICATE, Deduplicate)

__all__ = [
    "KeyGroups",
    "MergeFunction",
    "create_merge_function",
    "group_starts",
    "register",
    "sort_permutation",
    "system_and_key_columns",
    "validate_merge_options",
]
