"""Property test: a rescale never changes a read; writes, deletes, compactions and rescales (of the table or
of one partition) against a dict oracle, with Paimon's rule for writes into a partition of another count."""

from __future__ import annotations

import os
import shutil
from typing import Any

import pyarrow as pa
import pytest
from compaction_support import scratch_dir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt
from mergetable.commit.manifests import ManifestIO
from mergetable.core.errors import CommitConflictError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string()), ("v", pa.int64())])
KEYS = pa.schema(list(SCHEMA)[:2])

row = st.tuples(st.integers(0, 15), st.sampled_from(["a", "b", "c"]), st.integers(-5, 5), st.booleans())
step = st.one_of(
    st.tuples(st.just("write"), st.lists(row, min_size=1, max_size=12)),
    st.tuples(st.just("rescale"), st.integers(1, 4), st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))),
    st.tuples(st.just("compact"), st.booleans()),
)


def _live_totals(t: mt.Table) -> dict[str | None, set[int]]:
    out: dict[str | None, set[int]] = {}
    for e in ManifestIO(t.fileio).live_entries(t.latest_snapshot()):
        out.setdefault(e.partition[0], set()).add(e.total_buckets)
    return out


def _state(t: mt.Table) -> dict[tuple[int, str], int]:
    return {(r["id"], r["dt"]): r["v"] for r in t.read().to_pylist()}


@pytest.mark.parametrize("options", [{}, {"deletion-vectors.enabled": "true"}], ids=["lsm", "deletion-vectors"])
@settings(
    max_examples=int(os.environ.get("MT_PROPERTY_EXAMPLES", "10")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=8), buckets=st.integers(1, 3))
def test_rescale_never_changes_a_read(options: dict[str, str], steps: list[Any], buckets: int) -> None:
    root = scratch_dir()
    try:
        t = mt.create_table(f"{root}/t", SCHEMA, ["id", "dt"], ["dt"], options={"bucket": str(buckets), **options})
        oracle: dict[tuple[int, str], int] = {}
        for s in steps:
            if s[0] == "write":
                last = {(k, dt): (v, delete) for k, dt, v, delete in s[1]}  # one record per key and commit
                puts = [(k, dt, v) for (k, dt), (v, d) in last.items() if not d]
                drops = [(k, dt) for (k, dt), (_, d) in last.items() if d]
                totals = _live_totals(t)
                option = int(t.options["bucket"])
                refused = any(totals.get(dt, {option}) != {option} for _, dt in last)
                data = pa.table(
                    {
                        "id": [p[0] for p in puts] + [d[0] for d in drops],
                        "dt": [p[1] for p in puts] + [d[1] for d in drops],
                        "v": [p[2] for p in puts] + [None] * len(drops),
                    },
                    schema=SCHEMA,
                )
                kinds = ["+I"] * len(puts) + ["-D"] * len(drops)
                if refused:
                    with pytest.raises(CommitConflictError, match="new bucket num"):
                        t.write(data, row_kind=kinds)
                else:
                    t.write(data, row_kind=kinds)
                    oracle.update({(k, dt): v for k, dt, v in puts})
                    for key in drops:
                        oracle.pop(key, None)
            elif s[0] == "rescale":
                _, n, dt = s
                t.rescale(bucket=n, partitions=None if dt is None else [{"dt": dt}])
                totals = _live_totals(t)
                if dt is None:
                    assert t.options["bucket"] == str(n) and all(v == {n} for v in totals.values())
                else:
                    assert totals.get(dt, {n}) == {n}
            else:
                t.compact(full=s[1])
            if not options:
                assert _state(t) == oracle, s
        t.compact(full=True)  # a deletion-vector table shows level 0 once compacted
        assert _state(t) == oracle
        for (k, dt), v in list(oracle.items())[:5]:  # bucket pruning with each partition's own count
            assert t.read(filter=[("id", "=", k), ("dt", "=", dt)]).column("v").to_pylist() == [v]
    finally:
        shutil.rmtree(root, ignore_errors=True)
