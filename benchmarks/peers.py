"""Peer measurements, run by ``run_all.py`` inside the peers' own virtualenv (``.venv-peers``).

pypaimon pins an older pyarrow than mergetable needs, so the peers live in a separate environment and
this script reports JSON on stdout. Input: a directory of Parquet files, one per commit (``commit-<i>.parquet``,
primary key ``id``), written by ``run_all.py`` from the same data mergetable is measured on.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq


def best(fn: Callable[[], object], repeat: int = 3) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def pypaimon_run(batches: list, bucket: int) -> dict[str, float]:  # type: ignore[type-arg]
    from pypaimon import CatalogFactory, Schema

    root = tempfile.mkdtemp(prefix="peer-paimon-")
    try:
        catalog = CatalogFactory.create({"warehouse": root})
        catalog.create_database("db", True)
        schema = Schema.from_pyarrow_schema(batches[0].schema, primary_keys=["id"], options={"bucket": str(bucket)})
        catalog.create_table("db.t", schema, False)
        table = catalog.get_table("db.t")
        t0 = time.perf_counter()
        for b in batches:
            builder = table.new_batch_write_builder()
            write = builder.new_write()
            write.write_arrow(b)
            commit = builder.new_commit()
            commit.commit(write.prepare_commit())
            write.close()
            commit.close()
        ingest = time.perf_counter() - t0
        rb = table.new_read_builder()
        rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows
        read = best(lambda: rb.new_read().to_arrow(rb.new_scan().plan().splits()))
        return {"ingest_s": ingest, "merged_read_s": read, "rows": rows}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def deltalake_run(batches: list) -> dict[str, float]:  # type: ignore[type-arg]
    from deltalake import DeltaTable, write_deltalake

    root = tempfile.mkdtemp(prefix="peer-delta-")
    try:
        t0 = time.perf_counter()
        write_deltalake(root, batches[0])
        for b in batches[1:]:
            (
                DeltaTable(root)
                .merge(source=b, predicate="t.id = s.id", source_alias="s", target_alias="t")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute()
            )
        ingest = time.perf_counter() - t0
        rows = DeltaTable(root).to_pyarrow_table().num_rows
        read = best(lambda: DeltaTable(root).to_pyarrow_table())
        return {"ingest_s": ingest, "merged_read_s": read, "rows": rows}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    src = Path(sys.argv[1])
    bucket = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    files = sorted(src.glob("commit-*.parquet"), key=lambda p: int(p.stem.split("-")[1]))
    batches = [pq.read_table(f) for f in files]
    out: dict[str, object] = {}
    for name, fn in (
        ("pypaimon", lambda: pypaimon_run(batches, bucket)),
        ("deltalake", lambda: deltalake_run(batches)),
    ):
        try:
            out[name] = fn()
        except Exception as exc:  # report the peer's failure instead of aborting the others
            out[name] = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
