"""Shared pieces of the compaction tests: engine configurations, state views and changelog replay."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pyarrow as pa

import mergetable as mt
from mergetable.commit.manifests import ManifestIO
from mergetable.read.scan import Planner, Split, interval_partition

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.int64()), ("s", pa.string())])
ALL_KINDS = ("+I", "+U", "-U", "-D")

# merge engine configurations and the row kinds each accepts
ENGINES: dict[str, tuple[dict[str, str], tuple[str, ...]]] = {
    "deduplicate": ({}, ALL_KINDS),
    "deduplicate-sequence-field": ({"sequence.field": "v"}, ALL_KINDS),
    "partial-update": ({"merge-engine": "partial-update"}, ("+I", "+U")),
    "partial-update-remove-on-delete": (
        {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
        ("+I", "+U", "-D"),
    ),
    "aggregation": ({"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}, ALL_KINDS),
    "first-row": ({"merge-engine": "first-row"}, ("+I",)),
    "first-row-ignore-delete": ({"merge-engine": "first-row", "ignore-delete": "true"}, ("+I", "-D")),
    "versioned": ({"merge-engine": "versioned", "versioned.ver-column": "v"}, ("+I", "+U", "-D")),
}

Row = tuple[Any, ...]


def batch(rows: list[tuple[str, int, int | None, str | None]]) -> tuple[pa.Table, list[str]]:
    """(kind, k, v, s) rows as data plus row kinds."""
    data = pa.table(
        {"k": [r[1] for r in rows], "v": [r[2] for r in rows], "s": [r[3] for r in rows]},
        schema=SCHEMA,
    )
    return data, [r[0] for r in rows]


def state(t: mt.Table, snapshot_id: int | None = None) -> dict[int, Row]:
    return {r["k"]: (r["v"], r["s"]) for r in t.read(snapshot_id=snapshot_id).to_pylist()}


def top_level_state(t: mt.Table, snapshot_id: int) -> dict[int, Row]:
    """What the top level of every bucket holds (the full-compaction producer's view)."""
    reader = t.split_reader()
    top = t.table_options.max_levels - 1
    out: dict[int, Row] = {}
    for partition, bucket, f in t.files(snapshot_id):
        if f.level == top:
            for r in reader.read_file(Split(snapshot_id, partition, bucket, ()), f, None).to_pylist():
                out[r["k"]] = (r["v"], r["s"])
    return out


def upper_levels_state(t: mt.Table, snapshot_id: int) -> dict[int, Row]:
    """The merged content of levels above 0 (what lookup changelog has covered so far)."""
    reader = t.split_reader()
    planner = Planner(ManifestIO(t.fileio), t.table_schema)
    out: dict[int, Row] = {}
    by_bucket: dict[tuple[tuple[str | None, ...], int], list[Any]] = {}
    for partition, bucket, f in t.files(snapshot_id):
        if f.level > 0:
            by_bucket.setdefault((partition, bucket), []).append(f)
    for (partition, bucket), files in by_bucket.items():
        split = Split(snapshot_id, partition, bucket, ())
        for section in interval_partition(files, planner.comparator):
            for r in reader.finish(reader.merged_section(split, section)).to_pylist():
                out[r["k"]] = (r["v"], r["s"])
    return out


def apply_full_row_changelog(view: dict[int, Row], rows: list[dict[str, Any]]) -> None:
    """Replay lookup/full-compaction changelog rows; every -U/-D must carry the exact current value."""
    for r in rows:
        kind, key, value = r["_row_kind"], r["k"], (r["v"], r["s"])
        if kind == "+I":
            assert key not in view, f"+I for a present key: {r}"
            view[key] = value
        elif kind == "+U":
            assert key not in view, f"+U without its -U: {r}"
            view[key] = value
        else:
            assert view.get(key) == value, f"{kind} does not carry the previous value {view.get(key)}: {r}"
            del view[key]


def changelog_snapshots(t: mt.Table) -> list[mt.Snapshot]:
    return [s for s in t.snapshots() if s.changelog_manifest_list is not None]


def create(uri: str, engine: str, **options: str) -> mt.Table:
    opts, _ = ENGINES[engine]
    return mt.create_table(uri, SCHEMA, primary_key=["k"], options={"bucket": "2", **opts, **options})


def scratch_dir() -> str:
    """A fresh directory, in memory when the machine has /dev/shm (hypothesis runs commit a lot)."""
    return tempfile.mkdtemp(prefix="mt-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
