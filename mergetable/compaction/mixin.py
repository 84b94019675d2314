"""``Table.compact`` and ``Table.compaction_job``: what a table offers of compaction (a mixin of ``Table``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, cast

from mergetable.compaction.job import CompactionJob, Executor, Progress
from mergetable.core.fileio import FileIO
from mergetable.core.progress import bar, wanted
from mergetable.core.schema import TableSchema
from mergetable.merge import MergeFunction
from mergetable.metadata.models import Snapshot


class CompactionTable(Protocol):
    """What :class:`Compacting` needs of the table it is mixed into."""

    fileio: FileIO
    table_schema: TableSchema

    @property
    def merge_function(self) -> MergeFunction: ...


class Compacting:
    """Mixin of :class:`mergetable.Table`: :meth:`compact` and :meth:`compaction_job`."""

    def compaction_job(self, executor: Executor | None = None, progress: Progress | None = None) -> CompactionJob:
        """The compaction machinery :meth:`compact` and :meth:`commit` use; ``executor`` runs the buckets.

        Example:
            >>> t.compaction_job().run(full=True).commit_kind.name
            'COMPACT'
        """
        table = cast(CompactionTable, self)
        return CompactionJob(table.fileio, table.table_schema, table.merge_function, executor, progress)

    def compact(
        self,
        full: bool = False,
        partitions: Sequence[dict[str, Any]] | None = None,
        executor: Executor | None = None,
        progress: bool | Progress | None = None,
        order_by: Sequence[str] | None = None,
        strategy: str = "order",
    ) -> Snapshot | None:
        """Compact now and commit one COMPACT snapshot (None when nothing needed compacting).

        ``full`` compacts every bucket into the top level; otherwise each bucket gets the compaction
        universal compaction picks for it. ``partitions``: partial specs such as ``[{"dt": "2024-01-01"}]``.
        A concurrent conflicting commit makes the changed buckets compact again on the new snapshot;
        :class:`CommitConflictError` when that keeps failing (the table is then unchanged). ``progress``: a bar
        over the buckets (True/False; default: when run interactively), or hooks of one's own. ``order_by``
        (append tables): a sort compaction, every selected bucket rewritten in the order of those columns,
        ``strategy`` ``"order"`` (sorted) or ``"zorder"`` (Z-order of all of them), so that filtered reads skip
        files by their statistics (Paimon's ``order_strategy``, Delta's ``OPTIMIZE ZORDER BY``).

        Example:
            >>> t.compact(full=True, progress=False).id, len(t.files())
            (3, 1)
        """
        if isinstance(progress, Progress):
            return self.compaction_job(executor, progress).compact(full, partitions, order_by, strategy)
        with bar("compact", "bucket", wanted(progress)) as hooks:
            return self.compaction_job(executor, hooks).compact(full, partitions, order_by, strategy)


__all__ = ["Compacting", "CompactionTable"]
