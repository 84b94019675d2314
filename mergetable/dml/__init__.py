"""Row-level operations (delete, update, merge) and history: the Python ``Table``'s front door and the rules
and clause semantics the Spark ``MergeTable`` shares. Sits between the table facade and the lower tiers."""

from mergetable.dml.api import RowLevelOperations
from mergetable.dml.merge import MergeBuilder

__all__ = ["MergeBuilder", "RowLevelOperations"]
