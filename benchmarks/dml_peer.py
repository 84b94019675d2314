"""One system of the row-level head-to-head, in its own process: ``python dml_peer.py SYSTEM OP WORKDIR``.

SYSTEM is ``mergetable`` or ``deltalake``; OP is ``setup`` (create the table at ``WORKDIR/SYSTEM`` from
``WORKDIR/table.parquet``), ``update``, ``merge`` (each timed once on a copy of the set-up table) or
``merge-memory`` (the merge of ``WORKDIR/source.parquet`` into the set-up table, in place, for its peak RSS).
It prints one JSON line: the seconds, the peak RSS of the process (MB, ``VmHWM``) and what every system
must agree on after the operation (rows, sums). Only pyarrow is imported at module level, so the script runs
in the project's venv and in ``.venv-peers``.

The table has a primary key ``(p, id)``, is partitioned by ``p`` (4 values) and holds ``v`` (double), ``s``
(string) and ``n`` (int32, uniform in [0, 1000)); the update sets ``v = v * 2`` where ``n < 300`` (about
30% of the rows, in every partition); the merge updates every column of the matched rows and inserts the rest.
"""

from __future__ import annotations

import json
import resource
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def check(table: pa.Table) -> dict[str, Any]:
    """Rows, distinct keys and exact sums every system must agree on."""
    v = pc.sum(table.column("v")).as_py() or 0.0
    return {
        "rows": table.num_rows,
        "sum_n": int(pc.sum(table.column("n")).as_py() or 0),
        "sum_id": int(pc.sum(table.column("id")).as_py() or 0),
        "sum_v": round(float(v), 3),
    }


def peak_mb() -> float:
    """This process's peak RSS: ``VmHWM`` of its own memory map (``ru_maxrss`` would start at the RSS of the
    parent that forked it, as Linux carries the high-water mark over ``exec``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class MergeTable:
    def warm(self) -> None:
        import mergetable  # noqa: F401  (imports are not part of the timing)

    def setup(self, root: Path, table: pa.Table) -> None:
        import mergetable

        t = mergetable.create_table(str(root), table.schema, primary_key=["p", "id"], partition_keys=["p"])
        t.write(table)

    def update(self, root: Path) -> None:
        import mergetable

        mergetable.open_table(str(root)).update([("n", "<", 300)], {"v": pc.multiply(pc.field("v"), 2.0)})

    def merge(self, root: Path, source: pa.Table) -> None:
        import mergetable

        t = mergetable.open_table(str(root))
        t.merge(source).when_matched_update_all().when_not_matched_insert_all().execute()

    def read(self, root: Path) -> pa.Table:
        import mergetable

        return mergetable.open_table(str(root)).read()


class DeltaLake:
    def warm(self) -> None:
        import deltalake  # noqa: F401

    def setup(self, root: Path, table: pa.Table) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(root), table, partition_by=["p"])

    def update(self, root: Path) -> None:
        from deltalake import DeltaTable

        DeltaTable(str(root)).update(updates={"v": "v * 2.0"}, predicate="n < 300")

    def merge(self, root: Path, source: pa.Table) -> None:
        from deltalake import DeltaTable

        (
            DeltaTable(str(root))
            .merge(source=source, predicate="t.p = s.p AND t.id = s.id", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )

    def read(self, root: Path) -> pa.Table:
        from deltalake import DeltaTable

        return DeltaTable(str(root)).to_pyarrow_table()


SYSTEMS = {"mergetable": MergeTable, "deltalake": DeltaLake}


def main() -> None:
    name, op, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    system = SYSTEMS[name]()
    system.warm()
    base = work / name
    out: dict[str, Any] = {}
    if op == "setup":
        shutil.rmtree(base, ignore_errors=True)
        system.setup(base, pq.read_table(work / "table.parquet"))
    elif op in ("update", "merge"):
        root = work / f"{name}-{op}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root)
        source = pq.read_table(work / "source.parquet") if op == "merge" else None
        t0 = time.perf_counter()
        system.update(root) if source is None else system.merge(root, source)
        out["seconds"] = time.perf_counter() - t0
        out["result"] = check(system.read(root))
        shutil.rmtree(root, ignore_errors=True)
    elif op == "merge-memory":
        source = pq.read_table(work / "source.parquet")
        before = peak_mb()
        t0 = time.perf_counter()
        system.merge(base, source)
        out["seconds"] = time.perf_counter() - t0
        out["peak_mb"], out["before_mb"] = peak_mb(), before
    print(json.dumps(out))


if __name__ == "__main__":
    main()
