"""One system of the head-to-head, in its own process: ``python peers.py SYSTEM WORKDIR`` prints JSON.

SYSTEM is ``pyarrow`` (raw sort + write, plain scans), ``mergetable``, ``deltalake`` (MERGE upserts) or
``pypaimon`` (with pypaimon-rust's native write, plan and read). The peers run in ``.venv-peers`` (created by
``make bench``: pypaimon pins its own pyarrow); mergetable and raw pyarrow in the project's venv. Nothing but
pyarrow is imported at module level, so the script runs in either.

WORKDIR holds the inputs ``run_all.py`` wrote once for every system: ``commit-<i>.parquet`` (the load, then
the upserts; primary key ``id``), ``agg-<i>.parquet`` (the same keys for the sum-aggregation table) and
``lookups.json`` (the keys of the point lookups). One call measures each workload once; its result (row
count, distinct keys, sums) is returned so ``run_all.py`` can check that every system returns the same rows.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

BUCKETS = 4


def check(table: pa.Table) -> dict[str, Any]:
    """What every system must agree on: rows, distinct keys and the exact sum of the integer column ``n``."""
    n = pc.sum(table.column("n")).as_py() if table.num_rows else 0
    keys = pc.count_distinct(table.column("id")).as_py() if table.num_rows else 0
    return {"rows": table.num_rows, "keys": int(keys), "sum_n": int(n or 0)}


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def inputs(work: Path, stem: str) -> list[pa.Table]:
    files = sorted(work.glob(f"{stem}-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    return [pq.read_table(f) for f in files]


class System:
    """A system under test: ingest commits into a fresh table at ``root``, then read it back."""

    aggregation = True

    def ingest(self, root: Path, batches: list[pa.Table], agg: bool = False) -> None:
        raise NotImplementedError

    def read(self, root: Path, agg: bool = False) -> pa.Table:
        raise NotImplementedError

    def lookup(self, root: Path, key: int) -> pa.Table:
        raise NotImplementedError


class RawPyarrow(System):
    """Sort each commit by key and write it as one Parquet file; reads scan every file (no merging)."""

    def ingest(self, root: Path, batches: list[pa.Table], agg: bool = False) -> None:
        root.mkdir(parents=True)
        for i, b in enumerate(batches):
            pq.write_table(b.sort_by("id"), root / f"{i}.parquet", compression="zstd")

    def _files(self, root: Path) -> list[str]:
        return sorted(str(p) for p in root.glob("*.parquet"))

    def read(self, root: Path, agg: bool = False) -> pa.Table:
        table = pq.read_table(self._files(root))
        if agg:  # the merged read of a sum table: group the rows by key
            table = table.group_by("id").aggregate([("v", "sum"), ("n", "sum")]).rename_columns(["id", "v", "n"])
        return table

    def lookup(self, root: Path, key: int) -> pa.Table:
        return pq.read_table(self._files(root), filters=[("id", "=", key)])


class MergeTable(System):
    """mergetable with ``write-only`` (compaction left to a dedicated job, as pypaimon's writer does)."""

    def __init__(self) -> None:
        import mergetable

        self.mt = mergetable
        self.tables: dict[Path, Any] = {}

    def ingest(self, root: Path, batches: list[pa.Table], agg: bool = False) -> None:
        opts = {"bucket": str(BUCKETS), "write-only": "true"}
        if agg:
            opts |= {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
            opts |= {"fields.n.aggregate-function": "sum"}
        t = self.mt.create_table(str(root), batches[0].schema, primary_key=["id"], options=opts)
        for b in batches:
            t.write(b)

    def _table(self, root: Path) -> Any:
        if root not in self.tables:  # one Table object per table, as an application holds it
            self.tables[root] = self.mt.open_table(str(root))
        return self.tables[root]

    def read(self, root: Path, agg: bool = False) -> pa.Table:
        return self._table(root).read()

    def lookup(self, root: Path, key: int) -> pa.Table:
        return self._table(root).read(filter=[("id", "=", key)])

    def data_files(self, root: Path) -> list[str]:
        t = self._table(root)
        return [t.path_factory.data_file(p, b, f.file_name) for p, b, f in t.files()]

    def default_sizes(self, root: Path, batches: list[pa.Table]) -> dict[str, int]:
        """The same commits with the default options (the writer compacts: Paimon's size-amplification and
        sorted-run rules): the whole directory, which keeps the files of the snapshots retained for time
        travel (``snapshot.num-retained.min`` = 10, one hour), and the latest snapshot's data files alone; and of
        the whole, the bytes compactions wrote (the rest: the commits' level-0 files, manifests, snapshots)."""
        t = self.mt.create_table(str(root), batches[0].schema, primary_key=["id"], options={"bucket": str(BUCKETS)})
        for b in batches:
            t.write(b)
        latest = sum(Path(t.path_factory.data_file(p, b, f.file_name)).stat().st_size for p, b, f in t.files())
        written = {f.file_name: f for s in t.snapshots() for _, _, f in t.files(s.id)}
        compacted = sum(f.file_size for f in written.values() if f.file_source.name == "COMPACT")
        return {
            "default_size_bytes": dir_size(root),
            "default_latest_bytes": latest,
            "default_compacted_bytes": compacted,
        }


class DeltaLake(System):
    """deltalake: the load with ``write_deltalake``, each upsert a MERGE (update all matched, insert the rest)."""

    aggregation = False

    def ingest(self, root: Path, batches: list[pa.Table], agg: bool = False) -> None:
        from deltalake import DeltaTable, write_deltalake

        write_deltalake(str(root), batches[0])
        for b in batches[1:]:
            (
                DeltaTable(str(root))
                .merge(source=b, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )

    def read(self, root: Path, agg: bool = False) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(str(root)).to_pyarrow_table()

    def lookup(self, root: Path, key: int) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(str(root)).to_pyarrow_table(filters=[("id", "=", key)])


class PyPaimon(System):
    """pypaimon with pypaimon-rust: native write, commit, planning and read where pypaimon supports them."""

    NATIVE = {
        "write.native.enabled": "true",
        "commit.native.enabled": "true",
        "scan.native-plan.enabled": "true",
        "read.native.enabled": "true",
    }

    def _catalog(self, root: Path) -> Any:
        from pypaimon import CatalogFactory

        catalog = CatalogFactory.create({"warehouse": str(root)})
        catalog.create_database("db", True)
        return catalog

    def ingest(self, root: Path, batches: list[pa.Table], agg: bool = False) -> None:
        from pypaimon import Schema

        catalog = self._catalog(root)
        opts = {"bucket": str(BUCKETS), **self.NATIVE}
        if agg:
            opts |= {"merge-engine": "aggregation", "fields.v.aggregate-function": "sum"}
            opts |= {"fields.n.aggregate-function": "sum"}
        schema = Schema.from_pyarrow_schema(batches[0].schema, primary_keys=["id"], options=opts)
        catalog.create_table("db.t", schema, False)
        table = catalog.get_table("db.t")
        for b in batches:
            builder = table.new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(b)
            commit = builder.new_commit()
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()

    def _read(self, root: Path, key: int | None) -> pa.Table:
        table = self._catalog(root).get_table("db.t")
        rb = table.new_read_builder()
        if key is not None:
            rb = rb.with_filter(rb.new_predicate_builder().equal("id", key))
        out = rb.new_read().to_arrow(rb.new_scan().plan().splits())
        return out if key is None else out.filter(pc.field("id") == key)

    def read(self, root: Path, agg: bool = False) -> pa.Table:
        return self._read(root, None)

    def lookup(self, root: Path, key: int) -> pa.Table:
        return self._read(root, key)


SYSTEMS: dict[str, Callable[[], System]] = {
    "pyarrow": RawPyarrow,
    "mergetable": MergeTable,
    "deltalake": DeltaLake,
    "pypaimon": PyPaimon,
}


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def measure(name: str, work: Path) -> dict[str, Any]:
    """One repetition of every workload (``run_all.py`` runs the systems in turn, repetition by repetition,
    so that each sees the same share of a machine's changing load, and takes the medians)."""
    system = SYSTEMS[name]()
    batches, agg_batches = inputs(work, "commit"), inputs(work, "agg")
    keys = json.loads((work / "lookups.json").read_text())
    out: dict[str, Any] = {}
    base = work / f"out-{name}"
    shutil.rmtree(base, ignore_errors=True)
    root, agg_root = base / "t", base / "agg"
    try:
        if isinstance(system, MergeTable):  # raw pyarrow sort+write of the same rows, just before ours
            out["raw_ingest_s"], _ = timed(lambda: RawPyarrow().ingest(base / "raw", batches))
        out["ingest_s"], _ = timed(lambda: system.ingest(root, batches))
        out["size_bytes"] = dir_size(root)
        system.read(root)  # warm: every system reads files the OS has cached
        out["read_s"], table = timed(lambda: system.read(root))
        out["read"] = check(table)
        out["lookups_s"], found = timed(lambda: pa.concat_tables([system.lookup(root, k) for k in keys]))
        out["lookups"] = check(found)
        if isinstance(system, MergeTable):  # raw pyarrow's filtered read of the very same files
            files, cols = system.data_files(root), list(batches[0].schema.names)
            out["raw_lookups_same_files_s"], _ = timed(
                lambda: [pq.read_table(files, columns=cols, filters=[("id", "=", k)]) for k in keys]
            )
            out["raw_agg_ingest_s"], _ = timed(lambda: RawPyarrow().ingest(base / "raw-agg", agg_batches))
            out |= system.default_sizes(base / "default", batches)
        if system.aggregation:
            out["agg_ingest_s"], _ = timed(lambda: system.ingest(agg_root, agg_batches, agg=True))
            system.read(agg_root, agg=True)
            out["agg_read_s"], agg = timed(lambda: system.read(agg_root, agg=True))
            out["agg_read"] = check(agg)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return out


def main() -> None:
    name, work = sys.argv[1], Path(sys.argv[2])
    try:
        result = measure(name, work)
    except Exception as exc:  # report the failure as the system's result; the others still run
        result = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
