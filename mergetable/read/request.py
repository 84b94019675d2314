"""Serving a :class:`~mergetable.core.read_options.ReadRequest`: time travel resolved, splits planned.

The one place where a request becomes splits, for ``Table.read``/``scan``/``plan``, the Spark reader and the
command line alike; time travel is resolved by :func:`mergetable.commit.travel.resolve_travel`.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.commit.travel import resolve_travel
from mergetable.core.errors import OptionsError
from mergetable.core.predicates import Conjunct
from mergetable.core.read_options import ReadRequest
from mergetable.core.rowkind import ROW_KIND_COLUMN
from mergetable.core.schema import TableSchema
from mergetable.read.changes import ChangePlanner, read_change_split
from mergetable.read.incremental import IncrementalRange, delta_splits, resolve_range, snapshots_between
from mergetable.read.reader import SplitReader
from mergetable.read.scan import Planner, Sections, Split
from mergetable.read.scan_modes import IncrementalMode


def plan_request(
    manifests: ManifestIO,
    snapshots: SnapshotManager,
    tags: TagManager,
    schema: TableSchema,
    request: ReadRequest,
    dnf: list[Conjunct] | None,
    sections: Sections = "all",
    key_ranges: bool = True,
) -> list[Split]:
    """The splits of ``request`` with the bound filter ``dnf`` (partition, bucket and key-range pruned), holding
    the ``sections`` asked for (an incremental read's splits are not sections of one snapshot: all of them);
    ``key_ranges=False``: sections above the split size stay whole (:func:`.parallel.in_process_key_ranges`)."""
    if request.incremental_between is not None:
        if sections != "all":
            raise OptionsError("sections", f"must be 'all' for an incremental read, got '{sections}'")
        window = resolve_range(snapshots, tags, request.incremental_between)
        if window.tagged is not None:
            raise OptionsError(
                "incremental_between",
                "a range between two tags is the difference of the tagged snapshots, which splits cannot hold: "
                "read it with read() or changelog()",
            )
        return delta_splits(manifests, snapshots_between(snapshots, window.start, window.end), schema, dnf)
    snap = resolve_travel(snapshots, tags, request.travel)
    planner = Planner(manifests, schema, manifests.fileio if key_ranges else None)
    return planner.plan(snap, dnf, request.split_size, sections=sections)


def diff_batches(reader: SplitReader, planner: ChangePlanner, window: IncrementalRange) -> Iterator[pa.RecordBatch]:
    """The rows a plain read of a range between two tags returns (Paimon's incremental diff read): per key, the
    end's row where it differs from the start's (inserted or updated keys; deleted keys are not shown)."""
    for change in planner.between(window, IncrementalMode.DIFF, reader.dnf):
        for table in read_change_split(reader, change):
            kinds = table.column(ROW_KIND_COLUMN)
            added = pc.or_(pc.equal(kinds, "+I"), pc.equal(kinds, "+U"))
            rows = table.filter(added).drop_columns([ROW_KIND_COLUMN]).cast(reader.out_schema)
            yield from rows.to_batches(max_chunksize=reader.batch_size)


__all__ = ["diff_batches", "plan_request"]
