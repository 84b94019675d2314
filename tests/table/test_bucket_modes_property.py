"""Property test: writes, upserts, deletes, overwrites and compactions read back as a dict oracle says, in
every bucket mode (one fixed bucket, three fixed buckets, dynamic buckets of a few keys each), partitioned
or not, with and without deletion vectors; in dynamic mode no key is ever live in two buckets."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_dynamic_buckets import hash_index

import mergetable as mt
from mergetable.core.dynamic_buckets import key_hashes

SCHEMA = pa.schema([("dt", pa.string()), ("id", pa.int64()), ("v", pa.int64())])
MODES = {
    "fixed-1": {"bucket": "1"},
    "fixed-3": {"bucket": "3"},
    "dynamic": {"dynamic-bucket.target-row-num": "3"},
    "dynamic-capped": {"dynamic-bucket.target-row-num": "2", "dynamic-bucket.max-buckets": "3"},
    "dynamic-assigners": {"dynamic-bucket.target-row-num": "2", "dynamic-bucket.initial-buckets": "2"},
}
SETTINGS = settings(
    max_examples=int(os.environ.get("MT_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
Op = tuple[str, list[tuple[str, int, str, int]]]


@st.composite
def workloads(draw: st.DrawFn) -> list[Op]:
    row = st.tuples(
        st.sampled_from(["a", "b"]), st.integers(0, 15), st.sampled_from(["+I", "+I", "-D"]), st.integers(0, 99)
    )
    op = st.tuples(
        st.sampled_from(["write", "write", "write", "compact", "full", "overwrite"]), st.lists(row, max_size=12)
    )
    return draw(st.lists(op, min_size=1, max_size=8))


def _apply(
    oracle: dict[tuple[str, int], int], rows: list[tuple[str, int, str, int]], overwrite: bool, partitioned: bool
) -> None:
    if overwrite and not partitioned:
        oracle.clear()
    elif overwrite:  # dynamic partition overwrite: the partitions present in the data are replaced
        for dt in {r[0] for r in rows}:
            for key in [k for k in oracle if k[0] == dt]:
                del oracle[key]
    for dt, k, kind, v in rows:
        if kind == "-D":
            oracle.pop((dt, k), None)
        else:
            oracle[(dt, k)] = v


def _check_hash_index(t: mt.Table) -> None:
    """Every key is in one bucket of its partition, and its hash in that bucket's HASH index file."""
    index = hash_index(t)
    keys = list(t.table_schema.trimmed_primary_keys)
    where: dict[tuple[Any, ...], int] = {}
    for e in t._manifests.live_entries(t.latest_snapshot()):
        path = t.path_factory.data_file(e.partition, e.bucket, e.file.file_name)
        data = pq.read_table(path, columns=keys)
        for row in zip(*(data.column(k).to_pylist() for k in keys), strict=True):
            assert where.setdefault((e.partition, *row), e.bucket) == e.bucket, row
        hashes = key_hashes([data.column(k) for k in keys])
        assert set(hashes.tolist()) <= set(index[(e.partition, e.bucket)].tolist())
    for hashes in index.values():
        assert len(hashes) == len(set(hashes.tolist()))


