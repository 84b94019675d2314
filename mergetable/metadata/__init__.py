"""Tier 1: persisted metadata models and file statistics."""

from mergetable.metadata.models import (
    CommitKind,
    CommitMessage,
    DataFileMeta,
    FileKind,
    FileSource,
    ManifestEntry,
    ManifestFile,
    ManifestFileMeta,
    ManifestList,
    PartitionStats,
    SimpleStats,
    Snapshot,
    Tag,
)

__all__ = [
    "CommitKind",
    "CommitMessage",
    "DataFileMeta",
    "FileKind",
    "FileSource",
    "ManifestEntry",
    "ManifestFile",
    "ManifestFileMeta",
    "ManifestList",
    "PartitionStats",
    "SimpleStats",
    "Snapshot",
    "Tag",
]
