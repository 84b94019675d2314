"""Serving a :class:`~mergetable.core.read_options.ReadRequest`: time travel resolved, splits planned.

The one place where a request becomes splits, for ``Table.read``/``scan``/``plan``, the Spark reader and the
command line alike; time travel is resolved by :func:`mergetable.commit.travel.resolve_travel`.
"""

from __future__ import annotations

from mergetable.commit.manifests import ManifestIO
from mergetable.commit.snapshots import SnapshotManager, TagManager
from mergetable.commit.travel import resolve_travel
from mergetable.core.errors import OptionsError
from mergetable.core.predicates import Conjunct
from mergetable.core.read_options import ReadRequest
from mergetable.core.schema import TableSchema
from mergetable.read.incremental import delta_splits, resolve_range, snapshots_between
from mergetable.read.scan import Planner, Sections, Split


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
        return delta_splits(manifests, snapshots_between(snapshots, window.start, window.end), schema, dnf)
    snap = resolve_travel(snapshots, tags, request.travel)
    planner = Planner(manifests, schema, manifests.fileio if key_ranges else None)
    return planner.plan(snap, dnf, request.split_size, sections=sections)


__all__ = ["plan_request"]