@SETTINGS
@given(
    mode=st.sampled_from(sorted(MODES)),
    partitioned=st.booleans(),
    vectors=st.booleans(),
    workload=workloads(),
)
def test_every_bucket_mode_reads_what_the_oracle_says(
    mode: str, partitioned: bool, vectors: bool, workload: list[Op]
) -> None:
    root = tempfile.mkdtemp(prefix="mt-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        options: dict[str, Any] = {**MODES[mode], "deletion-vectors.enabled": str(vectors).lower()}
        t = mt.create_table(f"{root}/t", SCHEMA, ["dt", "id"], ["dt"] if partitioned else [], options=options)
        oracle: dict[tuple[str, int], int] = {}
        for op, rows in workload:
            if op in ("compact", "full"):
                t.compact(full=op == "full", progress=False)
                continue
            data = pa.table(
                {"dt": [r[0] for r in rows], "id": [r[1] for r in rows], "v": [r[3] for r in rows]}, schema=SCHEMA
            )
            overwrite = op == "overwrite" and bool(rows) and all(r[2] == "+I" for r in rows)
            if overwrite:
                t.write(data, overwrite=True)
            else:
                t.write(data, row_kind=[r[2] for r in rows])
            _apply(oracle, rows, overwrite, partitioned)
            got = t.read().to_pylist()
            assert {(r["dt"], r["id"]): r["v"] for r in got} == oracle
            assert len(got) == len(oracle) == t.count()
        if t.table_schema.is_dynamic_bucket:
            _check_hash_index(t)
    finally:
        shutil.rmtree(root, ignore_errors=True)


ENGINES = {
    "deduplicate": {},
    "partial-update": {"merge-engine": "partial-update", "partial-update.remove-record-on-delete": "true"},
    "aggregation": {
        "merge-engine": "aggregation",
        "fields.v.aggregate-function": "sum",
        "aggregation.remove-record-on-delete": "true",
    },
    "first-row": {"merge-engine": "first-row", "ignore-delete": "true"},
}


def _apply_cross(engine: str, oracle: dict[int, tuple[str, int]], rows: list[tuple[str, int, str, int]]) -> None:
    """Rows in order, by the engine's rule for a key that lives in another partition (Paimon's)."""
    for dt, k, kind, v in rows:
        old = oracle.get(k)
        if kind == "-D":
            if engine != "first-row":
                oracle.pop(k, None)
        elif old is None or engine == "deduplicate":
            oracle[k] = (dt, v)
        elif engine == "partial-update":
            oracle[k] = (old[0], v)  # the old partition is updated
        elif engine == "aggregation":
            oracle[k] = (old[0], old[1] + v)
        # first-row: the old row is kept


@SETTINGS
@given(
    engine=st.sampled_from(sorted(ENGINES)),
    target=st.sampled_from([2, 3, 1000]),
    vectors=st.booleans(),
    workload=workloads(),
)
def test_cross_partition_tables_read_what_the_oracle_says(
    engine: str, target: int, vectors: bool, workload: list[Op]
) -> None:
    """A primary key without the partition key: keys move between partitions by the engine's rule, and each key is
    live in one partition, in one bucket."""
    root = tempfile.mkdtemp(prefix="mt-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
    try:
        options: dict[str, Any] = {
            **ENGINES[engine],
            "dynamic-bucket.target-row-num": str(target),
            "dynamic-partition-overwrite": "false",
            "deletion-vectors.enabled": str(vectors and engine != "first-row").lower(),
        }
        t = mt.create_table(f"{root}/t", SCHEMA, ["id"], ["dt"], options=options)
        oracle: dict[int, tuple[str, int]] = {}
        for op, rows in workload:
            if op in ("compact", "full"):
                t.compact(full=op == "full", progress=False)
                continue
            if engine == "aggregation":  # (a sum's -D before a +I of one key in one write is a case of its own)
                rows = [r for r in rows if r[2] == "+I"]
            data = pa.table(
                {"dt": [r[0] for r in rows], "id": [r[1] for r in rows], "v": [r[3] for r in rows]}, schema=SCHEMA
            )
            overwrite = op == "overwrite" and bool(rows) and all(r[2] == "+I" for r in rows)
            if overwrite:
                t.write(data, overwrite=True)
                oracle.clear()
            else:
                t.write(data, row_kind=[r[2] for r in rows])
            _apply_cross(engine, oracle, rows)
            got = t.read().to_pylist()
            assert {r["id"]: (r["dt"], r["v"]) for r in got} == oracle
            assert len(got) == len(oracle) == t.count()
            for dt in ("a", "b"):  # each partition merged on its own holds the keys the oracle puts there
                ids = t.read(["id"], filter=[("dt", "=", dt)]).column("id").to_pylist()
                assert sorted(ids) == sorted(k for k, (d, _) in oracle.items() if d == dt)
        _check_hash_index(t)
    finally:
        shutil.rmtree(root, ignore_errors=True)
