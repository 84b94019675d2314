"""Tier 6: LSM levels and universal compaction, compaction jobs, changelog producers."""

from mergetable.compaction.compaction import BucketCompactor
from mergetable.compaction.job import FULL_COMPACTION_PROPERTY, BucketPlan, CompactionJob, Executor, Progress, run_plan
from mergetable.compaction.lsm import CompactUnit, Levels, LevelSortedRun, SortedRun, UniversalCompaction
from mergetable.compaction.result import CompactResult

__all__ = [
    "FULL_COMPACTION_PROPERTY",
    "BucketCompactor",
    "BucketPlan",
    "CompactResult",
    "CompactUnit",
    "CompactionJob",
    "Executor",
    "LevelSortedRun",
    "Levels",
    "Progress",
    "SortedRun",
    "UniversalCompaction",
    "run_plan",
]
