"""What compacting one bucket changed (:class:`CompactResult`), shared by the compactors of every table kind."""

from __future__ import annotations

from dataclasses import dataclass, field

from mergetable.metadata.models import DataFileMeta, IndexFileMeta


@dataclass
class CompactResult:
    """What compacting one bucket changed: files removed, files added, changelog produced."""

    before: list[DataFileMeta] = field(default_factory=list)
    after: list[DataFileMeta] = field(default_factory=list)
    changelog: list[DataFileMeta] = field(default_factory=list)
    index_before: list[IndexFileMeta] = field(default_factory=list)
    """Deletion-vector index files the compaction replaces (every one of the bucket's, when it changed them)."""
    index_after: list[IndexFileMeta] = field(default_factory=list)
    """Deletion-vector index files holding the bucket's vectors after the compaction."""

    @property
    def written(self) -> list[DataFileMeta]:
        """Files this compaction created (upgraded files are not new: they keep their name)."""
        kept = {f.file_name for f in self.before}
        return [f for f in (*self.after, *self.changelog) if f.file_name not in kept]


__all__ = ["CompactResult"]
