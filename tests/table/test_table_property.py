"""Random writes/deletes over several commits, buckets and partitions against a dict oracle."""

from __future__ import annotations

import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mergetable as mt

SCHEMA = pa.schema([("k", pa.int32()), ("p", pa.string()), ("v", pa.int64()), ("s", pa.string())])

op = st.tuples(
    st.sampled_from(["+I", "+U", "-D", "-U"]),
    st.integers(0, 30),  # key
    st.sampled_from(["x", "y"]),  # partition
    st.one_of(st.none(), st.integers(-1000, 1000)),
)
commit = st.lists(op, min_size=1, max_size=25)


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["merge-on-read", "deletion-vectors"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    commits=st.lists(commit, min_size=1, max_size=6), buckets=st.integers(1, 4), buffer=st.sampled_from(["1kb", "64mb"])
)
def test_reads_at_every_snapshot_match_the_oracle(
    deletion_vectors: bool, commits: list[list[tuple[str, int, str, int | None]]], buckets: int, buffer: str
) -> None:
    root = tempfile.mkdtemp()
    try:
        t = mt.create_table(
            f"{root}/t",
            SCHEMA,
            primary_key=["k", "p"],
            partition_keys=["p"],
            options={
                "bucket": str(buckets),
                "write-buffer-size": buffer,
                "manifest.merge-min-count": "3",
                "deletion-vectors.enabled": str(deletion_vectors).lower(),
            },
        )
        oracle: dict[tuple[int, str], tuple[int | None, str]] = {}
        states: dict[int, dict[tuple[int, str], tuple[int | None, str]]] = {}
        for n, ops in enumerate(commits):
            rows = pa.table(
                {
                    "k": [o[1] for o in ops],
                    "p": [o[2] for o in ops],
                    "v": [o[3] for o in ops],
                    "s": [f"c{n}" for _ in ops],
                },
                schema=SCHEMA,
            )
            snap = t.write(rows, row_kind=[o[0] for o in ops])
            for kind, k, p, v in ops:
                if kind in ("+I", "+U"):
                    oracle[(k, p)] = (v, f"c{n}")
                else:
                    oracle.pop((k, p), None)
            assert snap is not None
            # a deletion-vector table shows a commit once its compaction (the next snapshot) is committed
            states[t.latest_snapshot_id() if deletion_vectors else snap.id] = dict(oracle)
        for sid, expected in states.items():
            got = {(r["k"], r["p"]): (r["v"], r["s"]) for r in t.read(snapshot_id=sid).to_pylist()}
            assert got == expected, f"snapshot {sid}"
        # filtered reads agree with filtering the oracle
        got = {(r["k"], r["p"]) for r in t.read(filter=[("k", "<", 10), ("p", "=", "x")]).to_pylist()}
        assert got == {key for key in oracle if key[0] < 10 and key[1] == "x"}
        key = next(iter(oracle), None)
        if key is not None:
            hit = t.read(filter=[("k", "=", key[0]), ("p", "=", key[1])]).to_pylist()
            assert [(r["v"], r["s"]) for r in hit] == [oracle[key]]
    finally:
        shutil.rmtree(root, ignore_errors=True)
